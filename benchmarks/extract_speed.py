"""Phrase-table training speed (Moses train-model.perl steps 4-7) on Multi30k de-en train.

29,000 sentence pairs (quick: the first 3,000), tokenised with ``minismt.corpus.Tokenizer``
and lowercased as the Moses reference system's corpus. The word alignment comes from
``minismt.align.align_corpus`` (grow-diag-final-and) when that is importable, else from a
deterministic diagonal stand-in (target word j linked to source word round(j * I / J));
the result says which. Reports the seconds of each step, the number of phrase pairs
(all extracted, and after the table limit of 20), the size of the written tables and the
peak resident memory (of the whole process; before phrase extraction started; after
training, before writing). The Moses reference (fixtures/moses/m30k/README.md) needs 24.3 s for
steps 4-9 on the same machine class (lexical 1 s, extract 8 s, score 13 s, reordering 3 s)
and writes 792,055 phrase pairs. Without ../shared a synthetic corpus of the same size
is used.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from minismt.corpus import Alignment, TokenArray, Tokenizer, Vocabulary, read_parallel
from minismt.extract import (PhraseTable, extract_phrase_pairs, write_moses_phrase_table,
                             write_moses_reordering_table)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"
MOSES_SECONDS = {"lexical": 1.0, "extract": 8.0, "score": 13.0, "reordering": 3.0}


def _corpus(n_pairs: int) -> tuple[str, list[str], list[str]]:
    if (CORPUS / "train.de.gz").exists():
        de, en = read_parallel(CORPUS / "train.de.gz", CORPUS / "train.en.gz")
        de, en = de[:n_pairs], en[:n_pairs]
        tok_de, tok_en = Tokenizer("de"), Tokenizer("en")
        return "multi30k train de-en", [tok_de(s) for s in de], [tok_en(s) for s in en]
    rng = np.random.default_rng(0)
    src_words = [f"s{i}" for i in range(10_000)]
    tgt_words = [f"t{i}" for i in range(8_000)]
    zipf_s = 1.0 / np.arange(1, len(src_words) + 1)
    zipf_t = 1.0 / np.arange(1, len(tgt_words) + 1)
    src, tgt = [], []
    for _ in range(n_pairs):
        length = int(rng.integers(6, 20))
        src.append(" ".join(rng.choice(src_words, length, p=zipf_s / zipf_s.sum())))
        tgt.append(" ".join(rng.choice(tgt_words, length + int(rng.integers(-2, 3)),
                                       p=zipf_t / zipf_t.sum())))
    return "synthetic (../shared/corpora/multi30k absent)", src, tgt


def diagonal_alignment(src: TokenArray, tgt: TokenArray) -> Alignment:
    """Target word j of a pair with I source and J target words linked to source word
    round(j * I / J) (clipped): a cheap deterministic stand-in for a real aligner."""
    src_len = np.diff(src.offsets)
    tgt_len = np.diff(tgt.offsets)
    has = (src_len > 0) & (tgt_len > 0)
    per_sentence = np.where(has, tgt_len, 0)
    sentence = np.repeat(np.arange(len(src)), per_sentence)
    offsets = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(per_sentence, out=offsets[1:])
    j = np.arange(offsets[-1], dtype=np.int64) - offsets[:-1][sentence]
    i = np.minimum(np.rint(j * src_len[sentence] / tgt_len[sentence]).astype(np.int64),
                   src_len[sentence] - 1)
    return Alignment(np.column_stack([i, j]).astype(np.int32), offsets)


def _align(src: TokenArray, tgt: TokenArray) -> tuple[str, Alignment]:
    try:
        from minismt.align import align_corpus
    except ImportError:
        return "diagonal stand-in (minismt.align.align_corpus not importable)", diagonal_alignment(src, tgt)
    result = align_corpus(src, tgt, method="grow-diag-final-and", jobs=2)
    return "minismt.align.align_corpus grow-diag-final-and", result.symmetric


def run(quick: bool = False) -> dict:
    n_pairs = 3_000 if quick else 29_000
    started = time.perf_counter()
    source, src_lines, tgt_lines = _corpus(n_pairs)
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(src_lines, src_vocab)
    tgt = TokenArray.from_sentences(tgt_lines, tgt_vocab)
    prepare_s = time.perf_counter() - started
    started = time.perf_counter()
    aligner, alignment = _align(src, tgt)
    align_s = time.perf_counter() - started
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    # compile (or load the cached) numba kernels on a tiny corpus, outside the timings
    extract_phrase_pairs(TokenArray(src.ids[:src.offsets[2]], src.offsets[:3]),
                         TokenArray(tgt.ids[:tgt.offsets[2]], tgt.offsets[:3]),
                         Alignment(alignment.links[:alignment.offsets[2]], alignment.offsets[:3]),
                         src_vocab, tgt_vocab)
    pairs = extract_phrase_pairs(src, tgt, alignment, src_vocab, tgt_vocab, table_limit=20)
    table = pairs.table
    peak_trained = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        write_moses_phrase_table(table, os.path.join(folder, "phrase-table.gz"))
        write_moses_reordering_table(table, os.path.join(folder, "reordering-table.wbe-msd-bidirectional-fe.gz"))
        write_gz_s = time.perf_counter() - started
        started = time.perf_counter()
        write_moses_phrase_table(table, os.path.join(folder, "phrase-table"))
        write_moses_reordering_table(table, os.path.join(folder, "reordering-table"))
        write_text_s = time.perf_counter() - started
        started = time.perf_counter()
        table.save(os.path.join(folder, "phrase-table.npz"))
        save_s = time.perf_counter() - started
        started = time.perf_counter()
        loaded = PhraseTable.load(os.path.join(folder, "phrase-table.npz"))
        load_s = time.perf_counter() - started
        sizes = {name: os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)}
    assert len(loaded) == len(table)
    t = pairs.timings
    core = t["extraction"] + t["scoring"] + t["reordering"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "corpus": source, "sentence_pairs": len(src), "source_tokens": int(src.ids.shape[0]),
        "target_tokens": int(tgt.ids.shape[0]), "alignment": aligner,
        "alignment_links": int(alignment.links.shape[0]),
        "tokenise_seconds": round(prepare_s, 2), "align_seconds": round(align_s, 2),
        "lexical_seconds": round(t["lexical tables"], 3),
        "extraction_seconds": round(t["extraction"], 3),
        "scoring_seconds": round(t["scoring"], 3),
        "reordering_seconds": round(t["reordering"], 3),
        "extraction_scoring_reordering_seconds": round(core, 3),
        "target_seconds": 30.0, "within_target": core <= 30.0,
        "moses_seconds": MOSES_SECONDS,
        "write_moses_gz_seconds": round(write_gz_s, 2),
        "write_moses_text_seconds": round(write_text_s, 2),
        "save_npz_seconds": round(save_s, 3), "load_npz_seconds": round(load_s, 3),
        "extracted_occurrences": pairs.n_occurrences,
        "phrase_pairs": pairs.n_pairs, "phrase_pairs_table_limit_20": len(table),
        "source_phrases": table.n_sources,
        "file_bytes": sizes,
        "peak_rss_bytes": peak, "peak_rss_mb": round(peak / 1024 ** 2, 1),
        "peak_rss_before_extraction_mb": round(peak_before / 1024 ** 2, 1),
        "peak_rss_after_training_mb": round(peak_trained / 1024 ** 2, 1),
    }


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv)))
