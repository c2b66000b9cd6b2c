"""The ``minismt`` command: one subcommand per job, each with a --help that explains it.

Each command imports the heavy modules it needs (the tuners, the decoder, the plugins, sacrebleu,
distributed) when it runs, inside its function: ``minismt --help`` and every command's --help take
0.11 s instead of 1.4 s with those imports at the top of this module.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys

from corpora.cli import add_corpora_command
from minismt import __version__
from minismt.decode.settings import PER_CHUNK, DecoderSettings
from minismt.errors import InputError
from minismt.io import (atomic_write, check_readable_file, check_writable_dir, check_writable_file, read_lines, stdin_lines,
                        write_lines)
from minismt.manifest import load_manifest
from minismt.pipeline.cli import add_pipeline_commands
from minismt.progress import log


def _at_least(flag: str, value: int, low: int) -> None:
    """A numeric option below its minimum is an error naming the option as the user typed it."""
    if value < low:
        raise InputError(f"{flag} {value}", expected=f"an integer >= {low}")


def _eval_command(args) -> int:
    from minismt.metrics.evaluate import evaluate_files
    result = evaluate_files(args.hyp, args.ref, lowercase=args.lowercase, tokenize=args.tokenize)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"BLEU  {result['bleu']:.2f}  "
              f"({'/'.join(f'{p:.1f}' for p in result['bleu_precisions'])}, "
              f"BP {result['bleu_bp']:.3f}, hyp {result['sys_len']}, ref {result['ref_len']})")
        print(f"chrF2 {result['chrf']:.2f}")
        print(f"TER   {result['ter']:.2f}")
        print(f"signature: {result['signature']}")
    return 0


def _add_eval(sub) -> None:
    p = sub.add_parser(
        "eval", help="corpus BLEU, chrF and TER of a hypothesis file (sacrebleu)",
        description="Score a hypothesis file (one sentence per line, plain or gzipped) against "
                    "one or more reference files with sacrebleu's defaults: BLEU (13a tokenizer, "
                    "exp smoothing), chrF2 and TER. The numbers are identical to the sacrebleu "
                    "command line's; the signature names every setting.")
    p.add_argument("--hyp", required=True, metavar="FILE", help="hypothesis file, one line per sentence")
    p.add_argument("--ref", required=True, action="append", metavar="FILE",
                   help="reference file with the same number of lines; repeat for several references")
    p.add_argument("--lowercase", action="store_true",
                   help="case-insensitive BLEU and chrF (sacrebleu -lc; TER is case-insensitive anyway)")
    p.add_argument("--tokenize", default=None, metavar="NAME",
                   help="BLEU tokenizer: 13a (default), none (for tokenised text, as in tuning), "
                        "intl, char, ...")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (keys bleu, chrf, ter, signature, ...) as the last line")
    p.set_defaults(run=_eval_command)


def _extract_command(args) -> int:
    from plugins.moses.extractor import extract
    check_readable_file(args.nbest, "--nbest")
    for path in args.ref:
        check_readable_file(path, "--ref")
    check_writable_file(args.ffile, "--ffile")
    check_writable_file(args.scfile, "--scfile")
    kbest = extract(args.nbest, args.ref, args.ffile, args.scfile, fmt=args.format,
                    lowercase=args.lowercase, dedup=not args.no_dedup)
    print(f"extracted {kbest.n_hypotheses} hypotheses of {kbest.n_instances} sentences, "
          f"{kbest.space.n_dense} dense and {len(kbest.space) - kbest.space.n_dense} sparse features",
          file=sys.stderr)
    return 0


def _add_extract(sub) -> None:
    p = sub.add_parser(
        "extract", help="n-best list + references -> Moses features.dat and scores.dat",
        description="Do what Moses' 'extractor --sctype BLEU' does: read an n-best list (Moses, "
                    "or cdec with --format cdec), compute the 9 BLEU statistics of every "
                    "hypothesis against the references (clipped matches and n-gram counts for "
                    "n=1..4, closest reference length), and write features.dat and scores.dat, "
                    "which Moses' mert, kbmira and pro and minismt's tuners read.")
    p.add_argument("--nbest", required=True, metavar="FILE", help="n-best list (plain or gzipped)")
    p.add_argument("--ref", required=True, action="append", metavar="FILE",
                   help="reference file, one line per sentence; repeat for several references")
    p.add_argument("--ffile", required=True, metavar="FILE", help="features.dat to write")
    p.add_argument("--scfile", required=True, metavar="FILE", help="scores.dat to write")
    p.add_argument("--format", choices=["moses", "cdec"], default="moses",
                   help="n-best format (default moses; cdec: every feature name becomes dense)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive statistics")
    p.add_argument("--no-dedup", action="store_true",
                   help="keep repeated hypotheses (same string and features) of a sentence")
    p.set_defaults(run=_extract_command)


def _train_command(args) -> int:
    from minismt.train import Trainer, TrainingConfig
    for flag, path in (("--src", args.src), ("--tgt", args.tgt), ("--lm-text", args.lm_text),
                       *(("--grammar-for", p) for p in args.grammar_for)):
        if path is not None:
            check_readable_file(path, flag)
    if args.grammar_for and not args.hiero:
        raise InputError("--grammar-for without --hiero", expected="--hiero --grammar-for FILE")
    check_writable_dir(args.out, "--out")
    if not 2 <= args.lm_order <= 6:
        raise InputError(f"--lm-order {args.lm_order}", expected="an order from 2 to 6")
    for flag, value in (("--max-length", args.max_length), ("--max-phrase-length", args.max_phrase_length),
                        ("--table-limit", args.table_limit)):
        _at_least(flag, value, 1)
    from minismt.align import check_aligner
    check_aligner(args.aligner)
    config = TrainingConfig(src=args.src, tgt=args.tgt, out=args.out, lm_order=args.lm_order,
                            lm_text=args.lm_text, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                            tokenize=args.tokenize, lowercase=args.lowercase,
                            max_length=args.max_length, max_phrase_length=args.max_phrase_length,
                            table_limit=args.table_limit, aligner=args.aligner,
                            model="hiero" if args.hiero else "phrase",
                            grammar_inputs=tuple(args.grammar_for), progress=not args.quiet)
    trainer = Trainer(config, log=None if args.quiet else log)  # a log line never lands on a bar's line
    trainer.run()
    for record in trainer.records.values():
        state = "cached" if record.cached else f"{record.seconds:7.1f} s  {record.peak_rss_mb:6.0f} MB"
        print(f"{record.name:8s} {state}")
    return 0


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train", help="train a phrase-based or Hiero model: alignment, rules, KN LM",
        description="Train a model from a parallel corpus (plain or gzipped, one "
                    "sentence per line, tokenised unless --tokenize): clean it (empty lines, "
                    "length, length ratio, as Moses' clean-corpus-n.perl), align it in both "
                    "directions (--aligner) and symmetrise with grow-diag-final-and, "
                    "extract and score phrase pairs up to 7 words with msd-bidirectional-fe "
                    "reordering (or, with --hiero, hierarchical rules as Moses' extract-rules "
                    "and score, all kept in a rule store that gives any input its grammar), and estimate an "
                    "interpolated modified Kneser-Ney LM. Writes MODEL/manifest.json, which "
                    "'minismt decode' and 'minismt tune' read, and moses.ini files for Moses; a "
                    "step whose inputs are unchanged is not redone.")
    p.add_argument("--src", required=True, metavar="FILE", help="source side of the training corpus")
    p.add_argument("--tgt", required=True, metavar="FILE", help="target side, same number of lines")
    p.add_argument("--out", required=True, metavar="MODEL", help="model directory to write")
    p.add_argument("--lm-order", type=int, default=4, metavar="N", help="LM order, 2-6 (default 4)")
    p.add_argument("--lm-text", metavar="FILE",
                   help="text for the LM (default: the target side of the cleaned corpus)")
    p.add_argument("--tokenize", action="store_true",
                   help="tokenise with sacremoses (Moses' tokenizer); needs --src-lang/--tgt-lang")
    p.add_argument("--src-lang", metavar="LANG", help="source language code, e.g. de")
    p.add_argument("--tgt-lang", metavar="LANG", help="target language code, e.g. en")
    p.add_argument("--lowercase", action="store_true", help="lowercase both sides (and --lm-text)")
    p.add_argument("--max-length", type=int, default=80, metavar="N",
                   help="drop pairs with a side longer than N words (default 80)")
    p.add_argument("--max-phrase-length", type=int, default=7, metavar="N",
                   help="longest phrase extracted (default 7)")
    p.add_argument("--table-limit", type=int, default=20, metavar="N",
                   help="translations kept per source phrase, by p(e|f) (default 20)")
    p.add_argument("--aligner", default="fast-align", metavar="NAME",
                   help="word aligner: 'fast-align' (the default: IBM Model 2 with a diagonal "
                        "prior, Dyer et al. 2013, the links of fast_align -d -o -v) or 'hmm' "
                        "(5 IBM Model 1 then 5 HMM EM iterations)")
    p.add_argument("--hiero", action="store_true",
                   help="train a hierarchical phrase-based model (Chiang 2007) instead: rules with up "
                        "to 2 non-terminals from initial phrase pairs of up to 10 words, scored as "
                        "Moses' score + consolidate, all kept in a rule store (MODEL/model/rule-store/) "
                        "from which minismt decode, tune, eval and grammar build the grammar of any "
                        "input; MODEL/model/glue-grammar")
    p.add_argument("--grammar-for", action="append", default=[], metavar="FILE",
                   help="with --hiero, optional: a source text (a dev or test set) whose grammar is "
                        "built now, named after the file (MODEL/grammars/NAME/: grammar.npz, Moses' "
                        "rule-table.gz and moses.ini, cdec's files in cdec/; --tokenize and --lowercase "
                        "apply to it as to the corpus); repeat for each set. Any other input's grammar is "
                        "built from the rule store when a command first needs it")
    p.add_argument("--quiet", action="store_true", help="no progress bars or step log on stderr")
    p.set_defaults(run=_train_command)


class CommandLineParser(argparse.ArgumentParser):
    """A usage error is one line on stderr and exit status 2, as every other error (argparse would
    print the whole usage first); its sub-commands' parsers are of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandLineParser(
        prog="minismt",
        description="minismt: tune the weights of statistical machine translation systems with every "
                    "serious method (MERT and hypergraph MERT, PRO, APRO, k-best and online MIRA, rank optimisation, listwise "
                    "ranking, structured SVM, ramp loss, dtrain, minimum risk, Bayesian optimisation), on "
                    "k-best lists or whole forests; train and decode phrase-based and Hiero models that "
                    "emit both; tune Moses and cdec systems with the same tuners. "
                    "Run 'minismt COMMAND --help' for each command.")
    parser.add_argument("--version", action="version", version=f"minismt {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


_SETTING_FLAGS = {"stack_size": "--stack", "beam_threshold": "--beam-threshold", "distortion_limit": "--distortion-limit",
                  "kbest": "--kbest", "sparse_features": "--sparse-features",
                  "word_pair_vocabulary": "--word-pair-vocabulary", "jobs": "--jobs",
                  "pop_limit": "--pop-limit", "max_chart_span": "--max-chart-span"}


def _decoder_settings(args, **values):
    """The command's :class:`~minismt.decode.DecoderSettings`; a bad value's error names its flag."""
    hiero = {name: getattr(args, name) for name in ("pop_limit", "max_chart_span") if hasattr(args, name)}
    return DecoderSettings.from_options(_SETTING_FLAGS, stack_size=args.stack, sparse_features=args.sparse_features,
                                        word_pair_vocabulary=args.word_pair_vocabulary, jobs=args.jobs, **hiero,
                                        **values)


_SPARSE_HELP = ("emit sparse features for large-scale tuning, comma-separated: rule-id (one indicator per "
                "phrase pair or rule, RuleId_<src words>~<tgt words>), word-pair (phrase-based: the aligned "
                "word pairs inside the phrase pairs, WordPair_<src>~<tgt>), rule-shape, source-bigram, "
                "target-bigram (Hiero: the rule's shape and the bigrams of its sides, as cdec); default: none")
_VOCABULARY_HELP = ("with --sparse-features word-pair: only the pairs of two words among the N most frequent "
                    "source and target words of the training corpus (the APRO paper: 500); default: every pair")


def _decode_command(args) -> int:
    from minismt.features import FeatureSpace, read_weights
    from minismt.kbest import kbest_of
    from minismt.parallel import DecodeJob, decode_corpus, named_weights, prepared_executor, stop_pool
    from plugins.moses.nbest import write_kbest_nbest
    settings = _decoder_settings(args, kbest=args.kbest, distinct=not args.derivations,
                                 beam_threshold=args.beam_threshold, distortion_limit=args.distortion_limit)
    if args.kbest and not args.kbest_out:
        raise InputError("--kbest needs --kbest-out FILE")
    _at_least("--mbr-size", args.mbr_size, 1)
    if not (args.mbr_scale > 0 and math.isfinite(args.mbr_scale)):
        raise InputError(f"--mbr-scale {args.mbr_scale}", expected="a finite number > 0")
    if args.kbest_out == "-" or (args.output != "-" and args.output == args.kbest_out):
        raise InputError(f"--kbest-out {args.kbest_out}", expected="a file of its own (not '-' or --output)")
    manifest = load_manifest(args.model)
    from_stdin = args.input == "-"
    sentences = None if from_stdin else read_lines(args.input)
    grammar = None
    if manifest.get("model") == "hiero":
        from minismt.decode.hiero import grammar_for, store_and_lm
        if sentences is None:  # each chunk of lines read gets its grammar from the rule store as it is decoded
            store_and_lm(args.model, lm=False)  # a model without a store says so before any line is read
            grammar = PER_CHUNK
        else:
            grammar = grammar_for(args.model, sentences, args.input, log=None if args.quiet else log,
                                  max_span=settings.max_chart_span)
    weights = dict(manifest["default_weights"])
    if args.weights:
        given = read_weights(args.weights)
        _check_decode_weights(args.weights, given, settings.sparse_features, manifest["features"])
        weights.update(given)
    if args.output != "-":
        check_writable_file(args.output, "--output")
    if args.kbest_out:
        check_writable_file(args.kbest_out, "--kbest-out")
    if args.hypergraph_dir:
        check_writable_dir(args.hypergraph_dir, "--hypergraph-dir")
    elif args.hypergraph_format != "cdec":
        raise InputError(f"--hypergraph-format {args.hypergraph_format} without --hypergraph-dir",
                         expected="--hypergraph-dir DIR: the folder the forests go to")
    space = FeatureSpace(manifest["features"])
    w = space.weights(weights)  # the k-best list's space grows from this one: sparse names of the file first
    writer = None
    if args.hypergraph_dir and args.hypergraph_format == "moses":
        from plugins.moses.hypergraph import write_decoder_forest
        writer = write_decoder_forest
    job = DecodeJob(args.model, settings, *named_weights(space, w), hypergraph_dir=args.hypergraph_dir,
                    hypergraph_writer=writer, grammar=grammar, mbr=args.mbr, mbr_size=args.mbr_size,
                    mbr_scale=args.mbr_scale)
    if args.hypergraph_dir:
        os.makedirs(args.hypergraph_dir, exist_ok=True)
    executor = client = None
    if args.dask_scheduler:
        from minismt.parallel import dask_client
        client = dask_client(args.dask_scheduler)
        executor = client.get_executor()
    pool = prepared_executor(job, executor, settings.jobs)  # the model loaded before the input is read
    try:
        if args.output == "-" or sentences is None:
            outputs, words = _decode_streaming(job, stdin_lines() if sentences is None else sentences, pool,
                                               settings.jobs, args.output)
        else:
            outputs = decode_corpus(job, sentences, executor=pool, jobs=settings.jobs, progress=not args.quiet)
            write_lines(args.output, [o.best for o in outputs])
            words = sum(len(s.split()) for s in sentences)
    except BaseException:
        if pool is not executor:
            stop_pool(pool)
        raise
    finally:
        if client is not None:
            client.close()
    if pool is not executor:
        pool.shutdown()
    if args.kbest:
        write_kbest_nbest(args.kbest_out, kbest_of([o.kbest for o in outputs], space), w)
    print(f"decoded {len(outputs)} sentence{'s' if len(outputs) != 1 else ''} ({words} word{'s' if words != 1 else ''})",
          file=sys.stderr)
    return 0


STREAM_CHUNK = 16
"""The most lines :func:`_decode_streaming` decodes as one chunk (the lines already read when it is made)."""
HIERO_STREAM_CHUNK = 64
"""The same for a Hiero model, which reads each chunk's grammar from its rule store: reading the grammar of 64
lines and setting up its decoder cost 4.7 ms a line on Multi30k (the rules of the patterns most lines share
are read once), for 16 lines 9.8 ms, for one line 40 ms, against about 10 ms to decode a line."""


def _decode_streaming(job, lines, executor, jobs: int, output: str) -> tuple[list, int]:
    """Decode ``lines`` as they come (:func:`~minismt.parallel.decode_stream`): with ``output`` '-' each
    translation is printed and flushed as soon as it and those before it are decoded, else the translations
    go to the file ``output`` (atomically) at the end. Returns the outputs (for the k-best list) and the
    number of source words."""
    from minismt.parallel import decode_stream
    words = 0

    def counted():
        nonlocal words
        for line in lines:
            words += len(line.split())
            yield line

    outputs = []
    stream = decode_stream(job, counted(), executor=executor, jobs=jobs,
                           chunk_size=HIERO_STREAM_CHUNK if job.grammar == PER_CHUNK else STREAM_CHUNK)
    for sentence in stream:
        outputs.append(sentence)
        if output == "-":
            try:
                sys.stdout.buffer.write(sentence.best.encode("utf-8") + b"\n")
                sys.stdout.flush()
            except BrokenPipeError:  # the reader left (| head): stop decoding, quietly
                stream.close()
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                break
    if output != "-":
        write_lines(output, [o.best for o in outputs])
    return outputs, words


def _check_decode_weights(path: str, weights: dict, sparse_features: tuple[str, ...],
                          feature_names: list[str]) -> None:
    """Every name of a --weights file is one of the model's features or of an enabled sparse family;
    an error names the file and the line."""
    from minismt.decode.sparse import family_of
    from minismt.features import weight_line
    for name in weights:
        if name in feature_names:
            continue
        family = family_of(name)
        if family is None:
            raise InputError(f"unknown feature name {name!r}", path, weight_line(path, name),
                             expected="one of " + " ".join(feature_names) + " or a sparse feature")
        if family not in sparse_features:
            raise InputError(f"weight of the sparse feature {name!r}, but the decoder's {family} features are off",
                             path, weight_line(path, name), expected=f"--sparse-features including {family}")


def _add_hiero_search_options(p) -> None:
    p.add_argument("--pop-limit", type=int, default=DecoderSettings.pop_limit, metavar="N",
                   help="Hiero models: cube pruning's pops per chart cell (default 200, as cdec; Moses' "
                        "chart decoder pops 1000)")
    p.add_argument("--max-chart-span", type=int, default=DecoderSettings.max_chart_span, metavar="N",
                   help="Hiero models: the longest span a rule-table rule covers (default 10, Chiang 2007; "
                        "Moses uses 20); glue rules cover any span")


def _add_decode(sub) -> None:
    p = sub.add_parser(
        "decode", help="translate with a trained model, phrase-based or Hiero (1-best, k-best, hypergraphs, MBR)",
        description="Translate tokenised text (one sentence per line; standard input to standard output by "
                    "default, line by line) with a model from 'minismt train': a phrase-based model by "
                    "stack decoding with the LM, the 4 phrase scores, word and phrase penalties, distance "
                    "distortion, msd-bidirectional-fe reordering and an unknown-word penalty (Moses' "
                    "feature set); a Hiero model by its chart decoder, on the input's grammar (read from the "
                    "model's rule store the first time, then cached in it). "
                    "Writes the 1-best translations (or the MBR / consensus choice, --mbr); optionally "
                    "the k-best list in Moses n-best format and each sentence's search graph as a cdec "
                    "JSON hypergraph. Sentences are decoded in parallel processes (--jobs) or on a Dask "
                    "cluster (--dask-scheduler).")
    p.add_argument("--model", required=True, metavar="MODEL", help="model directory from 'minismt train'")
    p.add_argument("--input", default="-", metavar="FILE",
                   help="source sentences, tokenised, one per line; '-' (the default): standard input, each "
                        "line translated as soon as it is read (lines that arrive together are decoded in chunks "
                        "of up to 16, or 64 with a Hiero model, which reads each chunk's grammar from its rule "
                        "store)")
    p.add_argument("--output", default="-", metavar="FILE",
                   help="1-best translations to write (atomically, at the end); '-' (the default): standard "
                        "output, each line printed as soon as it and the lines before it are decoded")
    p.add_argument("--weights", metavar="FILE",
                   help="weights file ('name value' lines); default: the model's untuned weights")
    p.add_argument("--kbest", type=int, default=DecoderSettings.kbest, metavar="K",
                   help="also write the K best translations")
    p.add_argument("--kbest-out", metavar="FILE", help="where to write the k-best list (Moses n-best format)")
    p.add_argument("--derivations", action="store_true",
                   help="k-best derivations, which can repeat strings (default: distinct strings)")
    p.add_argument("--hypergraph-dir", metavar="DIR",
                   help="write each sentence's search graph (a Hiero model's: its forest) as DIR/<i>.json.gz "
                        "(cdec JSON), or with --hypergraph-format moses as DIR/<i>.gz")
    p.add_argument("--hypergraph-format", choices=("cdec", "moses"), default="cdec",
                   help="cdec: cdec's JSON forests (default); moses: Moses' search-graph hypergraphs "
                        "(-output-search-graph-hypergraph true gz: what kbmira --type hypergraph reads)")
    p.add_argument("--mbr", choices=("kbest", "forest"), default=None,
                   help="translate with the highest expected BLEU instead of the highest score: 'kbest', "
                        "minimum Bayes risk over the --mbr-size best distinct translations (Kumar & Byrne 2004, "
                        "Moses -mbr); 'forest', consensus decoding: those candidates against the expected "
                        "n-gram counts of every derivation of the search graph (DeNero et al. 2009)")
    p.add_argument("--mbr-size", type=int, default=200, metavar="N",
                   help="--mbr: the candidates and the k-best evidence (default 200, as Moses' -mbr-size)")
    p.add_argument("--mbr-scale", type=float, default=1.0, metavar="S",
                   help="--mbr: the posterior is exp(S * model score), normalised (default 1, as Moses' "
                        "-mbr-scale)")
    p.add_argument("--stack", type=int, default=DecoderSettings.stack_size, metavar="N",
                   help=f"stack size (default {DecoderSettings.stack_size}, as Moses)")
    p.add_argument("--beam-threshold", type=float, default=DecoderSettings.beam_threshold, metavar="X",
                   help=f"drop hypotheses worse than X times the best of their stack "
                        f"(default {DecoderSettings.beam_threshold:g}, as Moses)")
    p.add_argument("--distortion-limit", type=int, default=DecoderSettings.distortion_limit, metavar="N",
                   help="maximum jump (default: the model's, 6)")
    p.add_argument("--sparse-features", default=None, metavar="LIST",
                   help=_SPARSE_HELP + ". Their weights come from --weights by name (weight 0 if not given)")
    p.add_argument("--word-pair-vocabulary", type=int, default=None, metavar="N", help=_VOCABULARY_HELP)
    _add_hiero_search_options(p)
    p.add_argument("--jobs", type=int, default=DecoderSettings.jobs, metavar="N",
                   help=f"decoding processes (default {DecoderSettings.jobs})")
    p.add_argument("--dask-scheduler", metavar="ADDRESS",
                   help="decode on a Dask distributed cluster (e.g. tcp://host:8786) instead")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_decode_command)


