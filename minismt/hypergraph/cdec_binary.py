"""cdec's binary forests (``cdec -O DIR`` writes ``DIR/<i>.bin.gz``, cdec after 2014-10).

``HypergraphIO::WriteToBinary`` puts the ``Hypergraph`` into a Boost ``binary_oarchive``
(gzipped by cdec's ``WriteFile``). The layout below was read off the bytes of forests written
by the cdec in ``shared/tools/cdec`` (redpony/cdec 2020-05, Boost 1.74, x86-64) and checked
field by field against cdec's own printouts of the same forests (k-best lists with features,
1-best, and their JSON conversions in ``fixtures/cdec/decode_nc/hgs_json*``); cdec's
``TRule::save`` and ``FastSparseVector::save`` were read in its source. All numbers are
little-endian; ``u64`` etc. give the width; ``str`` is a Boost string: ``u64`` byte length,
then the bytes (UTF-8, no terminator).

Archive header (40 bytes)::

    u64 22, "serialization::archive"   signature
    u16 library version                 18 (Boost 1.74, the only one seen); 8 or more is read
    u8 4, u8 8, u8 4, u8 8              sizeof int, long, float, double
    i32 1                               endianness check (1: little-endian)

How Boost writes the objects that follow:

- *class info*: the first time an object of a class is written by value (not its later
  objects), ``u8`` tracking flag + ``u32`` class version; 5 bytes. Seen here: tracking 0,
  version 0, except ``shared_ptr`` (tracking 0, version 1) and ``TRule`` (tracking 1, version 0).
- ``std::vector<int>``: ``u64`` count, then the ``i32`` items (no class info, no item version).
- a pointer (``boost::shared_ptr<TRule>`` saves its raw pointer): ``i16`` class id; -1 is a
  null pointer and ends it. The first non-null pointer gives the class its id (6 here; later
  pointers repeat it) and is followed by ``TRule``'s class info; then ``u32`` object id: equal
  to the number of rules written so far, a new rule follows; smaller, it refers to that
  earlier rule (cdec shares rule objects between edges).

The archive (``oa << hg``)::

    class info (Hypergraph)
    i32 number of nodes N, i32 number of edges E
    N nodes (class info before the first), node v:
        u64 node_hash, i32 id_ (= v), str cat (the category without brackets, e.g. "X", "Goal")
        vector<int> in_edges_ (edge ids), vector<int> out_edges_
    E edges (class info before the first), edge e (in cdec's internal order):
        i32 head_node_
        tail_nodes_: class info before the first; u16 count, then i32 node ids
        rule_: shared_ptr class info before the first, then the pointer (above); a new rule is
            TRule::save: str lhs (no brackets), u32 |f|, u64 f mask, |f| x str (source words
            and, where the mask bit i is set, categories of source nonterminals), u32 |e|,
            u64 e mask, |e| items: i32 -i for the yield of tail i where the mask bit is set,
            else str (target word), i8 arity_, scores_ (a sparse vector)
        feature_values_ (a sparse vector)
        i16 i_, i16 j_, i16 prev_i_, i16 prev_j_ (source span; -1 unset), i32 id_ (= e)
    8 bytes (always 01 00 00 00 00 00 00 00 here; presumably two flags, e.g. edges_topo_ and
        is_linear_chain_; not interpreted)

A sparse vector (``FastSparseVector::save``): class info before the first, ``i32`` count,
then count ``std::pair<std::string, double>``: class info before the first pair, ``str`` the
feature name, ``f64`` its value. Zero values are written too (``PhraseModel_5=0``); a name
given twice keeps the last value, as cdec's loader does.

The forest read follows :func:`~minismt.hypergraph.cdec_json.read_cdec_json` (what the
historic JSON of the same forest reads to): nodes in file order (topological, goal last),
edges grouped by head in node order and, within a node, in its ``in_edges_`` order; a node's
``cat`` is its category (None for an empty one or cdec's ``<bad0>``, category 0); zero features dropped;
an edge's template is its rule's target (``[k]`` = tail k-1), or its tails in order without a
rule; ``rules`` holds each rule object once as ``TRule::AsString`` prints it
(``[X] ||| [X] zu [X] ||| [2] to [1] ||| PhraseModel_0=0.1 ...``, 6 significant digits;
``[X] ||| ...`` when the rule has no LHS); ``spans`` and ``node_hash`` are kept. Anything
malformed is an :class:`~minismt.errors.InputError` naming the file; feature names go into
the space and words into the vocabulary only when the whole file is valid. The byte walk is
the numba kernel :mod:`minismt.hypergraph._cdec_binary_kernels`.
"""

