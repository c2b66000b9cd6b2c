"""Hierarchical (SCFG) grammar files: Moses' rule table and cdec's per-sentence grammar.

Both formats hold one rule per line, fields separated by ``|||``; tokens inside a
field are separated by spaces or tabs (written as one space). Lines must not be
blank. Both readers stream (:func:`iter_moses_rules`, :func:`iter_cdec_rules`,
gzip transparent) into :class:`GrammarRule`; both writers write atomically.

**Moses** (``extract-rules`` + ``score`` + ``consolidate --Hierarchical``; also the
glue grammar), 3 to 7 fields::

    src [X][X] [X] ||| tgt [X][X] [X] ||| scores ||| alignment ||| counts ||| sparse ||| properties

* source side: terminals and non-terminals, last token the source left-hand side
  ``[L]``; a non-terminal is ``[S][T]`` (its source label, then the label of the
  target non-terminal it is linked to). Target side likewise, last token the target
  left-hand side (``[S]`` in the glue grammar); a linked pair is written with the
  same ``[S][T]`` token on both sides (anything else is refused). At least one
  source symbol; the target may be empty (a deletion rule).
* scores: numbers (probabilities; Moses takes their log), any count.
* alignment: ``i-j`` links between source and target *symbol* positions (0-based,
  left-hand sides excluded), terminals and non-terminals together. Each non-terminal
  is linked to exactly one non-terminal of the other side (that is the co-indexing);
  terminals only to terminals. Written sorted by (i, j), as Moses writes them.
* counts: count(target) count(source) count(source, target) (any number is kept).
* sparse features and properties: kept as text.

Trailing fields that are empty are written as Moses does: ``... ||| 21 15 13 ||| |||``.

**cdec** (``TRule::ReadFromString``), 3 to 5 fields::

    [X] ||| src [X,1] b [X,2] ||| tgt [X,2] c [X,1] ||| Name=value ... ||| 0-0 2-3

* left-hand side: one token ``[L]``.
* source non-terminals ``[L,k]`` (k a digit 1-9) must be numbered 1, 2, ... left to
  right: cdec ignores the source index and numbers them itself, so other numbering
  would silently mean something else and is refused. A source token ``[X]`` or
  ``[X,0]`` is a terminal, as for cdec.
* target non-terminals ``[L,k]`` or ``[k]`` (cdec ignores the label): k refers to the
  k-th source non-terminal; each is used exactly once.
* scores: either all named ``Name=value`` or all unnamed ``v1 v2 ...`` (cdec names
  unnamed scores ``PhraseModel_0`` .. ``PhraseModel_9``, at most 10; mixing the two
  is refused, as is a name given twice).
* alignment (optional, cdec ignores it when decoding): ``i-j`` links between
  terminal positions counted in the symbol sequences (non-terminals count, as in
  ``amerika [X,1] . ||| american [X,1] . ||| ... ||| 0-0 2-2``), kept and written in
  file order (cdec's extractor does not sort them: ``auf [X,1] ||| in a [X,1] of |||
  ... ||| 0-3 0-0``).

**The rule** (:class:`GrammarRule`): ``lhs`` is the (target) left-hand side label;
``source`` and ``target`` are tuples of terminals (``str``) and non-terminals
(:class:`NT` ``(label, index)``, index 1-based = position among the source
non-terminals); on the source side the label is the source label, on the target
side the target label (None for cdec's ``[k]``). ``alignment`` holds terminal
links only (Moses: sorted; cdec: in file order). Unnamed scores are ``scores``
(float64 array), named ones ``features``.
Moses-only parts: ``source_lhs`` (None = same as ``lhs``), ``counts``, ``sparse``,
``properties``. A field absent from the line is None.

**Byte-for-byte**: numbers are written with the text they were read from while their
value is unchanged, otherwise ``%g`` when that is exact, else Python's shortest
``repr``; so what a tool wrote comes back byte for byte, provided its line used
single spaces, ``\\n`` endings and (cdec) no empty score field.

**Conversion**: a rule read from one format can be written in the other.
Moses -> cdec keeps lhs, sides, co-indexing, alignment and the scores (written
unnamed, i.e. cdec's ``PhraseModel_0..k``; values as they are, no log taken); it
drops ``source_lhs``, counts, sparse features and properties. cdec -> Moses needs
unnamed scores (named features are refused) and writes ``[L]`` target labels for
``[k]`` from the linked source label, and sorts the alignment.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import parse_float
from minismt.io import atomic_write, iter_lines

SEPARATOR = "|||"
MAX_CDEC_UNNAMED = 10

_SPACE = re.compile(r"[ \t]+")
_LABEL = r"[^\[\]\s|]+"
_MOSES_NT = re.compile(rf"\[({_LABEL})\]\[({_LABEL})\]")
_MOSES_LHS = re.compile(rf"\[({_LABEL})\]")
_CDEC_LHS = _MOSES_LHS
_CDEC_SRC_NT = re.compile(rf"\[({_LABEL}),([1-9])\]")
_CDEC_TGT_NT = re.compile(rf"\[(?:({_LABEL}),)?([1-9])\]")
_LINK = re.compile(r"(0|[1-9][0-9]{0,8})-(0|[1-9][0-9]{0,8})")
_LABEL_OK = re.compile(_LABEL)


class NT(NamedTuple):
    """A non-terminal: its label and its index (1-based, order among the source non-terminals)."""

    label: str | None
    index: int


@dataclass(eq=False)
class GrammarRule:
    """One synchronous rule (see the module docstring for the fields)."""

    lhs: str
    source: tuple
    target: tuple
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    features: dict[str, float] = field(default_factory=dict)
    alignment: tuple[tuple[int, int], ...] | None = None
    counts: tuple[float, ...] | None = None
    source_lhs: str | None = None
    sparse: str | None = None
    properties: str | None = None
    line: int = 0
    number_text: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.source = tuple(self.source)
        self.target = tuple(self.target)
        self.scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)

    def _key(self):
        return (self.lhs, self.source, self.target, tuple(self.scores.tolist()), self.features,
                self.alignment, self.counts, self.source_lhs, self.sparse, self.properties)

    def __eq__(self, other):
        if not isinstance(other, GrammarRule):
            return NotImplemented
        return self._key() == other._key()

    @property
    def arity(self) -> int:
        """Number of non-terminals."""
        return sum(isinstance(s, NT) for s in self.source)

    def cdec_features(self) -> dict[str, float]:
        """The scores under the names cdec gives them (``PhraseModel_k`` for unnamed ones)."""
        named = {f"PhraseModel_{k}": float(v) for k, v in enumerate(self.scores)}
        named.update(self.features)
        return named


# ---- shared helpers --------------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    text = text.strip(" \t")
    return _SPACE.split(text) if text else []


def _fields(text: str, path, line: int, low: int, high: int, what: str) -> list[str]:
    if not text.strip(" \t"):
        raise InputError("blank line", path, line, what)
    fields = text.split(SEPARATOR)
    if not low <= len(fields) <= high:
        raise InputError(f"{len(fields)} fields", path, line, f"{low} to {high} fields separated by "
                         f"'|||': {what}")
    return fields


def _numbers(text: str, path, line: int, what: str) -> tuple[list[float], tuple[str, ...]]:
    tokens = _tokens(text)
    return [parse_float(t, path, line, what) for t in tokens], tuple(tokens)


def _links(text: str, path, line: int) -> list[tuple[int, int]]:
    links = []
    for token in _tokens(text):
        match = _LINK.fullmatch(token)
        if match is None:
            raise InputError(f"alignment point {token[:40]!r}", path, line, "i-j")
        links.append((int(match.group(1)), int(match.group(2))))
    if len(set(links)) != len(links):
        raise InputError("an alignment point is given twice", path, line, "distinct i-j points")
    return links


def _check_terminal_links(links, source, target, path, line) -> tuple[tuple[int, int], ...]:
    """The links, in their order, after checking that they join terminals of the rule."""
    for i, j in links:
        if i >= len(source) or j >= len(target):
            raise InputError(f"alignment point {i}-{j} outside the rule ({len(source)} source, "
                             f"{len(target)} target symbols)", path, line)
        if isinstance(source[i], NT) or isinstance(target[j], NT):
            raise InputError(f"alignment point {i}-{j} links a non-terminal", path, line,
                             "links between terminals")
    return tuple(links)


def _check_coindexing(source, target, path, line) -> None:
    """Target non-terminals use each source non-terminal index exactly once."""
    arity = sum(isinstance(s, NT) for s in source)
    used = sorted(s.index for s in target if isinstance(s, NT))
    if used != list(range(1, arity + 1)):
        raise InputError(f"target non-terminal indices {used} for {arity} source non-terminals",
                         path, line, "each source non-terminal exactly once on the target side")


def format_number(value: float, text: str | None = None) -> str:
    """``text`` if it reads as ``value`` (same sign), else ``%g`` when exact, else ``repr``."""
    if text is not None:
        try:
            old = float(text)
        except ValueError:
            old = None
        if old == value and math.copysign(1.0, old) == math.copysign(1.0, value):
            return text
    short = "%g" % value
    return short if float(short) == value else repr(float(value))


def _format_numbers(values: Sequence[float], texts: Sequence[str] | None) -> str:
    values = [float(v) for v in values]
    if any(not math.isfinite(v) for v in values):
        raise InputError("a score or count is not finite", expected="finite numbers")
    if texts is None or len(texts) != len(values):
        texts = [None] * len(values)
    return " ".join(format_number(v, t) for v, t in zip(values, texts))


def _check_label(label, what: str) -> str:
    if not isinstance(label, str) or not _LABEL_OK.fullmatch(label):
        raise InputError(f"{what} {label!r} cannot be written",
                         expected="a label without brackets, spaces or '|'")
    return label


def _check_terminal(word, looks_like_nt, what: str) -> str:
    if not isinstance(word, str) or not word or _SPACE.search(word) or SEPARATOR in word \
            or looks_like_nt(word):
        raise InputError(f"terminal {word!r} cannot be written in {what}",
                         expected="a word without spaces or '|||' that is not a non-terminal")
    return word


def _join(*pieces: str) -> str:
    return " ".join(p for p in pieces if p)


def _writer(path, rules: Iterable[GrammarRule], fmt) -> int:
    count = 0
    with atomic_write(path) as out:
        for count, rule in enumerate(rules, 1):
            try:
                out.write(fmt(rule) + "\n")
            except InputError as err:
                raise InputError(f"rule {count}: {err.message}", path, None, err.expected) from None
    return count


# ---- Moses ------------------------------------------------------------------------------


def _moses_side(text: str, path, line: int, what: str):
    tokens = _tokens(text)
    if not tokens:
        raise InputError(f"empty {what} side", path, line, "symbols and a left-hand side [L]")
    lhs = _MOSES_LHS.fullmatch(tokens[-1])
    if lhs is None:
        raise InputError(f"{what} left-hand side {tokens[-1][:40]!r}", path, line, "[L] as last token")
    symbols = []
    for token in tokens[:-1]:
        match = _MOSES_NT.fullmatch(token)
        if match is not None:
            symbols.append(match)
        elif token.startswith("[") and token.endswith("]") and len(token) >= 3:
            raise InputError(f"non-terminal {token[:40]!r}", path, line, "[S][T]")
        else:
            symbols.append(token)
    return lhs.group(1), symbols


def _moses_looks_like_nt(word: str) -> bool:
    return len(word) >= 3 and word.startswith("[") and word.endswith("]")


def parse_moses_rule(text: str, path=None, line: int | None = None) -> GrammarRule:
    """One line of a Moses hierarchical rule table (or glue grammar) as a rule."""
    fields = _fields(text, path, line, 3, 7, "source ||| target ||| scores [||| alignment "
                     "[||| counts [||| sparse [||| properties]]]]")
    source_lhs, src = _moses_side(fields[0], path, line, "source")
    lhs, tgt = _moses_side(fields[1], path, line, "target")
    if not src:
        raise InputError("empty source side", path, line, "at least one source symbol")
    scores, score_text = _numbers(fields[2], path, line, "a score")
    links = _links(fields[3], path, line) if len(fields) > 3 else []
    nt_link = {}
    terminal_links = []
    for i, j in links:
        if i >= len(src) or j >= len(tgt):
            raise InputError(f"alignment point {i}-{j} outside the rule ({len(src)} source, "
                             f"{len(tgt)} target symbols)", path, line)
        s_nt, t_nt = not isinstance(src[i], str), not isinstance(tgt[j], str)
        if s_nt != t_nt:
            raise InputError(f"alignment point {i}-{j} links a terminal to a non-terminal", path,
                             line)
        if not s_nt:
            terminal_links.append((i, j))
        elif i in nt_link or j in nt_link.values():
            raise InputError(f"non-terminal in {i}-{j} is linked twice", path, line,
                             "one link per non-terminal")
        else:
            nt_link[i] = j
            if src[i].group(0) != tgt[j].group(0):
                raise InputError(f"linked non-terminals {src[i].group(0)[:40]!r} and "
                                 f"{tgt[j].group(0)[:40]!r} differ", path, line,
                                 "the same [S][T] token on both sides")
    source, target_index = [], {}
    for i, sym in enumerate(src):
        if isinstance(sym, str):
            source.append(sym)
            continue
        if i not in nt_link:
            raise InputError(f"source non-terminal at {i} is not linked", path, line,
                             "a link i-j to a target non-terminal")
        source.append(NT(sym.group(1), len(target_index) + 1))
        target_index[nt_link[i]] = len(target_index) + 1
    target = []
    for j, sym in enumerate(tgt):
        if isinstance(sym, str):
            target.append(sym)
        elif j not in target_index:
            raise InputError(f"target non-terminal at {j} is not linked", path, line,
                             "a link i-j from a source non-terminal")
        else:
            target.append(NT(sym.group(2), target_index[j]))
    rule = GrammarRule(lhs, tuple(source), tuple(target), np.array(scores, dtype=np.float64),
                       source_lhs=None if source_lhs == lhs else source_lhs, line=line or 0)
    rule.number_text["scores"] = score_text
    if len(fields) > 3:
        rule.alignment = tuple(sorted(terminal_links))
    if len(fields) > 4:
        counts, count_text = _numbers(fields[4], path, line, "a count")
        rule.counts = tuple(counts)
        rule.number_text["counts"] = count_text
    if len(fields) > 5:
        rule.sparse = " ".join(_tokens(fields[5]))
    if len(fields) > 6:
        rule.properties = " ".join(_tokens(fields[6]))
    return rule


def format_moses_rule(rule: GrammarRule) -> str:
    """A rule as one Moses rule-table line (without newline)."""
    if rule.features:
        raise InputError("named features cannot be written to a Moses rule table",
                         expected="unnamed scores")
    source_label = {}
    target_label = {}
    src_tokens, tgt_tokens = [], []
    for sym in rule.source:
        if isinstance(sym, NT):
            source_label[sym.index] = _check_label(sym.label, "non-terminal label")
    for sym in rule.target:
        if isinstance(sym, NT):
            target_label[sym.index] = sym.label if sym.label is not None else \
                source_label.get(sym.index)
    if sorted(source_label) != list(range(1, len(source_label) + 1)) or \
            sorted(source_label) != sorted(target_label) or \
            len(target_label) != sum(isinstance(s, NT) for s in rule.target) or \
            len(source_label) != sum(isinstance(s, NT) for s in rule.source):
        raise InputError("non-terminal indices do not pair source and target",
                         expected="indices 1..n used once on each side")
    if not rule.source:
        raise InputError("empty source side", expected="at least one source symbol")
    for index in target_label:
        _check_label(target_label[index], "non-terminal label")
    nt_links = []
    source_pos = {}
    for i, sym in enumerate(rule.source):
        if isinstance(sym, NT):
            source_pos[sym.index] = i
            src_tokens.append(f"[{sym.label}][{target_label[sym.index]}]")
        else:
            src_tokens.append(_check_terminal(sym, _moses_looks_like_nt, "Moses format"))
    for j, sym in enumerate(rule.target):
        if isinstance(sym, NT):
            nt_links.append((source_pos[sym.index], j))
            tgt_tokens.append(f"[{source_label[sym.index]}][{target_label[sym.index]}]")
        else:
            tgt_tokens.append(_check_terminal(sym, _moses_looks_like_nt, "Moses format"))
    lhs = _check_label(rule.lhs, "left-hand side")
    source_lhs = _check_label(rule.source_lhs or rule.lhs, "source left-hand side")
    terminal = list(rule.alignment or ())
    for i, j in terminal:
        if not (0 <= i < len(rule.source) and 0 <= j < len(rule.target)) or \
                isinstance(rule.source[i], NT) or isinstance(rule.target[j], NT):
            raise InputError(f"alignment point {i}-{j} is not between terminals of the rule")
    links = sorted(set(terminal + nt_links))
    fields = [" ".join(src_tokens + [f"[{source_lhs}]"]), " ".join(tgt_tokens + [f"[{lhs}]"]),
              _format_numbers(rule.scores, rule.number_text.get("scores"))]
    optional = [" ".join(f"{i}-{j}" for i, j in links)
                if (rule.alignment is not None or nt_links) else None,
                None if rule.counts is None else _format_numbers(rule.counts,
                                                                 rule.number_text.get("counts")),
                rule.sparse, rule.properties]
    last = max((k for k, v in enumerate(optional) if v is not None), default=-1)
    for k in range(last + 1):
        text = optional[k] or ""
        if SEPARATOR in text or "\n" in text:
            raise InputError(f"field {k + 4} contains '|||' or a newline")
        fields.append(text)
    pieces = [fields[0]]
    for text in fields[1:]:
        pieces += [SEPARATOR, text]
    return _join(*pieces)


def iter_moses_rules(path: str | os.PathLike) -> Iterator[GrammarRule]:
    """Stream the rules of a Moses rule table or glue grammar (plain or gzipped)."""
    for number, text in iter_lines(path):
        yield parse_moses_rule(text, os.fspath(path), number)


def read_moses_rules(path: str | os.PathLike) -> list[GrammarRule]:
    """All rules of a Moses rule table or glue grammar."""
    return list(iter_moses_rules(path))


def write_moses_rules(path: str | os.PathLike, rules: Iterable[GrammarRule]) -> int:
    """Write rules as a Moses rule table, atomically (gzip when ``path`` ends in .gz); returns
    the number of rules."""
    return _writer(path, rules, format_moses_rule)


# ---- cdec -------------------------------------------------------------------------------


def _cdec_src_looks_like_nt(word: str) -> bool:
    return len(word) > 4 and word[0] == "[" and word[-1] == "]" and word[-3] == "," \
        and "1" <= word[-2] <= "9"


def _cdec_tgt_looks_like_nt(word: str) -> bool:
    return len(word) > 2 and word[0] == "[" and word[-1] == "]" and "1" <= word[-2] <= "9" \
        and (len(word) == 3 or (len(word) > 4 and word[-3] == ","))


def parse_cdec_rule(text: str, path=None, line: int | None = None) -> GrammarRule:
    """One line of a cdec grammar as a rule."""
    fields = _fields(text, path, line, 3, 5, "[L] ||| source ||| target [||| scores [||| alignment]]")
    lhs_tokens = _tokens(fields[0])
    if len(lhs_tokens) != 1 or _CDEC_LHS.fullmatch(lhs_tokens[0]) is None:
        raise InputError(f"left-hand side {fields[0].strip()[:40]!r}", path, line, "one token [L]")
    lhs = lhs_tokens[0][1:-1]
    source = []
    for token in _tokens(fields[1]):
        if _cdec_src_looks_like_nt(token):
            match = _CDEC_SRC_NT.fullmatch(token)
            if match is None:
                raise InputError(f"non-terminal {token[:40]!r}", path, line, "[L,k]")
            index = sum(isinstance(s, NT) for s in source) + 1
            if int(match.group(2)) != index:
                raise InputError(f"source non-terminal {token[:40]!r} is number {index}", path, line,
                                 "source non-terminals numbered 1, 2, ... from left to right")
            source.append(NT(match.group(1), index))
        else:
            source.append(token)
    if not source:
        raise InputError("empty source side", path, line, "at least one source symbol")
    target = []
    for token in _tokens(fields[2]):
        if _cdec_tgt_looks_like_nt(token):
            match = _CDEC_TGT_NT.fullmatch(token)
            if match is None:
                raise InputError(f"non-terminal {token[:40]!r}", path, line, "[L,k] or [k]")
            target.append(NT(match.group(1), int(match.group(2))))
        else:
            target.append(token)
    _check_coindexing(source, target, path, line)
    rule = GrammarRule(lhs, tuple(source), tuple(target), line=line or 0)
    if len(fields) > 3:
        tokens = _tokens(fields[3])
        named = ["=" in t for t in tokens]
        if any(named) and not all(named):
            raise InputError("named and unnamed scores mixed", path, line,
                             "all Name=value or all unnamed")
        if any(named):
            texts = {}
            for token in tokens:
                name, value = token.split("=", 1)
                if not name:
                    raise InputError(f"feature {token[:40]!r} has no name", path, line, "Name=value")
                if name in rule.features:
                    raise InputError(f"feature {name!r} given twice", path, line,
                                     "each name once")
                rule.features[name] = parse_float(value, path, line, f"the value of {name}")
                texts[name] = value
            rule.number_text["features"] = texts
        else:
            if len(tokens) > MAX_CDEC_UNNAMED:
                raise InputError(f"{len(tokens)} unnamed scores", path, line,
                                 f"at most {MAX_CDEC_UNNAMED} (cdec aborts): use Name=value")
            values, texts = _numbers(fields[3], path, line, "a score")
            rule.scores = np.array(values, dtype=np.float64)
            rule.number_text["scores"] = texts
    if len(fields) > 4:
        rule.alignment = _check_terminal_links(_links(fields[4], path, line), source, target, path,
                                               line)
    return rule


def format_cdec_rule(rule: GrammarRule, names: Sequence[str] | None = None) -> str:
    """A rule as one cdec grammar line (without newline). Unnamed scores are written unnamed,
    or as ``name=value`` with ``names`` (one per score)."""
    lhs = _check_label(rule.lhs, "left-hand side")
    if not rule.source:
        raise InputError("empty source side", expected="at least one source symbol")
    src_tokens, tgt_tokens = [], []
    for sym in rule.source:
        if isinstance(sym, NT):
            index = len([t for t in src_tokens if _cdec_src_looks_like_nt(t)]) + 1
            if sym.index != index:
                raise InputError(f"source non-terminal {sym} is number {index}",
                                 expected="source indices 1, 2, ... from left to right")
            if index > 9:
                raise InputError("more than 9 non-terminals", expected="at most 9 (cdec)")
            src_tokens.append(f"[{_check_label(sym.label, 'non-terminal label')},{index}]")
        else:
            src_tokens.append(_check_terminal(sym, _cdec_src_looks_like_nt, "cdec format"))
    for sym in rule.target:
        if isinstance(sym, NT):
            if sym.label is None:
                tgt_tokens.append(f"[{sym.index}]")
            else:
                tgt_tokens.append(f"[{_check_label(sym.label, 'non-terminal label')},{sym.index}]")
        else:
            tgt_tokens.append(_check_terminal(sym, _cdec_tgt_looks_like_nt, "cdec format"))
    try:
        _check_coindexing(rule.source, rule.target, None, None)
    except InputError as err:
        raise InputError(err.message, expected=err.expected) from None
    if rule.features and len(rule.scores):
        raise InputError("both named and unnamed scores", expected="one kind")
    if rule.features:
        texts = rule.number_text.get("features", {})
        items = []
        for name, value in rule.features.items():
            if not name or "=" in name or _SPACE.search(name) or SEPARATOR in name or ";" in name:
                raise InputError(f"feature name {name!r} cannot be written",
                                 expected="a name without '=', ';', spaces or '|||'")
            items.append(f"{name}={_format_numbers([value], [texts.get(name)])}")
        scores = " ".join(items)
    elif names is not None:
        if len(names) != len(rule.scores):
            raise InputError(f"{len(names)} names for {len(rule.scores)} scores")
        scores = " ".join(f"{n}={_format_numbers([v], None)}" for n, v in zip(names, rule.scores))
    else:
        if len(rule.scores) > MAX_CDEC_UNNAMED:
            raise InputError(f"{len(rule.scores)} unnamed scores",
                             expected=f"at most {MAX_CDEC_UNNAMED}: give names")
        scores = _format_numbers(rule.scores, rule.number_text.get("scores"))
    pieces = [f"[{lhs}]", SEPARATOR, " ".join(src_tokens), SEPARATOR, " ".join(tgt_tokens)]
    if scores or rule.alignment is not None:
        pieces += [SEPARATOR, scores]
    if rule.alignment is not None:
        _check_terminal_links(list(rule.alignment), rule.source, rule.target, None, None)
        pieces += [SEPARATOR, " ".join(f"{i}-{j}" for i, j in rule.alignment)]
    return _join(*pieces)


def iter_cdec_rules(path: str | os.PathLike) -> Iterator[GrammarRule]:
    """Stream the rules of a cdec grammar (plain or gzipped)."""
    for number, text in iter_lines(path):
        yield parse_cdec_rule(text, os.fspath(path), number)


def read_cdec_rules(path: str | os.PathLike) -> list[GrammarRule]:
    """All rules of a cdec grammar."""
    return list(iter_cdec_rules(path))


def write_cdec_rules(path: str | os.PathLike, rules: Iterable[GrammarRule],
                     names: Sequence[str] | None = None) -> int:
    """Write rules as a cdec grammar, atomically (gzip when ``path`` ends in .gz); returns the
    number of rules."""
    return _writer(path, rules, lambda rule: format_cdec_rule(rule, names))
