"""cdec's historic JSON forest format (``HypergraphIO::ReadFromJSON`` / ``WriteToJSON``, removed in 2014).

One JSON object on one line whose keys repeat::

    {"rules":[1,"[X] ||| a ||| a",2,"[X] ||| A [X] ||| A [1]",...],
     "features":["f1","f2",...],
     "edges":[{"tail":[],"spans":[i,j,pi,pj],"feats":[0,-0.8,1,-0.1],"rule":1},...],"node":{"in_edges":[0],"cat":"X"},
     "edges":[...],"node":{...},
     ...}

- ``rules`` alternates integer ids and rule strings ``[LHS] ||| src ||| tgt [||| feats]``;
  in the target, ``[k]`` (or ``[X,k]``) is the yield of the edge's tail ``k-1``.
  An edge's ``rule`` is an id (0: none) or an inline rule string; an edge
  without a rule yields its tails' yields in order.
- ``features`` lists names; an integer key in an edge's ``feats`` indexes it, a
  string key is the name itself. Zero values are left out (and dropped here).
- Edges are numbered in the order written; each ``node`` lists its incoming
  edges in ``in_edges``; tails are earlier nodes; the goal is the last node.
- ``spans`` and ``node_hash`` are kept only to write them back; ``is_sorted`` is ignored.
- The empty hypergraph is ``{}``. Text after the object that is only
  whitespace or stray ``"`` is ignored (cdec shipped such a file).

The reader turns anything malformed into an :class:`~minismt.errors.InputError`
naming the file and adds names to the feature space and words to the
vocabulary only when the whole file is valid. The writer reproduces cdec's
layout and string escaping (``/`` as ``\\/``); numbers are written exactly
(shortest round-trip form), or with ``digits`` significant digits as C++
streams do (cdec: 6).
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Sequence

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph.cdec_binary import read_cdec_binary
from minismt.hypergraph.graph import Hypergraph
from minismt.io import atomic_write, read_binary

FORMAT = "cdec JSON forest"
MAX_NAMED_FEATURES = 1000
"""cdec writes the ``features`` list only when it has fewer names than this."""

_TARGET_NT = re.compile(r"\[(?:[^\[\],\s]+,)?([0-9]+)\]")
_ANY_NT = re.compile(r"\[[^\[\]\s]+\]")
_HEX = re.compile(r"[0-9A-Fa-f]{1,16}")
_INT32 = 2 ** 31


class _Object(list):
    """A JSON object as its list of (key, value) pairs, keys may repeat."""


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number cdec writes")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_Object, parse_constant=_reject_constant,
                            parse_float=_finite_float)


class _Reader:
    """Checks the parsed JSON value and collects the forest, raising InputError naming the source."""

    def __init__(self, source):
        self.source = source

    def fail(self, message: str, expected: str | None = None):
        raise InputError(message, self.source, expected=expected)

    def integer(self, value, what: str, *args, low: int = 0, high: int = _INT32) -> int:
        """``value`` if it is an integer in [low, high); ``what.format(*args)`` names it otherwise."""
        if type(value) is not int or not (low <= value < high):
            self.fail(f"{what.format(*args)} is {_show(value)}", f"an integer in [{low}, {high})")
        return value

    def number(self, value, what: str, *args) -> float:
        if type(value) is float:
            return value
        if type(value) is int:
            try:
                return float(value)
            except OverflowError:
                self.fail(f"{what.format(*args)} {str(value)[:40]} is out of range", "a finite number")
        self.fail(f"{what.format(*args)} is {_show(value)}", "a number")

    def string(self, value, what: str, *args) -> str:
        if type(value) is not str:
            self.fail(f"{what.format(*args)} is {_show(value)}", "a string")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                self.fail(f"{what.format(*args)} has an unpaired surrogate escape", "valid Unicode")
        return value

    def array(self, value, what: str, *args, nullable: bool = True) -> list:
        if value is None and nullable:
            return []
        if type(value) is not list:
            self.fail(f"{what.format(*args)} is {_show(value)}", "an array")
        return value

    def obj(self, value, keys: Sequence[str], what: str, *args) -> dict:
        if type(value) is not _Object:
            self.fail(f"{what.format(*args)} is {_show(value)}", "an object")
        out = {}
        for key, item in value:
            if key not in keys:
                self.fail(f"{what.format(*args)} has the key {key[:40]!r}", f"keys among {', '.join(keys)}")
            if key in out:
                self.fail(f"{what.format(*args)} has the key {key!r} twice")
            out[key] = item
        return out


def _show(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if type(value) is _Object:
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"{type(value).__name__} {str(value)[:40]}"


def parse_rule_target(rule: str) -> list[str | int] | None:
    """Target side of a cdec rule string as words and 0-based tail positions; None if it is no rule.

    ``[k]`` and ``[X,k]`` are tail ``k-1``; ``[X]`` without an index is the next
    tail in order. The rule must be ``[LHS] ||| source ||| target`` with
    optional features and alignment fields.
    """
    fields = [f.strip() for f in rule.split("|||")]
    if not (3 <= len(fields) <= 5) or not _ANY_NT.fullmatch(fields[0]):
        return None
    target: list[str | int] = []
    positional = 0
    for token in fields[2].split():
        indexed = _TARGET_NT.fullmatch(token)
        if indexed:
            k = int(indexed.group(1))
            if k < 1:
                return None
            target.append(k - 1)
        elif _ANY_NT.fullmatch(token):
            target.append(positional)
            positional += 1
        else:
            target.append(token)
    return target


def read_cdec_json(path: str | os.PathLike, space: FeatureSpace | None = None,
                   vocab: Vocabulary | None = None) -> Hypergraph:
    """Read a (plain or gzipped) cdec JSON forest.

    Feature names go into ``space`` and target words into ``vocab`` (new ones
    when not given); share them across the forests of a dev set.
    """
    data = read_binary(path)
    return loads_cdec_json(data, space, vocab, source=os.fspath(path))


def loads_cdec_json(data: bytes | str, space: FeatureSpace | None = None, vocab: Vocabulary | None = None,
                    source: str = "<cdec json>") -> Hypergraph:
    """A cdec JSON forest from its text (``source`` names it in errors)."""
    space = space if space is not None else FeatureSpace()
    vocab = vocab if vocab is not None else Vocabulary()
    reader = _Reader(source)
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"not UTF-8 at byte {err.start}", source, expected="UTF-8 text") from None
    else:
        text = data
    start = len(text) - len(text.lstrip("\ufeff \t\r\n"))
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON at character {err.pos}: {err.msg}", source, err.lineno,
                         FORMAT) from None
    except (ValueError, RecursionError) as err:
        raise InputError(f"invalid JSON: {err}", source, expected=FORMAT) from None
    if text[end:].strip(" \t\r\n\""):
        raise InputError(f"text after the JSON object at character {end}", source, expected=FORMAT)
    if type(value) is not _Object:
        reader.fail(f"the file holds {_show(value)}", "one JSON object")
    return _build(reader, value, space, vocab)


def _top_level(reader: _Reader, pairs: _Object):
    """The rule table (id -> index, strings), feature names, edge and node objects, in file order."""
    rule_ids: dict[int, int] = {}
    rules: list[str] = []
    names: list[str] | None = None
    edges: list[dict] = []
    nodes: list[dict] = []
    seen_keys: set[str] = set()
    for key, value in pairs:
        if key in ("rules", "features", "is_sorted"):
            if key in seen_keys:
                reader.fail(f"the key {key!r} appears twice")
            seen_keys.add(key)
        if key == "rules":
            items = reader.array(value, "rules")
            if len(items) % 2:
                reader.fail(f"rules has {len(items)} items", "pairs of an id and a rule string")
            for i in range(0, len(items), 2):
                rid = reader.integer(items[i], "rule id #{}", i // 2, low=1)
                rule = reader.string(items[i + 1], "rule {}", rid)
                if rid in rule_ids:
                    reader.fail(f"rule id {rid} given twice")
                rule_ids[rid] = len(rules)
                rules.append(rule)
        elif key == "features":
            names = [reader.string(x, "feature name #{}", i) for i, x in enumerate(reader.array(value, "features"))]
        elif key == "is_sorted":
            if type(value) is not bool:
                reader.fail(f"is_sorted is {_show(value)}", "true or false")
        elif key == "edges":
            for item in reader.array(value, "edges", nullable=False):
                edges.append(reader.obj(item, ("tail", "feats", "rule", "spans"), "edge {}", len(edges)))
        elif key == "node":
            nodes.append(reader.obj(value, ("in_edges", "cat", "node_hash"), "node {}", len(nodes)))
        else:
            reader.fail(f"unexpected key {key[:40]!r}", "rules, features, edges, node")
    return rule_ids, rules, names, edges, nodes


def _heads(reader: _Reader, nodes: list[dict], n_edges: int):
    """Head of every edge, the edges in node order, categories and hashes (None if no node has one)."""
    head = [-1] * n_edges
    order: list[int] = []
    cats: list[str | None] = []
    hashes: list[int] = []
    has_hash = False
    for v, node in enumerate(nodes):
        for e in reader.array(node.get("in_edges"), "in_edges of node {}", v):
            e = reader.integer(e, "an in-edge of node {}", v, high=n_edges)
            if head[e] >= 0:
                reader.fail(f"edge {e} is an in-edge of nodes {head[e]} and {v}", "each edge in one node")
            head[e] = v
            order.append(e)
        cat = node.get("cat")
        cats.append(None if cat is None else reader.string(cat, "cat of node {}", v))
        node_hash = node.get("node_hash")
        if node_hash is not None:
            has_hash = True
            node_hash = reader.string(node_hash, "node_hash of node {}", v)
            if not _HEX.fullmatch(node_hash):
                reader.fail(f"node_hash of node {v} is {node_hash[:40]!r}", "up to 16 hex digits")
        hashes.append(int(node_hash, 16) if node_hash else 0)
    if len(order) != n_edges:
        reader.fail(f"edge {head.index(-1)} is in no node's in_edges", "every edge listed by the node it enters")
    return head, order, cats, hashes if has_hash else None


class _Edges:
    """Checks edges one by one and collects their rows (tails, features, template, rule, spans)."""

    def __init__(self, reader: _Reader, names: list[str] | None, rule_ids: dict[int, int], rules: list[str]):
        self.reader = reader
        self.names = names
        self.rule_ids = rule_ids
        self.rules = rules
        self.targets: dict[int, list] = {}
        self.tails: list[list[int]] = []
        self.feats: list[dict[str, float]] = []
        self.templates: list[list] = []
        self.rule_index: list[int] = []
        self.spans: list[list[int]] = []
        self.has_spans = False

    def add(self, e: int, edge: dict, head: int) -> None:
        """Check edge ``e`` (JSON id) entering node ``head`` and append its rows."""
        reader = self.reader
        tails = [reader.integer(t, "a tail of edge {}", e)
                 for t in reader.array(edge.get("tail"), "tail of edge {}", e)]
        for t in tails:
            if t >= head:
                reader.fail(f"edge {e} into node {head} has tail {t}",
                            "tails that are earlier nodes (topological order)")
        self.tails.append(tails)
        self.feats.append(self._features(e, edge.get("feats")))
        index = self._rule(e, edge.get("rule"))
        self.rule_index.append(index)
        self.templates.append(self._template(e, index, len(tails)))
        spans = edge.get("spans")
        if spans is not None:
            self.has_spans = True
            spans = [reader.integer(x, "a span of edge {}", e, low=-_INT32)
                     for x in reader.array(spans, "spans of edge {}", e)]
            if len(spans) > 4:
                reader.fail(f"edge {e} has {len(spans)} spans", "at most 4")
        spans = spans or []
        self.spans.append(spans + [-1] * (4 - len(spans)))

    def _features(self, e: int, value) -> dict[str, float]:
        """``{name: value}`` of the nonzero features; a repeated key keeps its last value, as in cdec."""
        reader = self.reader
        raw = reader.array(value, "feats of edge {}", e)
        if len(raw) % 2:
            reader.fail(f"feats of edge {e} has {len(raw)} items", "pairs of a key and a value")
        feats: dict[str, float] = {}
        for i in range(0, len(raw), 2):
            key = raw[i]
            if type(key) is int:
                if self.names is None:
                    reader.fail(f"edge {e} has the feature key {key} but the file has no features list",
                                "name keys, or integer keys into a features list")
                name = self.names[reader.integer(key, "a feature key of edge {}", e, high=len(self.names))]
            else:
                name = reader.string(key, "a feature key of edge {}", e)
            feats[name] = reader.number(raw[i + 1], "feature {!r} of edge {}", name[:40], e)
        return {name: value for name, value in feats.items() if value != 0.0}

    def _rule(self, e: int, rule) -> int:
        """Index of the edge's rule in the rule table (inline rule strings are appended), -1 for none."""
        if rule is None or (type(rule) is int and rule == 0):
            return -1
        if type(rule) is int:
            if rule not in self.rule_ids:
                self.reader.fail(f"edge {e} uses rule {rule}, which the rules list lacks")
            return self.rule_ids[rule]
        if type(rule) is str:
            self.rules.append(self.reader.string(rule, "rule of edge {}", e))
            return len(self.rules) - 1
        self.reader.fail(f"rule of edge {e} is {_show(rule)}", "a rule id or a rule string")

    def _template(self, e: int, index: int, arity: int) -> list:
        if index < 0:
            return list(range(arity))
        if index not in self.targets:
            parsed = parse_rule_target(self.rules[index])
            if parsed is None:
                self.reader.fail(f"rule {self.rules[index][:60]!r} is malformed",
                                 "'[LHS] ||| source ||| target [||| features]' with target slots [1], [2], ...")
            self.targets[index] = parsed
        target = self.targets[index]
        for item in target:
            if type(item) is int and item >= arity:
                self.reader.fail(f"edge {e} has {arity} tails but its rule {self.rules[index][:60]!r} "
                                 f"uses [{item + 1}]", "target slots [k] with k at most the number of tails")
        return target


