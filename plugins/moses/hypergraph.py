"""Moses hypergraphs (``moses -output-search-graph-hypergraph true txt DIR``): reader, writer, weights.

This is the text format that ``kbmira --type hypergraph --hgdir DIR`` reads
(``ReadGraph`` in Moses' ``mert/Hypergraph.cpp``), one file per sentence::

    # target ||| features ||| source-covered          <- exactly this first line
    1198 8794                                          <- vertices, edges
    # node 0                                           <- '#' lines between blocks are comments
    1                                                  <- incoming edges of vertex 0, then those lines
    <s> |||  ||| 0
    # node 1
    1
    [0] baumwolle  ||| UnknownWordPenalty0=-100.000000 ... TranslationModel0_1=0.000000 ... LM0=-14.988057  ||| 1
    ...

Vertices are listed bottom-up and the last one is the goal. In an edge's
target, ``[k]`` is the yield of vertex ``k`` (the edge's tails, in order of
appearance; ``k`` must be an earlier vertex) and other tokens are words;
``<s>`` and ``</s>`` are sentence boundaries that Moses' tuning code skips
(``Graph::IsBoundary``), so they are not part of our templates and yields:
Viterbi and k-best texts are the decoder's output strings. Features are
``name=value`` tokens split at the last ``=``; ``source-covered`` is the number
of source words the head hypothesis covers (kbmira takes it from a vertex's
first edge: :attr:`MosesHypergraph.source_covered`).

Names. Moses writes a one-value producer as ``Name`` and the values of an
n-value producer as ``Name_1 .. Name_n`` (1-based, ``ScoreComponentCollection::Save``);
this project names them ``Name_0 .. Name_{n-1}`` everywhere (n-best lists,
moses.ini, features.dat, our decoder). As in the n-best reader, a producer
name never contains ``_``: a name without ``_``, or ``Label_k`` with ``k >= 1``
and ``Label`` without ``_``, is dense; every other name is sparse and kept as
Moses wrote it. Without a feature space the dense block is the producers in
the file's order (Moses' feature-function order, e.g. ``UnknownWordPenalty0``
first); give a space (say ``FeatureSpace(flatten_weights(read_moses_ini_weights(ini)))``,
the n-best/moses.ini/decoder order) to read into that one instead.

Round trip. :func:`write_moses_hypergraph` writes Moses' own layout: ``# node v``
before every vertex, every feature of an edge in the order read (the zeros
Moses writes for every dense feature, and ``-0``, are kept) as ``name=value`` and a space
(values with 6 decimals,
as Moses prints them, or the shortest exact form when 6 decimals would change
the value), and each edge's target, boundaries and trailing space and its
source-covered count as read. A file Moses wrote comes back byte for byte;
what Moses' reader accepts but ignores is not kept: other comments, runs of
spaces between tokens, number spellings other than Moses' own.

Stricter than ``ReadGraph`` (each is an :class:`~minismt.errors.InputError`
naming the file and line): counts that disagree with the file (Moses reads
the announced number of vertices, ignores what follows and fails only on
more edges than announced), a tail that is the vertex itself or later (Moses
accepts ``[k]`` for the current vertex and fails later in ``Graph::Prune``),
``[]`` (Moses reads ``[0]``), a vertex without edges (a dead end for Moses, a
start node in our hypergraphs), ``<s>`` anywhere but first or ``</s>``
anywhere but last, non-finite or non-C numbers (Moses accepts ``inf``), a
feature given twice on one edge (Moses keeps the last), ``|||`` as a word or
inside a feature name, whitespace other than the separating spaces, and text
after the last vertex other than comments and blank lines.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace, parse_float, read_weights
from minismt.hypergraph import Hypergraph
from minismt.io import atomic_write, iter_lines, read_binary
from plugins.moses import _hypergraph_kernels as K
from plugins.moses.nbest import groups_of_names, parse_index, split_indexed_name

FORMAT_LINE = "# target ||| features ||| source-covered"
BOS = "<s>"
EOS = "</s>"
WEIGHTS_FILE = "weights"
"""The file Moses writes next to the graphs (and kbmira skips)."""

LAYOUT_BOS = 1
"""Edge layout flag: the target starts with ``<s>``."""
LAYOUT_EOS = 2
"""Edge layout flag: the target ends with ``</s>``."""
LAYOUT_SPACE = 4
"""Edge layout flag: the target field ends with a space (Moses' phrase-based writer ends every edge but
the ``<s>`` and ``</s>`` ones so, its chart writer every edge)."""

_SEPARATOR = " ||| "
_EDGE_FORMAT = "'target ||| features ||| source-covered' (no comments inside a vertex's edge list)"
_LIMIT = 2 ** 31
_TAIL = re.compile(r"\[([0-9]+)\]")
_OTHER_SPACE = re.compile(r"[^\S ]")
_FILE_NAME = re.compile(r"([0-9]+)(?:\.[^.]*)?")


class MosesHypergraph(Hypergraph):
    """A :class:`~minismt.hypergraph.Hypergraph` read from a Moses file, with what the format adds.

    ``edge_covered`` int32[E]: the source-covered field of every edge;
    ``edge_layout`` uint8[E]: ``LAYOUT_*`` flags (boundary tokens, trailing
    space) so that :func:`write_moses_hypergraph` writes the edge as read.
    Methods that build a new forest (``replace``, ``subgraph``, ``prune``)
    return a plain :class:`Hypergraph`.
    """

    def __init__(self, *args, edge_covered, edge_layout, **kwargs):
        super().__init__(*args, **kwargs)
        covered = np.asarray(edge_covered)
        layout = np.asarray(edge_layout)
        for name, values, high in (("edge_covered", covered, _LIMIT), ("edge_layout", layout, 8)):
            if values.shape != (self.n_edges,) or (values.size and (values.dtype.kind not in "iu" or values.min() < 0
                                                                    or values.max() >= high)):
                raise InputError(f"{name} of shape {values.shape}",
                                 expected=f"{self.n_edges} integers in [0, {high})")
        self.edge_covered = np.ascontiguousarray(covered, dtype=np.int32)
        self.edge_layout = np.ascontiguousarray(layout, dtype=np.uint8)

    @property
    def source_covered(self) -> np.ndarray:
        """int32[n_nodes]: source words covered by each vertex, from its first edge as kbmira reads it (0 if none)."""
        out = np.zeros(self.n_nodes, dtype=np.int32)
        has_edges = np.diff(self.in_offsets) > 0
        out[has_edges] = self.edge_covered[self.in_offsets[:-1][has_edges]]
        return out


def moses_feature_name(name: str) -> tuple[str, bool]:
    """``(our name, dense)`` of a feature name as Moses writes it in hypergraphs and their weights file.

    ``LM0`` -> ``LM0_0``, ``TranslationModel0_1`` -> ``TranslationModel0_0``
    (dense); names whose producer part would contain ``_``, and ``Label_0``
    (not 1-based), are sparse and keep their spelling.
    """
    if "_" not in name:
        return f"{name}_0", True
    split = split_indexed_name(name)
    if split is not None and split[0] and "_" not in split[0] and split[1] >= 1:
        return f"{split[0]}_{split[1] - 1}", True
    return name, False


def _dense_sizes(space: FeatureSpace) -> dict[str, int]:
    """Number of dense values of every producer ``Label`` of the space (names ``Label_i``)."""
    sizes: dict[str, int] = {}
    for name in space.dense_names:
        split = split_indexed_name(name)
        if split is not None:
            sizes[split[0]] = sizes.get(split[0], 0) + 1
    return sizes


class _Lines:
    """The lines of one file with the number of the last one read; the end of the file is an InputError."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._lines = iter_lines(path)
        self.number = 0

    def next(self, where: str, expected: str) -> str:
        """The next line, or an InputError saying the file ends ``where``."""
        for self.number, text in self._lines:
            return text
        raise InputError(f"the file ends {where}", self.path, self.number + 1, expected)

    def next_content(self, where: str, expected: str) -> str:
        """The next line that is not a comment (``#`` at its start, skipped as ``NextLine`` does)."""
        while True:
            text = self.next(where, expected)
            if not text.startswith("#"):
                return text

    def rest(self):
        """``(number, text)`` of the lines not read yet."""
        for self.number, text in self._lines:
            yield self.number, text

    def fail(self, message: str, expected: str | None = None):
        raise InputError(message, self.path, self.number, expected)

    def close(self) -> None:
        """Close the file (also when reading stopped at an error)."""
        self._lines.close()


