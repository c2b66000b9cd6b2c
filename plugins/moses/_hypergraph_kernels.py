"""Numba kernel of the Moses hypergraph reader: one pass over a file's bytes into the forest's arrays.

:func:`parse_hypergraph` takes what Moses writes (the layout of
:mod:`plugins.moses.hypergraph`, numbers in fixed-point notation) and
returns ``FALLBACK`` for anything else: a malformed file, CRLF line ends, a
number with an exponent or more than 15 significant digits, any whitespace but
the separating spaces. The Python reader then reads the file and decides,
naming the error, so both readers accept exactly the same files and give the
same forests (tests/test_moses_hypergraph.py checks them against each other).
Words and feature names are interned by a 64-bit FNV-1a hash of their bytes
whose hits are compared byte for byte.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

from minismt._primitives import fnv1a, grow

OK = 0
FALLBACK = 1

_FORMAT_LINE = np.frombuffer(b"# target ||| features ||| source-covered", dtype=np.uint8).copy()
_BOS = np.frombuffer(b"<s>", dtype=np.uint8).copy()
_EOS = np.frombuffer(b"</s>", dtype=np.uint8).copy()
_BARS = np.frombuffer(b"|||", dtype=np.uint8).copy()
_NEWLINE, _SPACE, _HASH, _OPEN, _CLOSE, _EQUALS, _BAR = 10, 32, 35, 91, 93, 61, 124
_LIMIT = 2 ** 31
_MAX_MANTISSA = 2 ** 53
_POW10 = np.array([10.0 ** k for k in range(23)])


@njit(cache=True)
def _line_end(data, pos):
    n = data.shape[0]
    while pos < n and data[pos] != _NEWLINE:
        pos += 1
    return pos


@njit(cache=True)
def _next_line(data, pos):
    """``(start, end, next_pos)`` of the line at ``pos`` (``start = -1`` at the end of the data)."""
    if pos >= data.shape[0]:
        return -1, -1, pos
    end = _line_end(data, pos)
    return pos, end, end + 1


@njit(cache=True)
def _next_content(data, pos, line):
    """The next line not starting with ``#``: ``(start, end, next_pos, line number)``."""
    while True:
        start, end, pos = _next_line(data, pos)
        if start < 0:
            return -1, -1, pos, line
        line += 1
        if end == start or data[start] != _HASH:
            return start, end, pos, line


@njit(cache=True)
def _digits(data, start, end):
    """The value of ASCII digits ``data[start:end]`` (at most 10 of them), else -1."""
    if end <= start or end - start > 10:
        return -1
    value = 0
    for i in range(start, end):
        d = data[i] - 48
        if d < 0 or d > 9:
            return -1
        value = value * 10 + d
    return value


@njit(cache=True)
def _fixed_point(data, start, end):
    """``(ok, value)`` of ``[+-]digits[.digits]`` or ``[+-].digits``: the correctly rounded double, as
    ``float()`` gives it, for at most 15 significant digits and 22 decimals (mantissa / 10**k)."""
    i = start
    negative = False
    if i < end and (data[i] == 43 or data[i] == 45):
        negative = data[i] == 45
        i += 1
    mantissa = 0
    digits = 0
    decimals = 0
    point = False
    for j in range(i, end):
        c = data[j]
        if c == 46 and not point:
            point = True
            continue
        d = c - 48
        if d < 0 or d > 9:
            return False, 0.0
        digits += 1
        if point:
            decimals += 1
        mantissa = mantissa * 10 + d
        if mantissa >= _MAX_MANTISSA or decimals > 22:
            return False, 0.0
    if digits == 0:
        return False, 0.0
    value = mantissa / _POW10[decimals]
    return True, -value if negative else value


@njit(cache=True)
def _other_space(data, start, end):
    """Whether ``data[start:end]`` holds whitespace other than the space (ASCII controls, or a UTF-8
    encoded Unicode space: U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028/9, U+202F, U+205F, U+3000)."""
    for i in range(start, end):
        c = data[i]
        if c < 32 or c == 127:
            return True
        if c == 0xC2 and i + 1 < end and (data[i + 1] == 0x85 or data[i + 1] == 0xA0):
            return True
        if c == 0xE1 and i + 2 < end and data[i + 1] == 0x9A and data[i + 2] == 0x80:
            return True
        if c == 0xE2 and i + 2 < end:
            b, d = data[i + 1], data[i + 2]
            if b == 0x80 and (d <= 0x8A or d == 0xA8 or d == 0xA9 or d == 0xAF):
                return True
            if b == 0x81 and d == 0x9F:
                return True
        if c == 0xE3 and i + 2 < end and data[i + 1] == 0x80 and data[i + 2] == 0x80:
            return True
    return False


@njit(cache=True)
def _equal(data, start, end, text):
    if end - start != text.shape[0]:
        return False
    for i in range(text.shape[0]):
        if data[start + i] != text[i]:
            return False
    return True