from __future__ import annotations

import os
import struct

import numpy as np

from minismt._primitives import power_of_two
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import _cdec_binary_kernels as K
from minismt.hypergraph.graph import Hypergraph
from minismt.io import read_binary

FORMAT = "cdec binary forest (Boost binary_oarchive)"
SIGNATURE = b"serialization::archive"
HEADER_SIZE = 8 + len(SIGNATURE) + 2 + 4 + 4
MIN_LIBRARY_VERSION = 8
"""Below library version 8 Boost reads class versions and ids in other widths (basic_binary_iarchive)."""
NO_CATEGORY = "<bad0>"
"""What cdec's ``TD::Convert(0)`` gives: a node without category, a rule without LHS."""

FIELD_NAMES = {K.F_CLASS_INFO: "class information", K.F_NODE: "node", K.F_STRING: "a string",
               K.F_IN_EDGES: "in_edges", K.F_OUT_EDGES: "out_edges", K.F_EDGE: "edge",
               K.F_TAILS: "the tails of an edge", K.F_RULE_POINTER: "the rule pointer of an edge",
               K.F_RULE: "rule", K.F_SOURCE: "the source side of a rule", K.F_TARGET: "the target side of a rule",
               K.F_FEATURES: "a feature vector", K.F_SPANS: "the span and id of an edge"}
CLASS_NAMES = {K.C_NODE: "Node", K.C_EDGE: "Edge", K.C_TAILS: "TailNodeVector", K.C_SHARED_PTR: "shared_ptr",
               K.C_RULE: "TRule", K.C_SPARSE_VECTOR: "SparseVector", K.C_PAIR: "pair<string,double>"}
# bytes each item of a kind takes at least: bounds the preallocated arrays by the file size
_MIN_NODE, _MIN_EDGE, _MIN_RULE = 36, 24, 37


def read_cdec_binary(path: str | os.PathLike, space: FeatureSpace | None = None,
                     vocab: Vocabulary | None = None) -> Hypergraph:
    """Read a (gzipped or plain) cdec binary forest, as ``cdec -O`` writes them (``<i>.bin.gz``).

    Feature names go into ``space`` and target words into ``vocab`` (new ones when not
    given); share them across the forests of a dev set.
    """
    data = read_binary(path)
    return loads_cdec_binary(data, space, vocab, source=os.fspath(path))


def loads_cdec_binary(data: bytes, space: FeatureSpace | None = None, vocab: Vocabulary | None = None,
                      source: str = "<cdec binary>") -> Hypergraph:
    """A cdec binary forest from its (uncompressed) bytes; ``source`` names it in errors."""
    space = space if space is not None else FeatureSpace()
    vocab = vocab if vocab is not None else Vocabulary()
    data = bytes(data)
    buf = np.frombuffer(data, dtype=np.uint8)
    n_nodes, n_edges, start = _header(data, source)
    parsed = _parse(buf, start, n_nodes, n_edges, source)
    return _build(data, parsed, n_nodes, n_edges, space, vocab, source)


def _fail(source, message, expected=FORMAT):
    raise InputError(message, source, expected=expected)


