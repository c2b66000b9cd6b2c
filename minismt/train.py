"""``minismt train``: corpus -> word alignment -> phrase table + reordering model -> KN language model.

The model directory holds every artefact and a ``manifest.json`` that
``minismt decode`` and ``minismt tune`` read::

    MODEL/manifest.json                      files, feature names, default weights, steps
    MODEL/corpus/train.{src,tgt}             the cleaned training text (tokenised as given)
    MODEL/align/aligned.{forward,reverse,grow-diag-final-and}   Pharaoh alignments
    MODEL/model/phrase-table.gz              Moses text phrase table
    MODEL/model/reordering-table.wbe-msd-bidirectional-fe.gz
    MODEL/model/phrase-table/                the arrays the decoder memory-maps (.npy, with the index)
    MODEL/model/rule-store/                  (--hiero) every scored rule, for any input's grammar
    MODEL/grammars/NAME/                     (--hiero --grammar-for) a grammar built at training time
    MODEL/lm/lm.N.arpa                       interpolated modified Kneser-Ney N-gram LM
    MODEL/lm/lm.N.tables/                    the same LM as the decoder's query tables (memory-mapped)
    MODEL/moses.ini                          the same model for Moses' decoder (absolute paths)
    MODEL/train.log                          what each step did, its time and peak memory

Each step records a key (sha256 of its inputs' contents and its parameters);
when the key is unchanged and its outputs exist, the step is not redone. A step
imports its module (:mod:`minismt.align`, :mod:`minismt.extract`, :mod:`minismt.lm`
and their numba kernels) when it runs: ``minismt train`` with every step cached
takes 0.22 s instead of 0.44 s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from minismt import __version__
from minismt.corpus import (DEFAULT_MAX_LENGTH, DEFAULT_MAX_RATIO, Alignment, TokenArray,
                            Tokenizer, Vocabulary, clean_pairs, read_parallel)
from minismt.errors import InputError
from minismt.io import atomic_write, file_sha256, read_lines, write_lines
from minismt.manifest import (DEFAULT_WEIGHTS, HIERO_DEFAULT_WEIGHTS, MANIFEST, MANIFEST_FORMAT,
                              MANIFEST_VERSION, MODEL_KINDS, moses_chart_ini, moses_ini)
from minismt.progress import bar as progress_bar

PHRASE_TABLE = "model/phrase-table"
"""The phrase table in the folder form the decoder memory-maps (:class:`~minismt.extract.PhraseTable`)."""
RULE_STORE = "model/rule-store"
"""The model folder's Hiero rule store (:mod:`minismt.extract.hiero_store`)."""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class TrainingConfig:
    """Parameters of ``minismt train`` (the defaults are Moses' and the papers')."""

    src: str
    tgt: str
    out: str
    lm_order: int = 4
    lm_text: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    tokenize: bool = False
    lowercase: bool = False
    max_length: int = DEFAULT_MAX_LENGTH
    max_ratio: float = DEFAULT_MAX_RATIO
    max_phrase_length: int = 7
    table_limit: int = 20
    reordering_smoothing: float = 0.5
    ibm1_iterations: int = 5
    hmm_iterations: int = 5
    aligner: str = "fast-align"
    model: str = "phrase"
    grammar_inputs: tuple[str, ...] = ()
    progress: bool = True


@dataclass
class StepRecord:
    name: str
    key: str
    outputs: list[str]
    seconds: float
    peak_rss_mb: float
    info: dict = field(default_factory=dict)
    cached: bool = False