def _grammar_command(args) -> int:
    from minismt.decode.hiero import grammar_for, load_model
    from minismt.extract.hiero_export import write_cdec_files
    from minismt.features import read_weights
    from minismt.manifest import moses_chart_ini
    check_readable_file(args.input, "--input")
    manifest = load_manifest(args.model, kind="hiero")
    weights = dict(manifest["default_weights"])
    if args.weights:
        given = read_weights(args.weights)
        _check_decode_weights(args.weights, given, (), manifest["features"])
        weights.update(given)
    check_writable_dir(args.out, "--out")
    sentences = read_lines(args.input)
    grammar, lm, _ = load_model(args.model, grammar_for(args.model, sentences, args.input,
                                                        log=None if args.quiet else log))
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    write_lines(os.path.join(out, "input.txt"), sentences)
    rules = grammar.write_moses(os.path.join(out, "rule-table.gz"))
    with atomic_write(os.path.join(out, "moses.ini")) as ini:
        ini.write(moses_chart_ini(args.model, manifest, os.path.join(out, "rule-table.gz"),
                                  os.path.basename(args.input), weights if args.weights else None))
    lm_path = os.path.join(args.model, manifest["files"]["lm_arpa"])
    cdec = write_cdec_files(grammar, sentences, os.path.join(out, "cdec"), lm_path, weights, lm)
    print(f"grammar of {len(sentences)} sentences: {rules} rules in {out}/rule-table.gz (moses.ini beside it), "
          f"{cdec['rules']} after cdec's table limit in {out}/cdec/", file=sys.stderr)
    return 0