def _header(data: bytes, source) -> tuple[int, int, int]:
    """Node and edge counts and the offset of the first node, after checking the archive header."""
    raw = data[:HEADER_SIZE + 13]
    if len(raw) < 8 or struct.unpack_from("<Q", raw)[0] != len(SIGNATURE) or raw[8:8 + len(SIGNATURE)] != SIGNATURE:
        _fail(source, "no Boost archive signature at the start", "a Boost binary archive ('serialization::archive')")
    if len(raw) < HEADER_SIZE:
        _fail(source, f"the archive header ends at byte {len(raw)}")
    library, = struct.unpack_from("<H", raw, 30)
    if library < MIN_LIBRARY_VERSION:
        _fail(source, f"Boost archive library version {library}",
              f"library version {MIN_LIBRARY_VERSION} or newer")
    sizes = tuple(raw[32:36])
    if sizes != (4, 8, 4, 8):
        _fail(source, f"archive of a machine with sizeof int, long, float, double = {sizes}",
              "an archive written on a 64-bit machine (4, 8, 4, 8)")
    endian, = struct.unpack_from("<i", raw, 36)
    if endian != 1:
        _fail(source, "big-endian or corrupt archive (endianness check is not 1)",
              "an archive written on a little-endian machine")
    if len(raw) < HEADER_SIZE + 13:
        _fail(source, f"the file ends at byte {len(raw)}, inside the hypergraph's counts")
    if raw[HEADER_SIZE] != 0:
        _fail(source, f"Hypergraph tracking flag {raw[HEADER_SIZE]} at byte {HEADER_SIZE}", "0 (untracked)")
    n_nodes, n_edges = struct.unpack_from("<ii", raw, HEADER_SIZE + 5)
    start = HEADER_SIZE + 13
    left = len(data) - start
    for count, what, size in ((n_nodes, "nodes", _MIN_NODE), (n_edges, "edges", _MIN_EDGE)):
        if count < 0 or count * size > left:
            _fail(source, f"the file says {count} {what} but has {left} bytes for nodes and edges")
    return n_nodes, n_edges, start