def _csr(rows, convert) -> tuple[np.ndarray, list]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    flat: list = []
    for i, row in enumerate(rows):
        flat.extend(convert(row))
        offsets[i + 1] = len(flat)
    return offsets, flat


def _build(reader: _Reader, pairs: _Object, space: FeatureSpace, vocab: Vocabulary) -> Hypergraph:
    rule_ids, rules, names, edge_objects, nodes = _top_level(reader, pairs)
    head, order, cats, hashes = _heads(reader, nodes, len(edge_objects))
    edges = _Edges(reader, names, rule_ids, rules)
    for e in order:
        edges.add(e, edge_objects[e], head[e])
    all_names = list(dict.fromkeys((names or []) + [name for row in edges.feats for name in row]))
    for name in all_names:
        if not name or any(c.isspace() for c in name):
            reader.fail(f"feature name {name[:40]!r}", "a non-empty name without whitespace")
    for name in all_names:
        space.add(name)
    for row in edges.templates:
        for item in row:
            if type(item) is str:
                vocab.add(item)
    n = len(nodes)
    in_offsets = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.bincount(np.asarray([head[e] for e in order], dtype=np.int64), minlength=n),
                  out=in_offsets[1:])
    tail_offsets, tails = _csr(edges.tails, lambda row: row)
    feat_offsets, feat_ids = _csr(edges.feats, lambda row: [space.index(k) for k in row])
    _, feat_values = _csr(edges.feats, lambda row: row.values())
    tmpl_offsets, tmpl = _csr(edges.templates, lambda row: [vocab.get(x) if type(x) is str else -x - 1 for x in row])
    try:
        return Hypergraph(
            space, vocab, n, in_offsets, tail_offsets, np.asarray(tails, dtype=np.int32), feat_offsets,
            np.asarray(feat_ids, dtype=np.int32), np.asarray(feat_values, dtype=np.float64), tmpl_offsets,
            np.asarray(tmpl, dtype=np.int32), rules=rules, edge_rule=np.asarray(edges.rule_index, dtype=np.int32),
            node_cat=cats, spans=np.asarray(edges.spans, dtype=np.int32).reshape(-1, 4) if edges.has_spans else None,
            node_hash=None if hashes is None else np.asarray(hashes, dtype=np.uint64))
    except InputError as err:
        raise InputError(err.message, reader.source, expected=err.expected) from None