def _add_grammar(sub) -> None:
    p = sub.add_parser(
        "grammar", help="write the Moses and cdec grammar files of a Hiero model for any input",
        description="Build the grammar of a source text from a Hiero model's rule store (every rule whose "
                    "source side matches a sentence, as Moses' filter-model-given-input.pl keeps them) and "
                    "write it for the real decoders: OUT/rule-table.gz and OUT/moses.ini for Moses' chart "
                    "decoder (moses -f OUT/moses.ini -i OUT/input.txt), and OUT/cdec/ (grammar.gz cut to "
                    "Moses' table limit of 20 under the weights, glue, cdec.ini, weights, input.txt with "
                    "<s> </s>) for cdec (cdec -c OUT/cdec/cdec.ini -w OUT/cdec/weights -i OUT/cdec/input.txt).")
    p.add_argument("--model", required=True, metavar="MODEL", help="Hiero model directory from 'minismt train --hiero'")
    p.add_argument("--input", required=True, metavar="FILE", help="source sentences, tokenised, one per line")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the files into")
    p.add_argument("--weights", metavar="FILE",
                   help="weights file ('name value' lines) for moses.ini and cdec's weights and table limit; "
                        "default: the model's untuned weights")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(run=_grammar_command)


def _program_decoder(args, sources: list[str]):
    """The Moses or cdec dev decoder that ``--decoder`` names, configured from the command line."""
    from plugins.cdec.driver import CdecDevDecoder
    from plugins.moses.driver import MosesDevDecoder
    if not args.decoder_cmd or not args.config:
        raise InputError(f"--decoder {args.decoder} without --decoder-cmd and --config",
                         expected=f"--decoder-cmd '{args.decoder} ...' --config FILE")
    try:
        command = shlex.split(args.decoder_cmd)
    except ValueError as err:
        raise InputError(f"--decoder-cmd {args.decoder_cmd!r}: {err}", expected="a command line") from None
    work_dir = os.path.join(args.run_dir, "decoder")
    if args.decoder == "moses":
        return MosesDevDecoder(command, args.config, sources, work_dir, kbest=args.kbest)
    if not args.init:
        raise InputError("--decoder cdec without --init", expected="--init WEIGHTS: cdec's start weights file")
    return CdecDevDecoder(command, args.config, args.init, sources, work_dir, kbest=args.kbest)