def _parse(buf: np.ndarray, start: int, n_nodes: int, n_edges: int, source) -> dict:
    """Run the parse kernel on preallocated arrays (bounded by the file size); its arrays, cut to size."""
    left = buf.shape[0] - start
    max_strings = left // 8 + 1
    capacity = int(power_of_two(2 * max_strings + 2))
    max_rules = left // _MIN_RULE + 1
    arrays = dict(
        node_hash=np.zeros(n_nodes, np.uint64), node_cat=np.zeros(n_nodes, np.int32),
        in_off=np.zeros(n_nodes + 1, np.int64), in_list=np.empty(left // 4 + 1, np.int32),
        edge_head=np.zeros(n_edges, np.int32), tail_off=np.zeros(n_edges + 1, np.int64),
        tails=np.empty(left // 4 + 1, np.int32), edge_rule=np.zeros(n_edges, np.int32),
        feat_off=np.zeros(n_edges + 1, np.int64), feat_name=np.empty(left // 16 + 1, np.int32),
        feat_val=np.empty(left // 16 + 1, np.float64), spans=np.zeros((n_edges, 4), np.int32),
        rule_lhs=np.empty(max_rules, np.int32), rule_f_off=np.zeros(max_rules + 1, np.int64),
        rule_f=np.empty(left // 8 + 1, np.int32), rule_f_nt=np.empty(left // 8 + 1, np.bool_),
        rule_e_off=np.zeros(max_rules + 1, np.int64), rule_e=np.empty(left // 4 + 1, np.int32),
        rule_score_off=np.zeros(max_rules + 1, np.int64), rule_score_name=np.empty(left // 16 + 1, np.int32),
        rule_score_val=np.empty(left // 16 + 1, np.float64),
        table=np.zeros(capacity, np.int32), str_off=np.empty(max_strings, np.int64),
        str_len=np.empty(max_strings, np.int64))
    err = np.zeros(4, np.int64)
    counts = np.zeros(8, np.int64)
    code = K.parse(buf, start, n_nodes, n_edges, err, counts, **arrays)
    if code:
        _kernel_error(err, source)
    n_strings, n_in, n_tails, n_feats, n_rules, n_f, n_e, n_scores = counts.tolist()
    out = {name: array for name, array in arrays.items() if name != "table"}
    for name, size in (("in_list", n_in), ("tails", n_tails), ("feat_name", n_feats), ("feat_val", n_feats),
                       ("rule_lhs", n_rules), ("rule_f_off", n_rules + 1), ("rule_e_off", n_rules + 1),
                       ("rule_score_off", n_rules + 1), ("rule_f", n_f), ("rule_f_nt", n_f), ("rule_e", n_e),
                       ("rule_score_name", n_scores), ("rule_score_val", n_scores), ("str_off", n_strings),
                       ("str_len", n_strings)):
        out[name] = out[name][:size]
    return out


def _kernel_error(err: np.ndarray, source):
    code, pos, a, b = (int(x) for x in err)
    at = f" at byte {pos}" if pos else ""
    field = FIELD_NAMES.get(a, "?")
    if code == K.E_TRUNCATED:
        _fail(source, f"the file ends inside {field}{at}")
    if code == K.E_COUNT:
        shown = "more than 2^32" if b < 0 else str(b)
        _fail(source, f"{field}{at} has a count of {shown}, more than the bytes left can hold")
    if code == K.E_NEGATIVE:
        _fail(source, f"{field}{at} has a count of {b}", "a count >= 0")
    if code == K.E_TRACKING:
        _fail(source, f"{CLASS_NAMES[a]} class information{at} has tracking flag {b}",
              f"tracking flag {1 if a == K.C_RULE else 0}, as cdec writes it")
    messages = {
        K.E_NODE_ID: (f"node {a} has id {b}", "node ids 0, 1, 2, ... in order"),
        K.E_EDGE_ID: (f"edge {a} has id {b}", "edge ids 0, 1, 2, ... in order"),
        K.E_HEAD: (f"edge {a} has head node {b}", "a node of the forest"),
        K.E_TAIL: (f"edge {a} has tail {b}", "tails that are earlier nodes than the head (topological order)"),
        K.E_IN_EDGE: (f"node {a} lists the in-edge {b}", "ids of the forest's edges"),
        K.E_OUT_EDGE: (f"node {a} lists the out-edge {b}", "ids of the forest's edges"),
        K.E_IN_TWICE: (f"edge {a} is an in-edge of two nodes (the second is {b})", "each edge in one node"),
        K.E_HEAD_MISMATCH: (f"edge {a} is an in-edge of node {b} but has another head",
                            "each edge listed by the node it enters"),
        K.E_NO_NODE: (f"edge {a} is in no node's in_edges", "every edge listed by the node it enters"),
        K.E_CLASS_ID: (f"the rule pointer of edge {a} has class id {b}", "the class id of the first rule, or -1"),
        K.E_RULE_REF: (f"edge {a} refers to rule object {b}, which was not written before",
                       "a new rule (the next object id) or an earlier one"),
        K.E_NT_VALUE: (f"rule {a} has the target nonterminal value {b}", "0, -1, -2, ... (tails 1, 2, 3, ...)"),
        K.E_NT_ARITY: (f"edge {a} has fewer tails than its rule uses (it uses tail {b + 1})",
                       "target slots [k] with k at most the number of tails"),
        K.E_NOT_FINITE: (f"edge {a} has a non-finite feature value{at}", "finite features"),
        K.E_TRAILER: (f"{a} bytes after the last edge{at}", "8 bytes (cdec's two hypergraph flags)"),
    }
    message, expected = messages.get(code, (f"error {code}{at}", FORMAT))
    _fail(source, message, expected)


def _strings(data: bytes, parsed: dict, source) -> list[str]:
    out = []
    for off, length in zip(parsed["str_off"].tolist(), parsed["str_len"].tolist()):
        try:
            out.append(data[off:off + length].decode("utf-8"))
        except UnicodeDecodeError as err:
            _fail(source, f"the string at byte {off - 8} is not UTF-8 (byte {off + err.start})", "UTF-8 text")
    return out


def _number(value: float) -> str:
    """A double as C++ ``operator<<`` prints it by default (6 significant digits)."""
    return f"{value:.6g}"


def _rule_strings(parsed: dict, strings: list[str]) -> list[str]:
    """``TRule::AsString`` of every rule object, in object order."""
    f_off, f_sym, f_nt = parsed["rule_f_off"].tolist(), parsed["rule_f"].tolist(), parsed["rule_f_nt"].tolist()
    e_off, e_item = parsed["rule_e_off"].tolist(), parsed["rule_e"].tolist()
    s_off, s_name, s_val = (parsed["rule_score_off"].tolist(), parsed["rule_score_name"].tolist(),
                            parsed["rule_score_val"].tolist())
    rules = []
    for r, lhs in enumerate(parsed["rule_lhs"].tolist()):
        lhs = strings[lhs]
        parts = [f"[{lhs if lhs and lhs != NO_CATEGORY else 'X'}] |||"]
        for j in range(f_off[r], f_off[r + 1]):
            parts.append(f" [{strings[f_sym[j]]}]" if f_nt[j] else f" {strings[f_sym[j]]}")
        parts.append(" ||| ")
        parts.append(" ".join(f"[{-item}]" if item < 0 else strings[item] for item in e_item[e_off[r]:e_off[r + 1]]))
        scores: dict[str, float] = {}
        for j in range(s_off[r], s_off[r + 1]):
            scores[strings[s_name[j]]] = s_val[j]
        if scores:
            parts.append(" ||| " + " ".join(f"{name}={_number(value)}" for name, value in scores.items()))
        rules.append("".join(parts))
    return rules


def _first_use(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` in the order of their first occurrence."""
    unique, first = np.unique(ids, return_index=True)
    return unique[np.argsort(first, kind="stable")]


def _build(data: bytes, parsed: dict, n_nodes: int, n_edges: int, space: FeatureSpace, vocab: Vocabulary,
           source) -> Hypergraph:
    order = parsed["in_list"]
    rule_e_len = np.diff(parsed["rule_e_off"])
    arity = np.diff(parsed["tail_off"])
    edge_rule = parsed["edge_rule"]
    tmpl_len = np.where(edge_rule >= 0, rule_e_len[np.maximum(edge_rule, 0)] if rule_e_len.size else 0, arity)
    n_strings = parsed["str_off"].shape[0]
    err = np.zeros(4, np.int64)
    out = dict(
        out_tail_off=np.zeros(n_edges + 1, np.int64), out_tails=np.empty(parsed["tails"].shape[0], np.int32),
        out_feat_off=np.zeros(n_edges + 1, np.int64), out_feat_sid=np.empty(parsed["feat_name"].shape[0], np.int32),
        out_feat_val=np.empty(parsed["feat_name"].shape[0], np.float64),
        out_tmpl_off=np.zeros(n_edges + 1, np.int64), out_tmpl=np.empty(int(tmpl_len.sum()), np.int32),
        out_spans=np.zeros((n_edges, 4), np.int32), out_rule=np.zeros(n_edges, np.int32),
        name_order=np.empty(n_strings, np.int64))
    code, _, n_names = K.assemble(order, parsed["tail_off"], parsed["tails"], edge_rule, parsed["feat_off"],
                                  parsed["feat_name"], parsed["feat_val"], parsed["spans"], parsed["rule_e_off"],
                                  parsed["rule_e"], n_strings, err, **out)
    if code:
        _kernel_error(err, source)
    n_feats = int(out["out_feat_off"][-1])
    feat_sid = out["out_feat_sid"][:n_feats]
    strings = _strings(data, parsed, source)
    name_sids = out["name_order"][:n_names]
    for sid in name_sids.tolist():
        name = strings[sid]
        if not name or any(c.isspace() for c in name):
            _fail(source, f"feature name {name[:40]!r}", "a non-empty name without whitespace")
    tmpl = out["out_tmpl"]
    word_sids = _first_use(tmpl[tmpl >= 0])
    for sid in word_sids.tolist():
        word = strings[sid]
        if not word or any(c.isspace() for c in word):
            _fail(source, f"target word {word[:40]!r}", "a word without whitespace")
    cats = [None if strings[c] in ("", NO_CATEGORY) else strings[c] for c in parsed["node_cat"].tolist()]
    rules = _rule_strings(parsed, strings)
    # the file is valid: only now grow the feature space and the vocabulary
    lookup = np.zeros(n_strings, np.int64)
    for sid in name_sids.tolist():
        lookup[sid] = space.add(strings[sid])
    feat_ids = lookup[feat_sid].astype(np.int32)
    for sid in word_sids.tolist():
        lookup[sid] = vocab.add(strings[sid])
    tmpl = np.where(tmpl >= 0, lookup[np.maximum(tmpl, 0)] if n_strings else 0, tmpl).astype(np.int32)
    in_offsets = parsed["in_off"]
    try:
        return Hypergraph(
            space, vocab, n_nodes, in_offsets, out["out_tail_off"], out["out_tails"], out["out_feat_off"], feat_ids,
            out["out_feat_val"][:n_feats], out["out_tmpl_off"], tmpl, rules=rules, edge_rule=out["out_rule"],
            node_cat=cats, spans=out["out_spans"], node_hash=parsed["node_hash"])
    except InputError as err:
        raise InputError(err.message, source, expected=err.expected) from None