# ---- writing ---------------------------------------------------------------------------

_ESCAPES = {"\b": "\\b", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\", "/": "\\/"}


def escape(text: str, slash: bool = True) -> str:
    """A JSON string literal as cdec's ``JSONParser::WriteEscapedString`` writes it.

    ``\\b \\n \\r \\t " \\`` and ``/`` get backslash escapes, other control
    characters ``\\u00XX``, everything else (UTF-8 included) is written raw.
    With ``slash=False``, ``/`` stays raw (cdec writes feature names and
    categories unescaped; only what JSON requires is escaped then).
    """
    out = ['"']
    for c in text:
        if c in _ESCAPES and (slash or c != "/"):
            out.append(_ESCAPES[c])
        elif c < " ":
            out.append(f"\\u00{ord(c):02x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _number(value: float, digits: int | None) -> str:
    if digits is not None:
        return f"{value:.{digits}g}"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _synthesized_rule(hg: Hypergraph, e: int) -> str:
    cats = hg.node_cat or [None] * hg.n_nodes
    lhs = cats[hg.edge_head[e]] or "X"
    source = " ".join(f"[{cats[int(t)] or 'X'}]" for t in hg.edge_tails(e))
    return f"[{lhs}] ||| {source} ||| {hg.edge_target(e)}"


def dumps_cdec_json(hg: Hypergraph, digits: int | None = None) -> str:
    """The cdec JSON text of ``hg`` (one line, ending in a newline)."""
    if hg.n_nodes == 0:
        return "{}\n"
    rule_strings: list[str] = []
    rule_id = np.zeros(hg.n_edges, dtype=np.int64)
    table_id: dict[int, int] = {}
    if hg.edge_rule is not None:
        for index in sorted({int(r) for r in hg.edge_rule if r >= 0}):
            rule_strings.append(hg.rules[index])
            table_id[index] = len(rule_strings)
    synthesized: dict[str, int] = {}
    for e in range(hg.n_edges):
        index = -1 if hg.edge_rule is None else int(hg.edge_rule[e])
        if index >= 0:
            rule_id[e] = table_id[index]
        else:
            rule = _synthesized_rule(hg, e)
            if rule not in synthesized:
                rule_strings.append(rule)
                synthesized[rule] = len(rule_strings)
            rule_id[e] = synthesized[rule]
    parts = ["{\"rules\":[", ",".join(f"{i},{escape(r)}" for i, r in enumerate(rule_strings, 1)), "],"]
    use_names = len(hg.space) >= MAX_NAMED_FEATURES
    if use_names:
        keys = [escape(name, slash=False) for name in hg.space.names]
    else:
        keys = [str(i) for i in range(len(hg.space))]
        parts.append("\"features\":[" + ",".join(escape(name, slash=False) for name in hg.space.names) + "],")
    tails = hg.tails.tolist()
    feat_ids = hg.feat_ids.tolist()
    feat_values = hg.feat_values.tolist()
    tail_offsets = hg.tail_offsets.tolist()
    feat_offsets = hg.feat_offsets.tolist()
    in_offsets = hg.in_offsets.tolist()
    for v in range(hg.n_nodes):
        if v > 0:
            parts.append(",")
        edges = []
        for e in range(in_offsets[v], in_offsets[v + 1]):
            text = "{\"tail\":[" + ",".join(map(str, tails[tail_offsets[e]:tail_offsets[e + 1]])) + "],"
            if hg.spans is not None:
                text += "\"spans\":[" + ",".join(map(str, hg.spans[e].tolist())) + "],"
            text += "\"feats\":[" + ",".join(
                f"{keys[feat_ids[p]]},{_number(feat_values[p], digits)}"
                for p in range(feat_offsets[e], feat_offsets[e + 1]) if feat_values[p] != 0.0)
            text += f"],\"rule\":{rule_id[e]}}}"
            edges.append(text)
        parts.append("\"edges\":[" + ",".join(edges) + "],")
        node = "\"node\":{\"in_edges\":[" + ",".join(map(str, range(in_offsets[v], in_offsets[v + 1]))) + "]"
        if hg.node_cat is not None and hg.node_cat[v] is not None:
            node += ",\"cat\":" + escape(hg.node_cat[v], slash=False)
        if hg.node_hash is not None:
            node += f",\"node_hash\":\"{int(hg.node_hash[v]):016X}\""
        parts.append(node + "}")
    parts.append("}\n")
    return "".join(parts)


def write_cdec_json(hg: Hypergraph, path: str | os.PathLike, digits: int | None = None) -> None:
    """Write ``hg`` as a cdec JSON forest, atomically (gzipped when ``path`` ends in .gz)."""
    text = dumps_cdec_json(hg, digits)
    with atomic_write(path) as out:
        out.write(text)


_FOREST_NAME = re.compile(r"([0-9]+)\.(json|json\.gz|bin\.gz)")


def read_cdec_forests(directory: str | os.PathLike, n_sentences: int, space: FeatureSpace,
                      vocab: Vocabulary | None = None) -> list[Hypergraph]:
    """The forests of sentences ``0 .. n_sentences-1`` in ``directory``, sharing ``space``: historic JSON
    ``<i>.json[.gz]`` or cdec's binary ``<i>.bin.gz`` (what ``cdec -O`` writes today).

    A missing forest, or two for one sentence, is an :class:`InputError`.
    """
    directory = os.fspath(directory)
    try:
        names = os.listdir(directory)
    except OSError as err:
        raise InputError(f"cannot list the forest folder: {err.strerror or err}", directory) from None
    found: dict[int, str] = {}
    for name in names:
        match = _FOREST_NAME.fullmatch(name)
        if match is None:
            continue
        sentence = int(match.group(1))
        if sentence in found:
            raise InputError(f"two forests for sentence {sentence}: {found[sentence]} and {name}", directory,
                             expected="one <i>.json, <i>.json.gz or <i>.bin.gz per sentence")
        found[sentence] = name
    missing = [i for i in range(n_sentences) if i not in found]
    if missing:
        raise InputError(f"no forest for sentence {missing[0]} ({len(missing)} of {n_sentences} missing)",
                         directory, expected="<i>.json, <i>.json.gz or <i>.bin.gz for every dev sentence")
    vocab = vocab if vocab is not None else Vocabulary()
    return [(read_cdec_binary if found[i].endswith(".bin.gz") else read_cdec_json)(
        os.path.join(directory, found[i]), space, vocab) for i in range(n_sentences)]