def _patterns(values: list[str]) -> list[str]:
    """The feature name patterns of repeated, comma-separated --fix/--free values."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _tune_command(args) -> int:
    from minismt.decode.sparse import family_of
    from minismt.features import read_weights
    from tuners.base import get_tuner, parse_tuner_params
    from tuners.runs import minismt_tuning_run, tuning_run
    _at_least("--iterations", args.iterations, 1)
    _at_least("--kbest", args.kbest, 1)
    settings = _decoder_settings(args, kbest=args.kbest)
    if args.reset_after is not None:
        _at_least("--reset-after", args.reset_after, 1)
    if args.forest_prune is not None:
        _at_least("--forest-prune", args.forest_prune, 0)
    tuner_params = parse_tuner_params(args.tuner_param)
    get_tuner(args.tuner, **tuner_params)  # an unknown tuner or parameter fails before any work
    check_writable_dir(args.run_dir, "--run-dir")
    sources = read_lines(args.dev_src)
    if not sources:
        raise InputError("empty file", args.dev_src, expected="one dev sentence per line (--dev-src)")
    ref_sets = [read_lines(path) for path in args.dev_ref]
    for path, lines in zip(args.dev_ref, ref_sets):
        if len(lines) != len(sources):
            raise InputError(f"{len(lines)} lines, but --dev-src has {len(sources)}", path,
                             expected="one reference line per dev sentence")
    options = dict(accumulate=args.accumulate, reset_after=args.reset_after, iterations=args.iterations,
                   seed=args.seed, keep=args.keep, lowercase=args.lowercase, params=tuner_params,
                   on_iteration=lambda line: print(line, flush=True), fix=_patterns(args.fix),
                   free=_patterns(args.free), forest_prune=args.forest_prune, step_search=args.step_search,
                   decode_norm=args.decode_norm, accept=args.accept)
    references = list(zip(*ref_sets))
    client = None
    if args.dask_scheduler and args.decoder != "minismt":
        raise InputError(f"--dask-scheduler with --decoder {args.decoder}",
                         expected="--decoder minismt (Moses and cdec run on this machine, as --decoder-cmd says)")
    if args.decoder == "minismt":
        if not args.model:
            raise InputError("--decoder minismt without --model", expected="--model MODEL (from 'minismt train')")
        if args.dask_scheduler:
            from minismt.parallel import dask_client
            client = dask_client(args.dask_scheduler)
        run = minismt_tuning_run(args.model, sources, references, args.tuner, args.run_dir, settings,
                                 progress=not args.quiet, executor=None if client is None else client.get_executor(),
                                 **options)
    elif settings.sparse_features:
        raise InputError(f"--sparse-features with --decoder {args.decoder}",
                         expected="--decoder minismt (Moses and cdec configure their own sparse features)")
    else:
        program = _program_decoder(args, sources)
        program.keep_forests = args.keep_forests
        run = tuning_run(program, references, args.tuner, args.run_dir, **options)
    decoder = run.decoder
    start = decoder.default_weights
    if args.init and args.decoder != "cdec":
        try:
            init = read_weights(args.init)
            if getattr(decoder, "sparse_features", ()):
                for name in init:  # start weights of the enabled sparse features join the space
                    if family_of(name) in decoder.sparse_features:
                        decoder.space.add(name)
            start = decoder.space.weights(init, grow=False, require_dense=True)
        except InputError as err:
            if err.path is not None:
                raise
            raise InputError(err.message, args.init, expected=err.expected) from None
    try:
        final = run.run(start)
    finally:
        decoder.close()
        if client is not None:
            client.close()
    if run.history:
        best = max(run.history, key=lambda r: (r.dev_bleu, -r.iteration))
        chosen = f"the best dev BLEU, {100 * best.dev_bleu:.2f} at iteration {best.iteration}" \
            if args.keep == "best" else "the last iteration's"
        print(f"weights written to {args.run_dir}/weights.final ({chosen})", flush=True)
    if args.decoder != "minismt":
        name = "moses.ini" if args.decoder == "moses" else "weights.cdec"
        decoder.write_config(final, os.path.join(args.run_dir, name))
        print(f"tuned {args.decoder} configuration written to {args.run_dir}/{name}")
    return 0


def _add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="tune the weights of a trained model, a Moses or a cdec system on a dev set with any tuner",
        description="Tune the log-linear weights of a model from 'minismt train' (or of a Moses or cdec "
                    "system: --decoder moses|cdec): each iteration "
                    "decodes the dev set into distinct k-best lists, accumulates them across "
                    "iterations (merge, as Moses; aggregate, for listwise tuners; or none), runs "
                    "the tuner, moves towards its weights as far as the dev set's search graphs reward "
                    "(--step-search), keeps the step only if its decode does not lower the dev BLEU "
                    "(--accept), and checkpoints. Stops after --iterations or when the k-best lists "
                    "stop changing; writes RUN_DIR/weights.final ('name value' lines; the weights "
                    "with the best dev BLEU unless --keep last), tune.log and history.json. A run "
                    "that was killed resumes from its last checkpoint with the same command.")
    p.add_argument("--decoder", choices=["minismt", "moses", "cdec"], default="minismt",
                   help="who decodes the dev set: minismt's decoder (--model, the default), Moses "
                        "(--decoder-cmd 'moses ...' --config moses.ini; writes RUN_DIR/moses.ini) or "
                        "cdec (--decoder-cmd 'cdec ...' --config cdec.ini --init weights; writes "
                        "RUN_DIR/weights.cdec)")
    p.add_argument("--model", metavar="MODEL", help="model directory from 'minismt train' (--decoder minismt)")
    p.add_argument("--decoder-cmd", metavar="CMD",
                   help="the Moses or cdec program and its own flags, e.g. 'moses -threads 2'; run without "
                        "a shell, the driver adds the config, weights, k-best and input arguments")
    p.add_argument("--config", metavar="FILE", help="the moses.ini or cdec.ini to tune")
    p.add_argument("--dev-src", required=True, metavar="FILE", help="dev source sentences, tokenised")
    p.add_argument("--dev-ref", required=True, action="append", metavar="FILE",
                   help="dev references; repeat for several")
    p.add_argument("--tuner", required=True, metavar="NAME",
                   help="the tuner: mert, pro, apro, kbmira (n-best); oro, o-oro, mira, dtrain (online, decode "
                        "their own mini-batches; dtrain also trains on a training subset given as --dev-src, "
                        "in shards mixed after each epoch with feature selection); listnet, listnet-te, listmle, listmle-top5, "
                        "listmle-te (listwise); structsvm (structured SVM); rampion (ramp loss by CCCP); hg-mert (hypergraph "
                        "MERT); minrisk, hg-minrisk (minimum risk: expected BLEU on k-best lists or "
                        "whole forests); nbl-bo, hg-bo, chg-bo, hg-rembo (Bayesian optimisation on "
                        "k-best lists or forests)")
    p.add_argument("--run-dir", required=True, metavar="DIR", help="checkpoints, log and weights.final")
    p.add_argument("--init", metavar="FILE",
                   help="start weights ('name value' lines, one for every feature of the model); "
                        "default: the model's untuned weights (Moses: those of moses.ini). For cdec, "
                        "required: the weights file whose names are the features to tune")
    p.add_argument("--tuner-param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the tuner, e.g. C=0.001 (VALUE read as JSON when it is); repeat")
    p.add_argument("--fix", action="append", default=[], metavar="NAMES",
                   help="features whose weights stay at their start values (comma-separated names or shell "
                        "patterns, e.g. 'LM0_0,LexicalReordering0_*'; repeat); the tuners still count them in "
                        "every score. Moses' tuneable=false features (and UnknownWordPenalty0) are fixed "
                        "without it, as mert-moses.pl fixes them")
    p.add_argument("--free", action="append", default=[], metavar="NAMES",
                   help="tune features the configuration fixes: for cdec, features the --init weights file "
                        "does not name (e.g. --free 'RuleShape*'); Moses' tuneable=false features cannot be "
                        "freed (Moses leaves them out of its n-best lists)")
    p.add_argument("--forest-prune", type=int, default=None, metavar="N",
                   help="hypergraph tuners: tune on the N x (reference words) edges of each forest with the "
                        "best max-marginal under the decoding weights, as Moses' kbmira --hg-prune; 0: the whole "
                        "forest; default: 50 with --decoder moses (as Moses), else 0")
    p.add_argument("--step-search", choices=["forest", "none"], default=None,
                   help="how far each iteration moves from the weights it decoded with towards the tuner's: "
                        "'forest', to the point of that step whose translations in the dev set's search graphs "
                        "(pruned to 50 edges per reference word) have the best corpus BLEU, an exact line search "
                        "(the lattice line search of Macherey et al. 2008): a step whose weights the k-best lists "
                        "reward but the search does not is cut short, and the search graphs' best translations "
                        "under the tuner's weights join the k-best lists; 'none', all the way. Default: 'forest' "
                        "for every tuner that does not fit on forests (with --decoder moses|cdec, each decode then "
                        "writes the k-best lists and the search graphs in one run), else 'none'")
    p.add_argument("--accept", choices=["decoded", "any"], default="decoded",
                   help="which steps an iteration keeps: 'decoded' (the default), a step only when its decoded "
                        "dev BLEU is not below that of the weights it started from; else the step is halved and "
                        "decoded again, at most 3 times, and then the iteration goes on from the weights it "
                        "started from (a backtracking line search on the decoded dev BLEU; every trial's k-best "
                        "lists are kept, and tune.log says each trial); 'any': every step, as before. For every "
                        "tuner and decoder")
    p.add_argument("--decode-norm", choices=["l1", "none"], default=None,
                   help="'l1': decode every tuned weight vector scaled to an L1 norm of 1, as mert-moses.pl does: "
                        "the ranking of translations does not depend on the scale, the search's threshold "
                        "pruning does (weights that grow prune ever harder); not done when a fixed feature has "
                        "a non-zero weight. 'none': the tuner's weights as they are. Default: 'l1' for the "
                        "n-best tuners (mert, pro, apro, kbmira, listwise, structsvm; not nbl-bo, whose box "
                        "is in the weights' units, nor rampion, whose step and cost scale are), else 'none'")
    p.add_argument("--keep-forests", action="store_true",
                   help="--decoder moses|cdec with a hypergraph tuner: keep every decode's forests in "
                        "RUN_DIR/decoder/decode.N/hypergraphs (by default each is deleted once read)")
    p.add_argument("--iterations", type=int, default=10, metavar="N", help="at most N decoding iterations (10)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of every random choice (0)")
    p.add_argument("--kbest", type=int, default=100, metavar="K", help="distinct k-best per sentence (100)")
    p.add_argument("--accumulate", choices=["merge", "aggregate", "none"], default=None,
                   help="how k-best lists are kept across iterations (default: merge, as Moses; "
                        "aggregate, each iteration's list its own instance, for the listwise tuners)")
    p.add_argument("--reset-after", type=int, default=None, metavar="N",
                   help="start accumulating afresh every N iterations (APRO paper)")
    p.add_argument("--keep", choices=["best", "last"], default="best",
                   help="return the best-dev-BLEU weights (default) or the last ones")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument("--stack", type=int, default=DecoderSettings.stack_size, metavar="N",
                   help=f"decoder stack size ({DecoderSettings.stack_size})")
    p.add_argument("--sparse-features", default=None, metavar="LIST",
                   help="--decoder minismt: " + _SPARSE_HELP + ". Their weights start at 0 (or from --init)")
    p.add_argument("--word-pair-vocabulary", type=int, default=None, metavar="N", help=_VOCABULARY_HELP)
    _add_hiero_search_options(p)
    p.add_argument("--jobs", type=int, default=DecoderSettings.jobs, metavar="N",
                   help=f"decoding processes ({DecoderSettings.jobs})")
    p.add_argument("--dask-scheduler", metavar="ADDRESS",
                   help="--decoder minismt: decode the dev set (every tuner's decodes, dtrain's shards) on a Dask "
                        "distributed cluster (e.g. tcp://host:8786) instead of --jobs local processes; each "
                        "worker reads the model folder at the same path. The weights do not depend on it")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=_tune_command)


COMMANDS = [_add_eval, _add_extract, _add_train, _add_decode, _add_grammar, _add_tune, add_corpora_command,
            add_pipeline_commands]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except InputError as err:
        print(f"minismt: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a disk or permission failure the up-front checks could not foresee
        where = f"{err.filename}: " if err.filename else ""
        print(f"minismt: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("minismt: interrupted (tune, pipeline and demo resume when run again)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
