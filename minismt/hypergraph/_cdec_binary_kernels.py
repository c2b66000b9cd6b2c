"""Numba kernels of the cdec binary forest reader (:mod:`minismt.hypergraph.cdec_binary`).

:func:`parse` walks the Boost archive after its fixed header and fills preallocated arrays: the
nodes, the edges in file order, the rules, and a table of the distinct strings (each string of the
file is interned to a small id, so Python decodes every distinct word or name once).
:func:`assemble` then puts the edges in node order (each node's ``in_edges``), merges repeated
feature names of an edge (the last value wins, at the place of the first, as cdec's ``set_value``),
drops zero values and expands every edge's target template from its rule.

Both return 0 or an error code (the ``E_*`` constants) with details in ``err`` =
``[code, byte offset, a, b]``; the Python side turns them into an ``InputError``. Every count read
from the file is checked against the bytes left before anything is read or allocated for it, so a
corrupt count cannot make a kernel read out of bounds, allocate much, or loop for long.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import fnv1a

# error codes (err[0]); err[1] is the byte offset, err[2:4] two arguments
E_TRUNCATED = 1        # a: field code (FIELD_NAMES in cdec_binary)
E_TRACKING = 2         # a: class code, b: the tracking byte
E_COUNT = 3            # a: field code, b: the count (or -1 if it does not fit 63 bits)
E_NODE_ID = 4          # a: node, b: id found
E_EDGE_ID = 5          # a: edge, b: id found
E_HEAD = 6             # a: edge, b: head
E_TAIL = 7             # a: edge, b: tail
E_IN_EDGE = 8          # a: node, b: edge id
E_OUT_EDGE = 9         # a: node, b: edge id
E_IN_TWICE = 10        # a: edge, b: second node listing it
E_HEAD_MISMATCH = 11   # a: edge, b: node listing it
E_NO_NODE = 12         # a: edge
E_CLASS_ID = 13        # a: edge, b: class id
E_RULE_REF = 14        # a: edge, b: object id
E_NT_VALUE = 15        # a: rule, b: value
E_NT_ARITY = 16        # a: edge, b: tail index the rule uses
E_NOT_FINITE = 17      # a: edge
E_TRAILER = 18         # a: bytes left after the last edge
E_NEGATIVE = 19        # a: field code, b: value

# field codes (err[2] of E_TRUNCATED / E_COUNT / E_NEGATIVE)
F_CLASS_INFO = 0
F_NODE = 1
F_STRING = 2
F_IN_EDGES = 3
F_OUT_EDGES = 4
F_EDGE = 5
F_TAILS = 6
F_RULE_POINTER = 7
F_RULE = 8
F_SOURCE = 9
F_TARGET = 10
F_FEATURES = 11
F_SPANS = 12

# class codes (err[2] of E_TRACKING)
C_NODE = 0
C_EDGE = 1
C_TAILS = 2
C_SHARED_PTR = 3
C_RULE = 4
C_SPARSE_VECTOR = 5
C_PAIR = 6



@njit(cache=True, inline="always")
def _u32(buf, p):
    return (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
            | (np.int64(buf[p + 3]) << 24))


@njit(cache=True, inline="always")
def _i32(buf, p):
    v = _u32(buf, p)
    return v - 4294967296 if v >= 2147483648 else v


@njit(cache=True, inline="always")
def _i16(buf, p):
    v = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
    return v - 65536 if v >= 32768 else v


@njit(cache=True, inline="always")
def _u64(buf, p):
    return np.uint64(_u32(buf, p)) | (np.uint64(_u32(buf, p + 4)) << np.uint64(32))


@njit(cache=True)
def _fail(err, code, pos, a, b):
    err[0] = code
    err[1] = pos
    err[2] = a
    err[3] = b
    return code


@njit(cache=True)
def _intern(buf, off, length, table, str_off, str_len, counts):
    """Id of the string ``buf[off:off+length]``, adding it to the table if it is new (counts[0] strings)."""
    h = fnv1a(buf, off, off + length)
    mask = np.uint64(table.shape[0] - 1)
    slot = np.int64(h & mask)
    while True:
        entry = table[slot]
        if entry == 0:
            sid = counts[0]
            table[slot] = sid + 1
            str_off[sid] = off
            str_len[sid] = length
            counts[0] = sid + 1
            return sid
        sid = entry - 1
        if str_len[sid] == length:
            o = str_off[sid]
            same = True
            for i in range(length):
                if buf[o + i] != buf[off + i]:
                    same = False
                    break
            if same:
                return sid
        slot = (slot + 1) & np.int64(mask)


@njit(cache=True)
def _sparse_vector(buf, p, err, e, seen, names, values, count, table, str_off, str_len, counts, finite):
    """Read a ``FastSparseVector`` at byte ``p`` (of edge ``e``) into ``names``/``values`` from ``count`` on:
    ``(next byte, new count)``, or byte -1 after an error (in ``err``). ``seen``: whether the class info of
    the vector [0] and of its pairs [1] was read; ``finite``: non-finite values are an error."""
    n = buf.shape[0]
    scratch_u = np.empty(1, dtype=np.uint64)
    scratch_f = scratch_u.view(np.float64)
    if seen[0] == 0:
        if p + 5 > n:
            _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
            return -1, count
        if buf[p] != 0:
            _fail(err, E_TRACKING, p, C_SPARSE_VECTOR, buf[p])
            return -1, count
        p += 5
        seen[0] = 1
    if p + 4 > n:
        _fail(err, E_TRUNCATED, p, F_FEATURES, e)
        return -1, count
    k = _i32(buf, p)
    if k < 0:
        _fail(err, E_NEGATIVE, p, F_FEATURES, k)
        return -1, count
    if k * 16 > n - p - 4:
        _fail(err, E_COUNT, p, F_FEATURES, k)
        return -1, count
    p += 4
    for _ in range(k):
        if seen[1] == 0:
            if p + 5 > n:
                _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
                return -1, count
            if buf[p] != 0:
                _fail(err, E_TRACKING, p, C_PAIR, buf[p])
                return -1, count
            p += 5
            seen[1] = 1
        if p + 8 > n:
            _fail(err, E_TRUNCATED, p, F_FEATURES, e)
            return -1, count
        if _u32(buf, p + 4) != 0 or _u32(buf, p) > n - p - 16:
            _fail(err, E_COUNT, p, F_STRING, _u32(buf, p) if _u32(buf, p + 4) == 0 else -1)
            return -1, count
        length = _u32(buf, p)
        names[count] = _intern(buf, p + 8, length, table, str_off, str_len, counts)
        p += 8 + length
        scratch_u[0] = _u64(buf, p)
        value = scratch_f[0]
        if finite and not np.isfinite(value):
            _fail(err, E_NOT_FINITE, p, e, 0)
            return -1, count
        values[count] = value
        count += 1
        p += 8
    return p, count


@njit(cache=True)
def parse(buf, p, n_nodes, n_edges, err, counts,
          node_hash, node_cat, in_off, in_list,
          edge_head, tail_off, tails, edge_rule, feat_off, feat_name, feat_val, spans,
          rule_lhs, rule_f_off, rule_f, rule_f_nt, rule_e_off, rule_e, rule_score_off, rule_score_name,
          rule_score_val, table, str_off, str_len):
    """Parse nodes, edges and rules from byte ``p`` on; 0 or an error code (details in ``err``).

    ``counts`` = [strings, in_list, tails, features, rules, source symbols, target items, rule scores].
    Rule target items are string ids (words) or ``-(i+1)`` for tail i.
    """
    n = buf.shape[0]
    # -- nodes
    if n_nodes > 0:
        if p + 5 > n:
            return _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
        if buf[p] != 0:
            return _fail(err, E_TRACKING, p, C_NODE, buf[p])
        p += 5
    n_in = 0
    for v in range(n_nodes):
        if p + 20 > n:
            return _fail(err, E_TRUNCATED, p, F_NODE, v)
        node_hash[v] = _u64(buf, p)
        node_id = _i32(buf, p + 8)
        if node_id != v:
            return _fail(err, E_NODE_ID, p + 8, v, node_id)
        p += 12
        if _u32(buf, p + 4) != 0 or _u32(buf, p) > n - p - 8:
            return _fail(err, E_COUNT, p, F_STRING, _u32(buf, p) if _u32(buf, p + 4) == 0 else -1)
        length = _u32(buf, p)
        node_cat[v] = _intern(buf, p + 8, length, table, str_off, str_len, counts)
        p += 8 + length
        for which in range(2):
            if p + 8 > n:
                return _fail(err, E_TRUNCATED, p, F_IN_EDGES + which, v)
            k = _u32(buf, p)
            if _u32(buf, p + 4) != 0 or k * 4 > n - p - 8:
                return _fail(err, E_COUNT, p, F_IN_EDGES + which, k if _u32(buf, p + 4) == 0 else -1)
            p += 8
            for j in range(k):
                e = _i32(buf, p)
                if e < 0 or e >= n_edges:
                    return _fail(err, E_IN_EDGE + which, p, v, e)
                if which == 0:
                    in_list[n_in] = e
                    n_in += 1
                p += 4
        in_off[v + 1] = n_in
    counts[1] = n_in
    # -- edges
    if n_edges > 0:
        if p + 5 > n:
            return _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
        if buf[p] != 0:
            return _fail(err, E_TRACKING, p, C_EDGE, buf[p])
        p += 5
    seen_tails = False
    seen_pointer = False
    seen = np.zeros(2, np.int64)  # class info of the sparse vector and of its pairs already read
    rule_class = -2
    n_tails = 0
    n_feats = 0
    n_rules = 0
    n_f = 0
    n_e = 0
    n_scores = 0
    for e in range(n_edges):
        # head, tail_nodes_
        if p + 4 > n:
            return _fail(err, E_TRUNCATED, p, F_EDGE, e)
        head = _i32(buf, p)
        if head < 0 or head >= n_nodes:
            return _fail(err, E_HEAD, p, e, head)
        edge_head[e] = head
        p += 4
        if not seen_tails:
            if p + 5 > n:
                return _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
            if buf[p] != 0:
                return _fail(err, E_TRACKING, p, C_TAILS, buf[p])
            p += 5
            seen_tails = True
        if p + 2 > n:
            return _fail(err, E_TRUNCATED, p, F_TAILS, e)
        k = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
        if k * 4 > n - p - 2:
            return _fail(err, E_COUNT, p, F_TAILS, k)
        p += 2
        for j in range(k):
            t = _i32(buf, p)
            if t < 0 or t >= head:
                return _fail(err, E_TAIL, p, e, t)
            tails[n_tails] = t
            n_tails += 1
            p += 4
        tail_off[e + 1] = n_tails
        # rule_: shared_ptr<TRule>
        if not seen_pointer:
            if p + 5 > n:
                return _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
            if buf[p] != 0:
                return _fail(err, E_TRACKING, p, C_SHARED_PTR, buf[p])
            p += 5
            seen_pointer = True
        if p + 2 > n:
            return _fail(err, E_TRUNCATED, p, F_RULE_POINTER, e)
        cid = _i16(buf, p)
        p += 2
        if cid == -1:
            edge_rule[e] = -1
        else:
            if rule_class == -2:
                if cid < 0:
                    return _fail(err, E_CLASS_ID, p - 2, e, cid)
                rule_class = cid
                if p + 5 > n:
                    return _fail(err, E_TRUNCATED, p, F_CLASS_INFO, 0)
                if buf[p] != 1:
                    return _fail(err, E_TRACKING, p, C_RULE, buf[p])
                p += 5
            elif cid != rule_class:
                return _fail(err, E_CLASS_ID, p - 2, e, cid)
            if p + 4 > n:
                return _fail(err, E_TRUNCATED, p, F_RULE_POINTER, e)
            oid = _u32(buf, p)
            if oid > n_rules:
                return _fail(err, E_RULE_REF, p, e, oid)
            p += 4
            edge_rule[e] = oid
            if oid == n_rules:
                # TRule::save: lhs, |f|, f NT mask, f symbols, |e|, e NT mask, e items, arity, scores
                r = n_rules
                if p + 8 > n:
                    return _fail(err, E_TRUNCATED, p, F_RULE, r)
                if _u32(buf, p + 4) != 0 or _u32(buf, p) > n - p - 8:
                    return _fail(err, E_COUNT, p, F_STRING, _u32(buf, p) if _u32(buf, p + 4) == 0 else -1)
                length = _u32(buf, p)
                rule_lhs[r] = _intern(buf, p + 8, length, table, str_off, str_len, counts)
                p += 8 + length
                for side in range(2):
                    if p + 12 > n:
                        return _fail(err, E_TRUNCATED, p, F_SOURCE + side, r)
                    size = _u32(buf, p)
                    mask = _u64(buf, p + 4)
                    if size * (8 - 4 * side) > n - p - 12:
                        return _fail(err, E_COUNT, p, F_SOURCE + side, size)
                    p += 12
                    for i in range(size):
                        nt = i < 64 and ((mask >> np.uint64(i)) & np.uint64(1)) == np.uint64(1)
                        if side == 1 and nt:
                            if p + 4 > n:
                                return _fail(err, E_TRUNCATED, p, F_TARGET, r)
                            value = _i32(buf, p)
                            if value > 0 or value < -65535:  # tail counts are 16-bit
                                return _fail(err, E_NT_VALUE, p, r, value)
                            rule_e[n_e] = value - 1
                            n_e += 1
                            p += 4
                            continue
                        if p + 8 > n:
                            return _fail(err, E_TRUNCATED, p, F_SOURCE + side, r)
                        if _u32(buf, p + 4) != 0 or _u32(buf, p) > n - p - 8:
                            return _fail(err, E_COUNT, p, F_STRING,
                                         _u32(buf, p) if _u32(buf, p + 4) == 0 else -1)
                        length = _u32(buf, p)
                        sid = _intern(buf, p + 8, length, table, str_off, str_len, counts)
                        p += 8 + length
                        if side == 0:
                            rule_f[n_f] = sid
                            rule_f_nt[n_f] = nt
                            n_f += 1
                        else:
                            rule_e[n_e] = sid
                            n_e += 1
                    if side == 0:
                        rule_f_off[r + 1] = n_f
                    else:
                        rule_e_off[r + 1] = n_e
                if p + 1 > n:
                    return _fail(err, E_TRUNCATED, p, F_RULE, r)
                p += 1  # arity_ (char): the tails come from the edge, the slots from the target
                # scores_
                p, n_scores = _sparse_vector(buf, p, err, e, seen, rule_score_name, rule_score_val, n_scores,
                                             table, str_off, str_len, counts, False)
                if p < 0:
                    return err[0]
                rule_score_off[r + 1] = n_scores
                n_rules += 1
        # feature_values_
        p, n_feats = _sparse_vector(buf, p, err, e, seen, feat_name, feat_val, n_feats, table, str_off, str_len,
                                    counts, True)
        if p < 0:
            return err[0]
        feat_off[e + 1] = n_feats
        # i_, j_, prev_i_, prev_j_, id_
        if p + 12 > n:
            return _fail(err, E_TRUNCATED, p, F_SPANS, e)
        for i in range(4):
            spans[e, i] = _i16(buf, p + 2 * i)
        edge_id = _i32(buf, p + 8)
        if edge_id != e:
            return _fail(err, E_EDGE_ID, p + 8, e, edge_id)
        p += 12
    if n - p != 8:
        return _fail(err, E_TRAILER, p, n - p, 0)
    counts[2] = n_tails
    counts[3] = n_feats
    counts[4] = n_rules
    counts[5] = n_f
    counts[6] = n_e
    counts[7] = n_scores
    # every edge is an in-edge of exactly its head
    listed = np.full(n_edges, -1, dtype=np.int64)
    for v in range(n_nodes):
        for j in range(in_off[v], in_off[v + 1]):
            e = in_list[j]
            if listed[e] >= 0:
                return _fail(err, E_IN_TWICE, 0, e, v)
            listed[e] = v
            if edge_head[e] != v:
                return _fail(err, E_HEAD_MISMATCH, 0, e, v)
    for e in range(n_edges):
        if listed[e] < 0:
            return _fail(err, E_NO_NODE, 0, e, 0)
    return 0


@njit(cache=True)
def assemble(order, tail_off, tails, edge_rule, feat_off, feat_name, feat_val, spans, rule_e_off, rule_e,
             n_strings, err, out_tail_off, out_tails, out_feat_off, out_feat_sid, out_feat_val, out_tmpl_off,
             out_tmpl, out_spans, out_rule, name_order):
    """The edges in ``order`` (node order) as output rows; returns (0 or error code, template length,
    number of distinct feature names in ``name_order``, first-use order over all values, zeros included)."""
    slot_of = np.full(n_strings, -1, dtype=np.int64)   # output position of a name in the current edge
    edge_of = np.full(n_strings, -1, dtype=np.int64)   # the edge that set slot_of
    named = np.zeros(n_strings, dtype=np.bool_)
    n_names = 0
    nt = 0
    nf = 0
    nm = 0
    for k in range(order.shape[0]):
        e = order[k]
        arity = tail_off[e + 1] - tail_off[e]
        for j in range(tail_off[e], tail_off[e + 1]):
            out_tails[nt] = tails[j]
            nt += 1
        out_tail_off[k + 1] = nt
        start = nf
        for j in range(feat_off[e], feat_off[e + 1]):
            sid = feat_name[j]
            if not named[sid]:
                named[sid] = True
                name_order[n_names] = sid
                n_names += 1
            if edge_of[sid] == k:
                out_feat_val[slot_of[sid]] = feat_val[j]
            else:
                edge_of[sid] = k
                slot_of[sid] = nf
                out_feat_sid[nf] = sid
                out_feat_val[nf] = feat_val[j]
                nf += 1
        kept = start
        for j in range(start, nf):  # drop zeros (and -0.0), keeping the order
            if out_feat_val[j] != 0.0:
                out_feat_sid[kept] = out_feat_sid[j]
                out_feat_val[kept] = out_feat_val[j]
                kept += 1
        nf = kept
        out_feat_off[k + 1] = nf
        r = edge_rule[e]
        out_rule[k] = r
        if r < 0:
            for i in range(arity):
                out_tmpl[nm] = -i - 1
                nm += 1
        else:
            for j in range(rule_e_off[r], rule_e_off[r + 1]):
                item = rule_e[j]
                if item < 0 and -item - 1 >= arity:
                    return _fail(err, E_NT_ARITY, 0, e, -item - 1), nm, n_names
                out_tmpl[nm] = item
                nm += 1
        out_tmpl_off[k + 1] = nm
        for i in range(4):
            out_spans[k, i] = spans[e, i]
    return 0, nm, n_names