class Trainer:
    """Runs the training steps into a model directory, skipping steps whose inputs are unchanged."""

    def __init__(self, config: TrainingConfig, log: Callable[[str], None] | None = None):
        if config.tokenize and not (config.src_lang and config.tgt_lang):
            raise InputError("--tokenize needs --src-lang and --tgt-lang", expected="--src-lang de --tgt-lang en")
        if config.model not in MODEL_KINDS:
            raise InputError(f"model {config.model!r}", expected=" or ".join(MODEL_KINDS))
        self.grammar_names = grammar_names(config.grammar_inputs)
        self.config = config
        self.out = os.path.abspath(config.out)
        self._log_callback = log
        self.records: dict[str, StepRecord] = {}
        self.manifest = self._read_manifest()

    # ---- bookkeeping -------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return os.path.join(self.out, *parts)

    def log(self, message: str) -> None:
        os.makedirs(self.out, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path("train.log"), "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")
        if self._log_callback is not None:
            self._log_callback(message)

    def _read_manifest(self) -> dict:
        path = os.path.join(self.out, MANIFEST)
        if not os.path.exists(path):
            return {}
        try:
            with open(path, encoding="utf-8") as handle:
                manifest = json.load(handle)
        except (OSError, ValueError) as err:
            raise InputError(f"unreadable model manifest ({err})", path) from None
        if manifest.get("format") != MANIFEST_FORMAT:
            raise InputError("not a minismt model manifest", path, expected=f"format {MANIFEST_FORMAT}")
        return manifest

    def _write_manifest(self) -> None:
        self.manifest.update({
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "minismt": __version__,
            "src_lang": self.config.src_lang, "tgt_lang": self.config.tgt_lang,
        })
        with atomic_write(self.path(MANIFEST)) as out:
            json.dump(self.manifest, out, indent=2, sort_keys=True)
            out.write("\n")

    def _step(self, name: str, key_parts: dict, outputs: list[str], run: Callable[[], dict]) -> StepRecord:
        key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()
        previous = self.manifest.get("steps", {}).get(name)
        if previous and previous.get("key") == key and all(os.path.exists(self.path(o)) for o in outputs):
            record = StepRecord(name, key, outputs, previous.get("seconds", 0.0),
                                previous.get("peak_rss_mb", 0.0), previous.get("info", {}), cached=True)
            self.log(f"{name}: unchanged, not redone")
            self.records[name] = record
            return record
        self.log(f"{name}: running")
        start = time.perf_counter()
        info = run() or {}
        record = StepRecord(name, key, outputs, round(time.perf_counter() - start, 3),
                            round(_peak_rss_mb(), 1), info)
        self.records[name] = record
        self.manifest.setdefault("steps", {})[name] = {
            "key": key, "outputs": outputs, "seconds": record.seconds,
            "peak_rss_mb": record.peak_rss_mb, "info": info}
        self._write_manifest()
        self.log(f"{name}: done in {record.seconds:.1f} s, peak memory {record.peak_rss_mb:.0f} MB; "
                 + ", ".join(f"{k}={v}" for k, v in info.items()))
        return record

    # ---- steps ------------------------------------------------------------------
    def prepare(self) -> StepRecord:
        c = self.config
        outputs = ["corpus/train.src", "corpus/train.tgt"]
        key = {"src": file_sha256(c.src), "tgt": file_sha256(c.tgt), "tokenize": c.tokenize,
               "lowercase": c.lowercase, "src_lang": c.src_lang, "tgt_lang": c.tgt_lang,
               "max_length": c.max_length, "max_ratio": c.max_ratio}

        def run():
            src, tgt = read_parallel(c.src, c.tgt)
            if c.tokenize:
                src = _tokenize_all(src, Tokenizer(c.src_lang, c.lowercase), c.progress, "tokenise src")
                tgt = _tokenize_all(tgt, Tokenizer(c.tgt_lang, c.lowercase), c.progress, "tokenise tgt")
            elif c.lowercase:
                src = [s.lower() for s in src]
                tgt = [t.lower() for t in tgt]
            src, tgt, _, report = clean_pairs(src, tgt, max_length=c.max_length, max_ratio=c.max_ratio)
            if report.kept == 0:
                raise InputError("no sentence pair is left after cleaning", c.src,
                                 expected="non-empty pairs within the length limits")
            os.makedirs(self.path("corpus"), exist_ok=True)
            write_lines(self.path("corpus", "train.src"), src)
            write_lines(self.path("corpus", "train.tgt"), tgt)
            self.log(f"prepare: {report}")
            return {"pairs": report.kept, "dropped": sum(report.dropped.values()),
                    "dropped_reasons": report.dropped}

        return self._step("prepare", key, outputs, run)

    def _load_corpus(self):
        src_lines = read_lines(self.path("corpus", "train.src"))
        tgt_lines = read_lines(self.path("corpus", "train.tgt"))
        src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
        return (TokenArray.from_sentences(src_lines, src_vocab),
                TokenArray.from_sentences(tgt_lines, tgt_vocab), src_vocab, tgt_vocab)

    def align(self) -> StepRecord:
        c = self.config
        outputs = ["align/aligned.forward", "align/aligned.reverse", "align/aligned.grow-diag-final-and"]
        key = {"corpus": self._outputs_key("prepare"), "aligner": c.aligner,
               "ibm1": c.ibm1_iterations, "hmm": c.hmm_iterations}

        def run():
            from minismt.align import align_corpus
            src, tgt, _, _ = self._load_corpus()
            result = align_corpus(src, tgt, ibm1_iterations=c.ibm1_iterations,
                                  hmm_iterations=c.hmm_iterations, aligner=c.aligner,
                                  progress=c.progress)
            os.makedirs(self.path("align"), exist_ok=True)
            result.forward.write(self.path(outputs[0]))
            result.reverse.write(self.path(outputs[1]))
            result.symmetric.write(self.path(outputs[2]))
            return {"links": int(result.symmetric.links.shape[0])}

        return self._step("align", key, outputs, run)

    def extract(self) -> StepRecord:
        c = self.config
        outputs = ["model/phrase-table.gz", "model/reordering-table.wbe-msd-bidirectional-fe.gz",
                   f"{PHRASE_TABLE}/table.json"]
        key = {"corpus": self._outputs_key("prepare"), "align": self._outputs_key("align"),
               "max_length": c.max_phrase_length, "table_limit": c.table_limit,
               "smoothing": c.reordering_smoothing}

        def run():
            from minismt.extract import (train_phrase_table, write_moses_phrase_table,
                                         write_moses_reordering_table)
            src, tgt, src_vocab, tgt_vocab = self._load_corpus()
            alignment = Alignment.read(self.path("align", "aligned.grow-diag-final-and"))
            table = train_phrase_table(src, tgt, alignment, src_vocab, tgt_vocab,
                                       max_length=c.max_phrase_length, table_limit=c.table_limit,
                                       reordering_smoothing=c.reordering_smoothing, progress=c.progress)
            os.makedirs(self.path("model"), exist_ok=True)
            write_moses_phrase_table(table, self.path(outputs[0]))
            write_moses_reordering_table(table, self.path(outputs[1]))
            table.save(self.path(PHRASE_TABLE))
            return {"phrase_pairs": len(table)}

        return self._step("extract", key, outputs, run)

    def _preprocess(self, lines: list[str]) -> list[str]:
        """Input text made like the training text: tokenised and lowercased as ``prepare`` did."""
        c = self.config
        if c.tokenize:
            return _tokenize_all(lines, Tokenizer(c.src_lang, c.lowercase), False, "tokenise input")
        return [line.lower() for line in lines] if c.lowercase else lines

    def hiero(self) -> StepRecord:
        """Hiero rules (Chiang 2007, as Moses' extract-rules + score + consolidate): the full scored
        table as a rule store (``model/rule-store/``, from which the grammar of any input is read,
        :mod:`minismt.extract.hiero_store`), the glue grammar, and for each ``--grammar-for`` input
        its grammar built now: ``grammars/NAME/{input.txt, grammar.npz, rule-table.gz}``."""
        from minismt.extract.hiero import DEFAULT_HIERO_OPTIONS
        from minismt.extract.hiero_grammar import FORMAT, VERSION
        from minismt.extract.hiero_store import STORE_FORMAT, STORE_VERSION
        c = self.config
        outputs = ["model/glue-grammar", f"{RULE_STORE}/store.json"]
        for name in self.grammar_names:
            outputs += [f"grammars/{name}/input.txt", f"grammars/{name}/grammar.npz",
                        f"grammars/{name}/rule-table.gz"]
        key = {"corpus": self._outputs_key("prepare"), "align": self._outputs_key("align"),
               "inputs": {name: file_sha256(path)
                          for name, path in zip(self.grammar_names, c.grammar_inputs)},
               "options": asdict(DEFAULT_HIERO_OPTIONS), "grammar_format": [FORMAT, VERSION],
               "store_format": [STORE_FORMAT, STORE_VERSION],
               "tokenize": c.tokenize, "lowercase": c.lowercase}

        def run():
            from minismt.extract.hiero_grammar import write_glue_grammar
            from minismt.extract.hiero_store import RuleStore, build_rule_store
            src, tgt, src_vocab, tgt_vocab = self._load_corpus()
            alignment = Alignment.read(self.path("align", "aligned.grow-diag-final-and"))
            report = build_rule_store(src, tgt, alignment, src_vocab, tgt_vocab, self.path(RULE_STORE),
                                      progress=c.progress)
            del src, tgt, alignment
            os.makedirs(self.path("model"), exist_ok=True)
            write_glue_grammar(self.path("model", "glue-grammar"))
            store = RuleStore(self.path(RULE_STORE))
            sizes, started = {}, time.perf_counter()
            for name, path in zip(self.grammar_names, c.grammar_inputs):
                lines = self._preprocess(read_lines(path))
                grammar = store.grammar(lines)
                os.makedirs(self.path("grammars", name), exist_ok=True)
                write_lines(self.path("grammars", name, "input.txt"), lines)
                grammar.save(self.path("grammars", name, "grammar.npz"))
                grammar.write_moses(self.path("grammars", name, "rule-table.gz"))
                sizes[name] = len(grammar)
            info = report.as_dict()
            info["seconds"]["grammars"] = round(time.perf_counter() - started, 2)
            self.log(f"hiero: {report.rules_kept:,} rules (from {report.occurrences:,} rule occurrences "
                     f"of {report.pairs:,} pairs) in {RULE_STORE}/"
                     + "".join(f", {name} {n:,} rules" for name, n in sizes.items()))
            return {"rules": sizes, "occurrences": info["occurrences"],
                    "rules_total": info["rules_total"],
                    "rules_by_nonterminals": info["rules_by_nonterminals"],
                    "store_bytes": _folder_bytes(self.path(RULE_STORE)),
                    "stage_seconds": info["seconds"]}

        return self._step("hiero", key, outputs, run)

    def cdec(self) -> StepRecord:
        """cdec's files for each grammar (``grammars/NAME/cdec/``: grammar cut to Moses' table limit
        under the default weights, Moses-style glue, cdec.ini, weights, input with <s> </s>)."""
        outputs = [f"grammars/{name}/cdec/{f}" for name in self.grammar_names
                   for f in ("grammar.gz", "glue", "cdec.ini", "weights", "input.txt")]
        lm_file = f"lm/lm.{self.config.lm_order}.arpa"
        key = {"hiero": self._outputs_key("hiero"), "lm": self._outputs_key("lm"),
               "weights": HIERO_DEFAULT_WEIGHTS, "folder": self.out}

        def run():
            from minismt.extract.hiero_export import write_cdec_files
            from minismt.extract.hiero_grammar import HieroGrammar
            from minismt.lm import LanguageModel
            lm = LanguageModel.from_arpa(self.path(lm_file))
            rules = {}
            for name in self.grammar_names:
                grammar = HieroGrammar.load(self.path("grammars", name, "grammar.npz"))
                info = write_cdec_files(grammar, read_lines(self.path("grammars", name, "input.txt")),
                                        self.path("grammars", name, "cdec"), self.path(lm_file),
                                        HIERO_DEFAULT_WEIGHTS, lm)
                rules[name] = info["rules"]
            return {"rules_after_table_limit": rules}

        return self._step("cdec", key, outputs, run)

    def lm(self) -> StepRecord:
        c = self.config
        name = f"lm/lm.{c.lm_order}.arpa"
        tables = f"lm/lm.{c.lm_order}.tables"    # the same LM as the decoder's query tables, memory-mapped
        text_key = file_sha256(c.lm_text) if c.lm_text else self._outputs_key("prepare")
        key = {"text": text_key, "order": c.lm_order, "lowercase": c.lowercase if c.lm_text else None}

        def run():
            from minismt.lm import estimate_kn, write_arpa
            if c.lm_text:
                lines = read_lines(c.lm_text)
                if c.lowercase:
                    lines = [line.lower() for line in lines]
            else:
                lines = read_lines(self.path("corpus", "train.tgt"))
            model = estimate_kn(lines, order=c.lm_order, progress=c.progress)
            os.makedirs(self.path("lm"), exist_ok=True)
            write_arpa(model, self.path(name))
            from minismt.lm import LanguageModel
            LanguageModel.from_arpa(self.path(name)).save(self.path(tables))   # the numbers the ARPA file says
            return {"order": c.lm_order, "lines": len(lines)}

        return self._step("lm", key, [name, f"{tables}/lm.json"], run)

    def _outputs_key(self, step: str) -> str:
        """A digest of a finished step's outputs, so later steps redo only when those change."""
        record = self.records.get(step)
        if record is None:
            raise InputError(f"step {step!r} has not run")
        digest = hashlib.sha256()
        for output in record.outputs:
            digest.update(file_sha256(self.path(output)).encode())
        return digest.hexdigest()

    def run(self) -> dict:
        """Every step in order; returns the manifest. A failure is written to ``train.log`` too."""
        try:
            return self._run_steps()
        except (InputError, OSError) as err:
            with contextlib.suppress(OSError):  # an unwritable folder cannot take the log line either
                self.log(f"failed: {err}")
            raise

    def _run_steps(self) -> dict:
        self.prepare()
        self.align()
        if self.config.model == "hiero":
            self.hiero()
            self.lm()
            self.cdec()
            self._finish_hiero()
        else:
            self.extract()
            self.lm()
            self._finish_phrase()
        self._write_manifest()
        total = sum(r.seconds for r in self.records.values() if not r.cached)
        self.log(f"model written to {self.out} ({total:.1f} s of work)")
        return self.manifest

    def _moses_can_read(self) -> bool:
        if any(c.isspace() for c in self.out):
            self.log(f"moses.ini not written: Moses cannot read a path with whitespace ({self.out})")
            return False
        return True

    def _finish_hiero(self) -> None:
        self.manifest["model"] = "hiero"
        self.manifest["files"] = {
            "train_src": "corpus/train.src", "train_tgt": "corpus/train.tgt",
            "alignment": "align/aligned.grow-diag-final-and",
            "glue_grammar": "model/glue-grammar",
            "rule_store": RULE_STORE,
            "lm_arpa": f"lm/lm.{self.config.lm_order}.arpa",
            "lm_tables": f"lm/lm.{self.config.lm_order}.tables",
        }
        sizes = self.records["hiero"].info.get("rules", {})
        self.manifest["grammars"] = {
            name: {"source": os.path.abspath(path), "source_sha256": file_sha256(path),
                   "input": f"grammars/{name}/input.txt",
                   "grammar": f"grammars/{name}/grammar.npz",
                   "rule_table_text": f"grammars/{name}/rule-table.gz", "rules": sizes.get(name)}
            for name, path in zip(self.grammar_names, self.config.grammar_inputs)}
        self.manifest["lm_order"] = self.config.lm_order
        self.manifest["features"] = list(HIERO_DEFAULT_WEIGHTS)
        self.manifest["default_weights"] = dict(HIERO_DEFAULT_WEIGHTS)
        self.manifest.pop("distortion_limit", None)
        self.manifest["files"].pop("moses_ini", None)
        if self._moses_can_read():
            for name, entry in self.manifest["grammars"].items():
                with atomic_write(self.path("grammars", name, "moses.ini")) as out:
                    out.write(moses_chart_ini(self.out, self.manifest,
                                              self.path(self.manifest["grammars"][name]["rule_table_text"]), name))
                entry["moses_ini"] = f"grammars/{name}/moses.ini"
        for name, entry in self.manifest["grammars"].items():
            entry.update({"cdec_ini": f"grammars/{name}/cdec/cdec.ini",
                          "cdec_weights": f"grammars/{name}/cdec/weights",
                          "cdec_input": f"grammars/{name}/cdec/input.txt"})

    def _finish_phrase(self) -> None:
        self.manifest["model"] = "phrase"
        self.manifest.pop("grammars", None)
        self.manifest["files"] = {
            "train_src": "corpus/train.src", "train_tgt": "corpus/train.tgt",
            "alignment": "align/aligned.grow-diag-final-and",
            "phrase_table": PHRASE_TABLE,
            "phrase_table_text": "model/phrase-table.gz",
            "reordering_table_text": "model/reordering-table.wbe-msd-bidirectional-fe.gz",
            "lm_arpa": f"lm/lm.{self.config.lm_order}.arpa",
            "lm_tables": f"lm/lm.{self.config.lm_order}.tables",
        }
        self.manifest["lm_order"] = self.config.lm_order
        self.manifest["features"] = list(DEFAULT_WEIGHTS)
        self.manifest["default_weights"] = dict(DEFAULT_WEIGHTS)
        self.manifest["distortion_limit"] = 6
        if self._moses_can_read():
            with atomic_write(self.path("moses.ini")) as out:
                out.write(moses_ini(self.out, self.manifest))
            self.manifest["files"]["moses_ini"] = "moses.ini"


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)


def grammar_names(paths) -> list[str]:
    """A folder name per input file for its grammar: the file name without ``.gz`` and its last
    suffix (``test_2016.de`` -> ``test_2016``), numbered when two would be the same."""
    names: list[str] = []
    for path in paths:
        base = os.path.basename(os.fspath(path))
        base = base[:-3] if base.endswith(".gz") else base
        stem = os.path.splitext(base)[0] or base or "input"
        name, k = stem, 2
        while name in names:
            name, k = f"{stem}-{k}", k + 1
        names.append(name)
    return names


def _tokenize_all(lines, tokenizer: Tokenizer, progress: bool, what: str) -> list[str]:
    return [tokenizer(line) for line in progress_bar(lines, desc=what, unit="line", enabled=progress)]