@njit(cache=True)
def _equal_spans(data, start, end, other_start, other_end):
    if end - start != other_end - other_start:
        return False
    for i in range(end - start):
        if data[start + i] != data[other_start + i]:
            return False
    return True


@njit(cache=True)
def _intern(data, start, end, table, spans, n):
    """``(id, spans, n)``: the id of the token ``data[start:end]`` (a new one is appended to ``spans``),
    or id -1 on a hash collision between different tokens."""
    h = fnv1a(data, start, end)
    if h in table:
        k = table[h]
        s, e = spans[k, 0], spans[k, 1]
        if e - s != end - start:
            return -1, spans, n
        for i in range(end - start):
            if data[s + i] != data[start + i]:
                return -1, spans, n
        return k, spans, n
    if n >= spans.shape[0]:
        bigger = np.empty((max(16, 2 * spans.shape[0]), 2), np.int64)
        bigger[:n] = spans[:n]
        spans = bigger
    spans[n, 0] = start
    spans[n, 1] = end
    table[h] = n
    return n, spans, n + 1


@njit(cache=True)
def _is_separator(data, i, end):
    return (i + 5 <= end and data[i] == _SPACE and data[i + 1] == _BAR and data[i + 2] == _BAR
            and data[i + 3] == _BAR and data[i + 4] == _SPACE)


@njit(cache=True)
def _has_bars(data, start, end):
    for i in range(start, end - 2):
        if data[i] == _BAR and data[i + 1] == _BAR and data[i + 2] == _BAR:
            return True
    return False