class _Edges:
    """Edges parsed line by line, with file-local ids for words and feature names."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self.words: dict[str, int] = {}
        self.names: dict[str, int] = {}
        self.name_lines: list[int] = []
        self.tails: list[int] = []
        self.tail_offsets = [0]
        self.tmpl: list[int] = []
        self.tmpl_offsets = [0]
        self.feat_names: list[int] = []
        self.feat_values: list[float] = []
        self.feat_offsets = [0]
        self.covered: list[int] = []
        self.layout: list[int] = []
        self._values: dict[str, float] = {}

    def add(self, text: str, head: int) -> None:
        """Parse one edge line into vertex ``head``."""
        lines = self.lines
        fields = text.split(_SEPARATOR)
        if len(fields) != 3:
            lines.fail(f"{len(fields)} fields in an edge line", _EDGE_FORMAT)
        target, features, covered = fields
        if _OTHER_SPACE.search(target) or _OTHER_SPACE.search(features):
            lines.fail("whitespace other than spaces in an edge line", "tokens separated by spaces")
        tokens = [t for t in target.split(" ") if t]
        layout = LAYOUT_SPACE if target.endswith(" ") else 0
        if tokens and tokens[0] == BOS:
            layout |= LAYOUT_BOS
            tokens = tokens[1:]
        if tokens and tokens[-1] == EOS:
            layout |= LAYOUT_EOS
            tokens = tokens[:-1]
        slot = 0
        for token in tokens:
            if token[0] == "[" and token[-1] == "]" and len(token) > 1:
                match = _TAIL.fullmatch(token)
                if match is None:
                    lines.fail(f"bad non-terminal {token[:40]!r}", "[k] with k the number of an earlier vertex")
                tail = int(match.group(1))
                if tail >= head:
                    lines.fail(f"edge into vertex {head} refers to vertex {tail}",
                               "earlier vertices only (bottom-up order)")
                self.tails.append(tail)
                slot += 1
                self.tmpl.append(-slot)
            elif token in (BOS, EOS, "|||"):
                lines.fail(f"the word {token!r} inside a target",
                           "<s> only first and </s> only last, no word '|||'")
            else:
                word = self.words.setdefault(token, len(self.words))
                self.tmpl.append(word)
        self.tail_offsets.append(len(self.tails))
        self.tmpl_offsets.append(len(self.tmpl))
        seen = set()
        for token in features.split(" "):
            if not token:
                continue
            name, equals, value = token.rpartition("=")
            if not equals:
                lines.fail(f"feature {token[:40]!r} has no '='", "name=value")
            if not name:
                lines.fail(f"feature {token[:40]!r} has no name", "name=value")
            if "|||" in name:
                lines.fail(f"feature name {name[:40]!r} contains '|||'", "names without Moses' field separator")
            if name in seen:
                lines.fail(f"feature {name[:40]!r} given twice on one edge", "each feature once per edge")
            seen.add(name)
            number = self._values.get(value)
            if number is None:
                number = parse_float(value, lines.path, lines.number, f"the value of feature {name[:40]}")
                self._values[value] = number
            local = self.names.get(name)
            if local is None:
                local = self.names[name] = len(self.names)
                self.name_lines.append(lines.number)
            self.feat_names.append(local)
            self.feat_values.append(number)
        self.feat_offsets.append(len(self.feat_names))
        count = parse_index(covered, lines.path, lines.number, "the number of source words covered")
        if count >= _LIMIT:
            lines.fail(f"{count} source words covered", f"fewer than {_LIMIT}")
        self.covered.append(count)
        self.layout.append(layout)


def _feature_ids(edges: "_Parsed", space: FeatureSpace | None, path: str) -> tuple[FeatureSpace, np.ndarray]:
    """The feature space (given, or made from the file's dense names) and the space id of every local name.

    Checks everything before the space grows: dense names must be dense in
    the space and spelled as Moses spells a producer of that size, sparse
    names must not be dense names.
    """
    names = list(edges.names)
    mapped = [moses_feature_name(name) for name in names]
    styles: dict[str, tuple[bool, int, int]] = {}
    for local, (name, (ours, dense)) in enumerate(zip(names, mapped)):
        if not dense:
            continue
        producer, index = split_indexed_name(ours)
        indexed = name != producer
        if producer in styles and styles[producer][0] != indexed:
            raise InputError(f"producer {producer!r} is written both as {producer} and as {producer}_k", path,
                             edges.name_lines[local], "one spelling per producer")
        previous = styles.get(producer, (indexed, 0, edges.name_lines[local]))
        styles[producer] = (indexed, max(previous[1], index + 1), previous[2])
    if space is None:
        dense_names = [f"{producer}_{i}" for producer, (_, size, _) in styles.items() for i in range(size)]
        space = FeatureSpace(dense_names)
    sizes = _dense_sizes(space)
    for producer, (indexed, size, line) in styles.items():
        have = sizes.get(producer, 0)
        missing = [f"{producer}_{i}" for i in range(size) if space.get(f"{producer}_{i}", len(space)) >= space.n_dense]
        if missing:
            raise InputError(f"dense feature {missing[0]} is not a dense feature of the feature space",
                             path, line, f"dense names among {space.dense_names[:6]}...")
        if indexed != (have > 1):
            written = f"{producer}_1.." if indexed else producer
            raise InputError(f"{written} is written for {producer}, which has {have} value(s) in the feature space",
                             path, line, "Name for one value, Name_1 .. Name_n for n > 1 (Moses' spelling)")
    for local, (ours, dense) in enumerate(mapped):
        index = space.get(ours)
        if not dense and index is not None and index < space.n_dense:
            raise InputError(f"sparse feature {ours[:40]!r} has the name of a dense feature", path,
                             edges.name_lines[local], "sparse names distinct from the dense ones")
    ids = np.array([space.add(ours) for ours, _ in mapped], dtype=np.int32)
    return space, ids


def _read_edges(lines: _Lines) -> tuple[_Edges, list[int]]:
    """Check the file's layout and counts and parse its edges; returns them and the vertices' edge offsets."""
    path = lines.path
    first = lines.next("before its first line", FORMAT_LINE)
    if first != FORMAT_LINE:
        lines.fail(f"first line {first[:60]!r}", FORMAT_LINE)
    header = lines.next_content("before the counts line", "'<vertices> <edges>'")
    counts_line = lines.number
    counts = header.split(" ")
    if len(counts) != 2:
        lines.fail(f"counts line {header[:60]!r}", "'<vertices> <edges>'")
    n_vertices = parse_index(counts[0], path, counts_line, "the number of vertices")
    n_edges = parse_index(counts[1], path, counts_line, "the number of edges")
    if n_vertices >= _LIMIT or n_edges >= _LIMIT:
        lines.fail(f"counts {n_vertices} {n_edges}", f"fewer than {_LIMIT} vertices and edges")
    edges = _Edges(lines)
    in_offsets = [0]
    for v in range(n_vertices):
        where = f"after {v} of {n_vertices} vertices"
        count_text = lines.next_content(where, "the number of edges of the next vertex")
        count = parse_index(count_text, path, lines.number, f"the number of edges of vertex {v}")
        if count == 0:
            lines.fail(f"vertex {v} has no edges", "at least one edge per vertex (the start vertex has '<s>')")
        if in_offsets[-1] + count > n_edges:
            lines.fail(f"vertex {v} brings the edges to {in_offsets[-1] + count}",
                       f"{n_edges} edges, as the counts line {counts_line} says")
        for e in range(count):
            text = lines.next(f"after {e} of the {count} edges of vertex {v}", _EDGE_FORMAT)
            edges.add(text, v)
        in_offsets.append(in_offsets[-1] + count)
    if in_offsets[-1] != n_edges:
        raise InputError(f"the file has {in_offsets[-1]} edges", path, counts_line,
                         f"{n_edges} edges, as this line says")
    for number, text in lines.rest():
        if text.strip(" ") and not text.startswith("#"):
            raise InputError(f"text after the last vertex: {text[:40]!r}", path, number,
                             "only comments after the last vertex")
    return edges, in_offsets


def read_moses_hypergraph(path: str | os.PathLike, space: FeatureSpace | None = None,
                          vocab: Vocabulary | None = None) -> MosesHypergraph:
    """Read one Moses hypergraph file (plain or gzip) into a :class:`MosesHypergraph`.

    Features are named as the rest of the project names Moses features
    (``LM0_0``, ``TranslationModel0_3``; see the module docstring); without
    ``space`` a new one is made whose dense block is the file's producers in
    file order. Sparse names are added to the space and target words to
    ``vocab`` only when the whole file is valid. Share both across the files
    of a dev set (:func:`read_moses_hypergraphs` does).
    """
    return _graph(path, _parse_fast(path), space, vocab)


def _graph(path, parsed: "_Parsed | None", space: FeatureSpace | None, vocab: Vocabulary | None) -> MosesHypergraph:
    """The forest of a parsed file (``parsed`` None: parse it with the Python reader, which names the error)."""
    if parsed is None:
        parsed = _parse_slow(path)
    path = os.fspath(path)
    space, ids = _feature_ids(parsed, space, path)
    vocab = vocab if vocab is not None else Vocabulary()
    word_ids = np.array([vocab.add(word) for word in parsed.words] + [0], dtype=np.int32)
    tmpl = np.asarray(parsed.tmpl, dtype=np.int32)
    tmpl = np.where(tmpl >= 0, word_ids[np.maximum(tmpl, 0)], tmpl).astype(np.int32)
    try:
        return MosesHypergraph(
            space, vocab, len(parsed.in_offsets) - 1, np.asarray(parsed.in_offsets, dtype=np.int64),
            np.asarray(parsed.tail_offsets, dtype=np.int64), np.asarray(parsed.tails, dtype=np.int32),
            np.asarray(parsed.feat_offsets, dtype=np.int64),
            ids[np.asarray(parsed.feat_names, dtype=np.int64)] if len(parsed.feat_names) else np.zeros(0, np.int32),
            np.asarray(parsed.feat_values, dtype=np.float64), np.asarray(parsed.tmpl_offsets, dtype=np.int64), tmpl,
            edge_covered=np.asarray(parsed.covered, dtype=np.int64), edge_layout=np.asarray(parsed.layout, np.uint8))
    except InputError as err:
        raise InputError(err.message, path, expected=err.expected) from None


class _Parsed:
    """A file's forest arrays with file-local word and name ids, as :func:`_parse_fast` and
    :func:`_parse_slow` give them: ``words`` and ``names`` in first-occurrence order, ``name_lines`` the
    line of each name's first occurrence."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)


def _parse_fast(path) -> _Parsed | None:
    """The numba reader (:mod:`plugins.moses._hypergraph_kernels`); None when it leaves the file to
    :func:`_parse_slow` (anything but UTF-8 text in the layout Moses writes, or a gzip error)."""
    try:
        data = read_binary(path)
        data.decode("utf-8")
    except (InputError, ValueError):
        return None
    (status, in_offsets, tail_offsets, tails, tmpl_offsets, tmpl, feat_offsets, feat_names, feat_values, covered,
     layout, word_spans, n_words, name_spans, name_lines, n_names) = K.parse_hypergraph(np.frombuffer(data, np.uint8))
    if status != K.OK:
        return None
    words = [data[a:b].decode("utf-8") for a, b in word_spans.tolist()]
    names = [data[a:b].decode("utf-8") for a, b in name_spans.tolist()]
    return _Parsed(in_offsets=in_offsets, tail_offsets=tail_offsets, tails=tails, tmpl_offsets=tmpl_offsets,
                   tmpl=tmpl, feat_offsets=feat_offsets, feat_names=feat_names, feat_values=feat_values,
                   covered=covered, layout=layout, words=words, names={n: k for k, n in enumerate(names)},
                   name_lines=name_lines.tolist())


def _parse_slow(path) -> _Parsed:
    """The Python reader: every check of the format, the first failing one an :class:`InputError`."""
    lines = _Lines(path)
    try:
        edges, in_offsets = _read_edges(lines)
    finally:
        lines.close()
    return _Parsed(in_offsets=in_offsets, tail_offsets=edges.tail_offsets, tails=edges.tails,
                   tmpl_offsets=edges.tmpl_offsets, tmpl=edges.tmpl, feat_offsets=edges.feat_offsets,
                   feat_names=edges.feat_names, feat_values=edges.feat_values, covered=edges.covered,
                   layout=edges.layout, words=list(edges.words), names=edges.names, name_lines=edges.name_lines)


def read_moses_hypergraphs(directory: str | os.PathLike, space: FeatureSpace | None = None,
                           vocab: Vocabulary | None = None) -> list[MosesHypergraph]:
    """The hypergraphs of a ``--hgdir`` folder, one per sentence, in sentence order.

    As kbmira, the sentence id is the integer stem of ``<id>`` or
    ``<id>.<ext>`` and the file ``weights`` is skipped; ids must be ``0 .. n-1``,
    each once. Files whose names do not start with a digit (``dev5.src``,
    ``README``) are ignored (kbmira would fail on them); other names starting
    with a digit (``3.txt.gz``) are an :class:`InputError`. The files are parsed in threads (one per
    core); all graphs share one feature space and vocabulary (made from the first file if not given).
    """
    directory = os.fspath(directory)
    try:
        names = sorted(os.listdir(directory))
    except OSError as err:
        raise InputError(f"cannot list the folder: {err.strerror or err}", directory) from None
    files: dict[int, str] = {}
    for name in names:
        if name == WEIGHTS_FILE or not name[:1].isdigit():
            continue
        match = _FILE_NAME.fullmatch(name)
        if match is None or not match.group(1).isascii():
            raise InputError(f"file name {name!r}", directory, expected="'<sentence id>' or '<sentence id>.<ext>'")
        sentence = int(match.group(1))
        if sentence in files:
            raise InputError(f"files {files[sentence]!r} and {name!r} are both sentence {sentence}", directory,
                             expected="one file per sentence")
        files[sentence] = name
    missing = [i for i in range(len(files)) if i not in files]
    if missing:
        raise InputError(f"no hypergraph for sentence {missing[0]} (the largest id is {max(files)})", directory,
                         expected=f"files for sentences 0 .. {len(files) - 1}")
    vocab = vocab if vocab is not None else Vocabulary()
    paths = [os.path.join(directory, files[sentence]) for sentence in range(len(files))]
    graphs = []
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # gzip and the kernel release the GIL
        for path, parsed in zip(paths, pool.map(_parse_fast, paths)):
            graph = _graph(path, parsed, space, vocab)
            space = graph.space
            graphs.append(graph)
    return graphs


def read_moses_hypergraph_weights(path: str | os.PathLike) -> dict[str, float]:
    """The ``weights`` file Moses writes next to its hypergraphs, as ``{our name: weight}``.

    Lines are ``name value`` with the names of the edge features
    (``TranslationModel0_1`` -> ``TranslationModel0_0``, see :func:`moses_feature_name`).
    """
    weights: dict[str, float] = {}
    for name, value in read_weights(path).items():
        ours, _ = moses_feature_name(name)
        if ours in weights:
            raise InputError(f"two weights for {ours} (one written {name})", path, expected="each feature once")
        weights[ours] = value
    return weights


def _moses_names(graph: Hypergraph) -> dict[int, str]:
    """The Moses spelling of every feature id the graph uses; names that would not read back are an error."""
    groups = groups_of_names(graph.space.dense_names)
    dense: list[str] = []
    for label, size in groups:
        dense.extend([label] if size == 1 else [f"{label}_{i + 1}" for i in range(size)])
    out = {}
    for i in np.unique(graph.feat_ids).tolist():
        if i < len(dense):
            out[i] = dense[i]
            continue
        name = graph.space.name(i)
        if moses_feature_name(name) != (name, False):
            raise InputError(f"sparse feature {name!r} would read back as a dense feature",
                             expected="sparse names whose part before the last '_k' contains '_'")
        out[i] = name
    return out


def _number(value: float) -> str:
    """Moses' fixed 6-decimal form when it reads back to ``value``, else the shortest exact form."""
    text = "%.6f" % value
    return text if float(text) == value else repr(value)


def _words(graph: Hypergraph) -> dict[int, str]:
    """The used words of the vocabulary, checked to read back as the same words."""
    out = {}
    for i in np.unique(graph.tmpl[graph.tmpl >= 0]).tolist():
        word = graph.vocab[i]
        if (not word or word in (BOS, EOS, "|||") or any(c.isspace() for c in word)
                or (word[0] == "[" and word[-1] == "]" and len(word) > 1)):
            raise InputError(f"the word {word[:40]!r} cannot be written to a Moses hypergraph",
                             expected="words without whitespace, not <s>, </s>, ||| or [...]")
        out[i] = word
    return out


def dumps_moses_hypergraph(graph: Hypergraph, source_covered=None) -> str:
    """The Moses text of ``graph`` (see :func:`write_moses_hypergraph`)."""
    n_edges = graph.n_edges
    if source_covered is not None:
        covered = np.asarray(source_covered)
        if covered.shape != (graph.n_nodes,) or (covered.size and (covered.dtype.kind not in "iu"
                                                                   or covered.min() < 0)):
            raise InputError(f"source_covered of shape {covered.shape}",
                             expected=f"{graph.n_nodes} non-negative integers, one per vertex")
        edge_covered = covered[graph.edge_head].tolist()
    elif isinstance(graph, MosesHypergraph):
        edge_covered = graph.edge_covered.tolist()
    else:
        raise InputError("the hypergraph has no source-covered counts",
                         expected="a hypergraph read from a Moses file, or source_covered (one count per vertex)")
    if isinstance(graph, MosesHypergraph):
        layout = graph.edge_layout.tolist()
    else:
        layout = np.where(np.diff(graph.tmpl_offsets) > 0, LAYOUT_SPACE, 0).tolist()
    names = _moses_names(graph)
    words = _words(graph)
    in_offsets = graph.in_offsets.tolist()
    tails, tail_offsets = graph.tails.tolist(), graph.tail_offsets.tolist()
    tmpl, tmpl_offsets = graph.tmpl.tolist(), graph.tmpl_offsets.tolist()
    feat_ids, feat_values, feat_offsets = graph.feat_ids.tolist(), graph.feat_values.tolist(), graph.feat_offsets.tolist()
    out = [FORMAT_LINE, f"{graph.n_nodes} {n_edges}"]
    for v in range(graph.n_nodes):
        out.append(f"# node {v}")
        out.append(str(in_offsets[v + 1] - in_offsets[v]))
        for e in range(in_offsets[v], in_offsets[v + 1]):
            edge_tails = tails[tail_offsets[e]:tail_offsets[e + 1]]
            items = tmpl[tmpl_offsets[e]:tmpl_offsets[e + 1]]
            slots = sorted(-x - 1 for x in items if x < 0)
            if slots != list(range(len(edge_tails))):
                raise InputError(f"edge {e} into vertex {v} uses its {len(edge_tails)} tails as {slots} in its target",
                                 expected="every tail exactly once in the target (Moses reads tails from it)")
            tokens = [words[x] if x >= 0 else f"[{edge_tails[-x - 1]}]" for x in items]
            flags = layout[e]
            if flags & LAYOUT_BOS:
                tokens.insert(0, BOS)
            if flags & LAYOUT_EOS:
                tokens.append(EOS)
            ids = feat_ids[feat_offsets[e]:feat_offsets[e + 1]]
            if len(set(ids)) != len(ids):
                raise InputError(f"edge {e} into vertex {v} has a feature twice", expected="each feature once per edge")
            features = "".join(f"{names[i]}={_number(x)} "
                               for i, x in zip(ids, feat_values[feat_offsets[e]:feat_offsets[e + 1]]))
            target = " ".join(tokens) + (" " if flags & LAYOUT_SPACE else "")
            out.append(f"{target}{_SEPARATOR}{features}{_SEPARATOR}{edge_covered[e]}")
    out.append("")
    return "\n".join(out)


def write_moses_hypergraph(graph: Hypergraph, path: str | os.PathLike, source_covered=None) -> None:
    """Write ``graph`` as a Moses hypergraph file, atomically (gzip when ``path`` ends in .gz).

    ``source_covered`` (one count per vertex) is needed for hypergraphs that
    were not read from a Moses file; for those, every token of a target is
    followed by a space as Moses writes them, and there are no ``<s>``/``</s>``
    tokens. Dense names must be ``Label_0 .. Label_{n-1}`` per producer;
    anything that would not read back the same (a sparse name that reads as
    dense, a word such as ``[3]``, a tail the target does not use exactly once)
    is an :class:`InputError` and nothing is written.
    """
    text = dumps_moses_hypergraph(graph, source_covered)
    with atomic_write(path) as out:
        out.write(text)


def decoder_forest(result) -> MosesHypergraph:
    """The forest of a sentence minismt decoded (a phrase-based ``DecodeResult`` or a Hiero
    ``HieroResult``) laid out as Moses writes its search graphs
    (``-output-search-graph-hypergraph``, the fixtures' ``m30k/hypergraphs`` and
    ``m30k-hiero/hypergraph``): every dense feature on every edge that has a feature (zeros
    included), ``<s>`` on the edge that starts every derivation and ``</s>`` on the goal's edges;
    source-covered is the head's source words, ``<s>`` and ``</s>`` counted for the chart decoder
    (its nodes' spans), translated words for the phrase-based one (its nodes' coverage); a chart
    edge's target ends with a space, as Moses' chart decoder writes it."""
    graph = result.hypergraph
    n_edges, n_dense = graph.n_edges, graph.space.n_dense
    spans = getattr(result, "node_spans", None)
    if spans is not None:
        covered, spacing = spans[:, 1] - spans[:, 0], LAYOUT_SPACE
    else:
        covered, spacing = result.coverage().sum(axis=1), 0
    layout = np.full(n_edges, LAYOUT_SPACE, dtype=np.uint8)
    starts = (np.diff(graph.tail_offsets) == 0) & (np.diff(graph.tmpl_offsets) == 0)
    layout[starts] = LAYOUT_BOS | spacing
    layout[graph.edge_head == graph.goal] = LAYOUT_EOS | spacing
    # the dense block in full on every edge with a feature, then the edge's sparse features
    counts = np.diff(graph.feat_offsets)
    rows = np.repeat(np.arange(n_edges), counts)
    is_dense = graph.feat_ids < n_dense
    dense = np.zeros((n_edges, n_dense))
    dense[rows[is_dense], graph.feat_ids[is_dense]] = graph.feat_values[is_dense]
    has = counts > 0
    n_sparse = np.bincount(rows[~is_dense], minlength=n_edges)
    offsets = np.zeros(n_edges + 1, dtype=np.int64)
    np.cumsum(np.where(has, n_dense, 0) + n_sparse, out=offsets[1:])
    ids = np.empty(offsets[-1], dtype=np.int64)
    values = np.empty(offsets[-1])
    at = (offsets[:-1][has, None] + np.arange(n_dense)).ravel()
    ids[at] = np.tile(np.arange(n_dense), int(has.sum()))
    values[at] = dense[has].ravel()
    sparse_rows = rows[~is_dense]
    rank = np.arange(sparse_rows.shape[0]) - np.concatenate([[0], np.cumsum(n_sparse)])[sparse_rows]
    at = offsets[sparse_rows] + n_dense + rank
    ids[at] = graph.feat_ids[~is_dense]
    values[at] = graph.feat_values[~is_dense]
    return MosesHypergraph(graph.space, graph.vocab, graph.n_nodes, graph.in_offsets, graph.tail_offsets,
                           graph.tails, offsets, ids, values, graph.tmpl_offsets, graph.tmpl,
                           edge_covered=np.asarray(covered, dtype=np.int64)[graph.edge_head], edge_layout=layout)


def write_decoder_forest(result, directory: str | os.PathLike, index: int) -> None:
    """:func:`decoder_forest` of sentence ``index`` written as ``directory/<index>.gz`` (the files
    ``moses -output-search-graph-hypergraph true gz DIR`` writes and ``kbmira --type hypergraph`` reads)."""
    write_moses_hypergraph(decoder_forest(result), os.path.join(directory, f"{index}.gz"))