@njit(cache=True, nogil=True)
def parse_hypergraph(data):
    """Parse a Moses hypergraph file's bytes. Returns ``(status, in_offsets, tail_offsets, tails,
    tmpl_offsets, tmpl, feat_offsets, feat_names, feat_values, covered, layout, word_spans, n_words,
    name_spans, name_lines, n_names)``; the arrays are cut to size; ``tmpl`` holds file-local word ids
    (>= 0) and ``-slot``; ``feat_names`` file-local name ids (first-occurrence order, as the spans)."""
    empty_i64 = np.zeros(1, np.int64)
    empty_i32 = np.zeros(0, np.int32)
    empty_spans = np.zeros((0, 2), np.int64)
    failed = (FALLBACK, empty_i64, empty_i64, empty_i32, empty_i64, empty_i32, empty_i64, empty_i32,
              np.zeros(0, np.float64), np.zeros(0, np.int64), np.zeros(0, np.uint8), empty_spans, 0,
              empty_spans, np.zeros(0, np.int64), 0)
    start, end, pos = _next_line(data, 0)
    line = 1
    if start < 0 or not _equal(data, start, end, _FORMAT_LINE):
        return failed
    start, end, pos, line = _next_content(data, pos, line)
    if start < 0:
        return failed
    space_at = -1
    for i in range(start, end):
        if data[i] == _SPACE:
            if space_at >= 0:
                return failed
            space_at = i
    if space_at < 0:
        return failed
    n_vertices = _digits(data, start, space_at)
    n_edges = _digits(data, space_at + 1, end)
    if n_vertices < 0 or n_edges < 0 or n_vertices >= _LIMIT or n_edges >= _LIMIT:
        return failed
    in_offsets = np.zeros(n_vertices + 1, np.int64)
    tail_offsets = np.zeros(n_edges + 1, np.int64)
    tmpl_offsets = np.zeros(n_edges + 1, np.int64)
    feat_offsets = np.zeros(n_edges + 1, np.int64)
    covered = np.zeros(n_edges, np.int64)
    layout = np.zeros(n_edges, np.uint8)
    tails = np.empty(max(16, n_edges), np.int32)
    tmpl = np.empty(max(16, 2 * n_edges), np.int32)
    feat_names = np.empty(max(16, 16 * n_edges), np.int32)
    feat_values = np.empty(max(16, 16 * n_edges), np.float64)
    word_table = Dict.empty(key_type=types.uint64, value_type=types.int64)
    name_table = Dict.empty(key_type=types.uint64, value_type=types.int64)
    word_spans = np.empty((64, 2), np.int64)
    name_spans = np.empty((64, 2), np.int64)
    name_lines = np.empty(64, np.int64)
    previous = np.empty(64, np.int32)  # the name ids of the last edge's features, in order
    n_previous = 0
    t_start = np.empty(64, np.int64)  # the target's tokens, reused by every edge
    t_end = np.empty(64, np.int64)
    n_words = 0
    n_names = 0
    n_tails = 0
    n_tmpl = 0
    n_feats = 0
    e = 0
    for v in range(n_vertices):
        start, end, pos, line = _next_content(data, pos, line)
        count = _digits(data, start, end) if start >= 0 else -1
        if count <= 0 or e + count > n_edges:
            return failed
        for _ in range(count):
            start, end, pos = _next_line(data, pos)
            if start < 0:
                return failed
            line += 1
            first = -1
            second = -1
            i = start
            while i < end:
                if _is_separator(data, i, end):
                    if first < 0:
                        first = i
                    elif second < 0:
                        second = i
                    else:
                        return failed
                    i += 5
                else:
                    i += 1
            if second < 0 or _other_space(data, start, second):
                return failed
            # target: tokens between spaces, <s> first and </s> last flagged and left out
            flags = 4 if first > start and data[first - 1] == _SPACE else 0
            t_start = grow(t_start, first - start + 1)
            t_end = grow(t_end, first - start + 1)
            n_tokens = 0
            i = start
            while i < first:
                if data[i] == _SPACE:
                    i += 1
                    continue
                j = i
                while j < first and data[j] != _SPACE:
                    j += 1
                t_start[n_tokens] = i
                t_end[n_tokens] = j
                n_tokens += 1
                i = j
            lo, hi = 0, n_tokens
            if hi > lo and _equal(data, t_start[lo], t_end[lo], _BOS):
                flags |= 1
                lo += 1
            if hi > lo and _equal(data, t_start[hi - 1], t_end[hi - 1], _EOS):
                flags |= 2
                hi -= 1
            slot = 0
            for k in range(lo, hi):
                a, b = t_start[k], t_end[k]
                if data[a] == _OPEN and data[b - 1] == _CLOSE and b - a > 1:
                    tail = _digits(data, a + 1, b - 1)
                    if tail < 0 or tail >= v:
                        return failed
                    tails = grow(tails, n_tails + 1)
                    tails[n_tails] = tail
                    n_tails += 1
                    slot += 1
                    tmpl = grow(tmpl, n_tmpl + 1)
                    tmpl[n_tmpl] = -slot
                    n_tmpl += 1
                    continue
                if _equal(data, a, b, _BOS) or _equal(data, a, b, _EOS) or _equal(data, a, b, _BARS):
                    return failed  # <s>, </s> or ||| inside a target: the Python reader names it
                word, word_spans, n_words = _intern(data, a, b, word_table, word_spans, n_words)
                if word < 0:
                    return failed
                tmpl = grow(tmpl, n_tmpl + 1)
                tmpl[n_tmpl] = word
                n_tmpl += 1
            tail_offsets[e + 1] = n_tails
            tmpl_offsets[e + 1] = n_tmpl
            # features: name=value tokens split at the last '='
            edge_first = n_feats
            i = first + 5
            while i < second:
                if data[i] == _SPACE:
                    i += 1
                    continue
                j = i
                equals = -1
                while j < second and data[j] != _SPACE:
                    if data[j] == _EQUALS:
                        equals = j
                    j += 1
                if equals <= i or _has_bars(data, i, equals):
                    return failed
                ok, value = _fixed_point(data, equals + 1, j)
                if not ok:
                    return failed
                position = n_feats - edge_first
                name = -1
                if position < n_previous:  # Moses writes the same names in the same order on every edge
                    guess = previous[position]
                    if _equal_spans(data, i, equals, name_spans[guess, 0], name_spans[guess, 1]):
                        name = guess
                n_known = n_names
                if name < 0:
                    name, name_spans, n_known = _intern(data, i, equals, name_table, name_spans, n_names)
                    if name < 0:
                        return failed
                if n_known > n_names:
                    name_lines = grow(name_lines, n_known)
                    name_lines[n_names] = line
                    n_names = n_known
                for f in range(edge_first, n_feats):
                    if feat_names[f] == name:
                        return failed
                feat_names = grow(feat_names, n_feats + 1)
                feat_values = grow(feat_values, n_feats + 1)
                feat_names[n_feats] = name
                feat_values[n_feats] = value
                n_feats += 1
                i = j
            feat_offsets[e + 1] = n_feats
            n_previous = n_feats - edge_first
            previous = grow(previous, n_previous)
            previous[:n_previous] = feat_names[edge_first:n_feats]
            count_covered = _digits(data, second + 5, end)
            if count_covered < 0 or count_covered >= _LIMIT:
                return failed
            covered[e] = count_covered
            layout[e] = flags
            e += 1
        in_offsets[v + 1] = e
    if e != n_edges:
        return failed
    while True:
        start, end, pos = _next_line(data, pos)
        if start < 0:
            break
        if end > start and data[start] != _HASH:
            for i in range(start, end):
                if data[i] != _SPACE:
                    return failed
    return (OK, in_offsets, tail_offsets, tails[:n_tails].copy(), tmpl_offsets, tmpl[:n_tmpl].copy(),
            feat_offsets, feat_names[:n_feats].copy(), feat_values[:n_feats].copy(), covered, layout,
            word_spans[:n_words].copy(), n_words, name_spans[:n_names].copy(), name_lines[:n_names].copy(),
            n_names)
