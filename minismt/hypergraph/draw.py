"""Pictures of a hypergraph: a bipartite :mod:`networkx` graph, Graphviz DOT text and a layered
matplotlib drawing.

The first two draw every hyperedge as a small node of its own: arcs go from each
tail node to the edge (labelled with the tail position, 1-based as in cdec rules)
and from the edge to its head. :func:`draw_layered` draws a hyperedge as arrows
from its tails to its head, the nodes in rows by layer (:func:`layered_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph.graph import Hypergraph

if TYPE_CHECKING:
    import networkx as nx


def _node_label(hg: Hypergraph, v: int) -> str:
    cat = hg.node_cat[v] if hg.node_cat is not None else None
    label = f"{v}" if cat is None else f"{v}: {cat}"
    return label + " (goal)" if v == hg.goal else label


def _edge_label(hg: Hypergraph, e: int, scores) -> str:
    label = hg.edge_target(e)
    if scores is not None:
        label += f" / {scores[e]:.4g}"
    return label


def to_networkx(hg: Hypergraph, w=None) -> nx.DiGraph:
    """A bipartite DiGraph with nodes ``("node", v)`` and ``("edge", e)``.

    Node attributes: ``kind`` ("node"/"edge"), ``label``; hypernodes also
    ``cat``, hyperedges ``target`` (cdec notation), ``features`` (dict) and
    ``score`` when weights ``w`` are given (or the hypergraph was reweighted).
    Arcs tail -> edge carry ``position`` (0-based tail index).
    """
    import networkx as nx  # imported here: the decoders import this package and never draw
    scores = None if w is None and hg.scores is None else hg.edge_scores(w)
    graph = nx.DiGraph(goal=("node", hg.goal) if hg.n_nodes else None)
    for v in range(hg.n_nodes):
        graph.add_node(("node", v), kind="node", label=_node_label(hg, v),
                       cat=hg.node_cat[v] if hg.node_cat is not None else None)
    for e in range(hg.n_edges):
        attrs = dict(kind="edge", label=_edge_label(hg, e, scores), target=hg.edge_target(e),
                     features=hg.edge_features(e))
        if scores is not None:
            attrs["score"] = float(scores[e])
        graph.add_node(("edge", e), **attrs)
        for i, t in enumerate(hg.edge_tails(e)):
            graph.add_edge(("node", int(t)), ("edge", e), position=i)
        graph.add_edge(("edge", e), ("node", int(hg.edge_head[e])))
    return graph


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(hg: Hypergraph, w=None, name: str = "hypergraph") -> str:
    """Graphviz DOT text of ``hg``: ellipses for nodes, boxes for hyperedges, bottom-up."""
    scores = None if w is None and hg.scores is None else hg.edge_scores(w)
    lines = [f"digraph {_dot_string(name)} {{", "  rankdir=BT;", "  node [fontsize=10];"]
    for v in range(hg.n_nodes):
        shape = "doubleoctagon" if v == hg.goal else "ellipse"
        lines.append(f"  n{v} [shape={shape}, label={_dot_string(_node_label(hg, v))}];")
    for e in range(hg.n_edges):
        lines.append(f"  e{e} [shape=box, label={_dot_string(_edge_label(hg, e, scores))}];")
        for i, t in enumerate(hg.edge_tails(e)):
            lines.append(f"  n{int(t)} -> e{e} [label=\"{i + 1}\"];")
        lines.append(f"  e{e} -> n{int(hg.edge_head[e])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def node_layers(hg: Hypergraph) -> np.ndarray:
    """The longest-path layer of every node: 0 for a start node, else 1 + its deepest tail's layer."""
    layers = np.zeros(hg.n_nodes, dtype=np.int64)
    for e in range(hg.n_edges):  # edges come grouped by head, in topological order
        tails = hg.edge_tails(e)
        if tails.size:
            head = int(hg.edge_head[e])
            layers[head] = max(layers[head], 1 + int(layers[tails].max()))
    return layers


def arcs(hg: Hypergraph) -> list[tuple[int, int, int]]:
    """``(tail, head, edge)`` for every tail of every edge: the arcs of a drawing."""
    return [(int(t), int(hg.edge_head[e]), e) for e in range(hg.n_edges) for t in hg.edge_tails(e)]


@dataclass
class Layout:
    """A layered drawing: ``nodes`` float[n, 2] (x: column, y: layer); ``routes[i]`` the points that
    ``arcs[i]`` goes through, from its tail to its head, one per layer; ``crossings`` between arcs."""

    nodes: np.ndarray
    arcs: list[tuple[int, int, int]]
    routes: list[np.ndarray]
    crossings: int


def layered_layout(hg: Hypergraph, layers=None, highlight=(), sweeps: int = 8) -> Layout:
    """Node and arc positions for drawing ``hg`` layer by layer (Sugiyama et al., 1981).

    ``layers`` (default :func:`node_layers`) must grow along every arc. An arc that spans
    several layers passes through a virtual point in each layer between, which takes a column
    like a node. The nodes and arcs of the edges in ``highlight`` take column 0; the others are
    ordered by the mean column of their neighbours below, then above, and so on for ``sweeps``
    sweeps, each followed by swaps of neighbours that remove crossings; the order with the fewest
    crossings is kept.
    """
    layers = node_layers(hg) if layers is None else np.asarray(layers, dtype=np.int64)
    arc_list = arcs(hg)
    if any(layers[tail] >= layers[head] for tail, head, _ in arc_list):
        raise InputError("a layer that does not grow from tail to head", expected="layers[tail] < layers[head]")
    highlight = {int(e) for e in highlight}
    level = layers.tolist()  # of every slot: the nodes, then the virtual points
    first = {v for tail, head, e in arc_list if e in highlight for v in (tail, head)}
    chains = []
    for tail, head, e in arc_list:
        chain = [tail]
        for between in range(layers[tail] + 1, layers[head]):
            level.append(between)
            chain.append(len(level) - 1)
            if e in highlight:
                first.add(chain[-1])
        chains.append(chain + [head])
    segments = [pair for chain in chains for pair in zip(chain, chain[1:])]  # each from a layer to the next
    neighbours: list[list[int]] = [[] for _ in level]
    for low, high in segments:
        neighbours[low].append(high)
        neighbours[high].append(low)
    rows = {k: [v for v, lv in enumerate(level) if lv == k] for k in sorted(set(level))}
    column = np.arange(len(level), dtype=np.float64)

    def order(row: int, side: int) -> None:
        def key(v: int):
            near = [column[u] for u in neighbours[v] if side * (level[u] - row) > 0]
            return (v not in first, float(np.mean(near)) if near else column[v], v)

        for k, v in enumerate(sorted(rows[row], key=key)):
            column[v] = k

    def crossings() -> int:
        return sum(1 for i, (a, b) in enumerate(segments) for c, d in segments[i + 1:]
                   if level[a] == level[c] and (column[a] - column[c]) * (column[b] - column[d]) < 0)

    def transpose() -> None:
        """Swap neighbours in a row while that removes crossings."""
        count, improved = crossings(), True
        while improved:
            improved = False
            for members in rows.values():
                members = sorted((v for v in members if v not in first), key=lambda v: column[v])
                for i in range(len(members) - 1):
                    a, b = members[i], members[i + 1]
                    column[a], column[b] = column[b], column[a]
                    fewer = crossings()
                    if fewer < count:
                        count, improved = fewer, True
                        members[i], members[i + 1] = b, a
                    else:
                        column[a], column[b] = column[b], column[a]

    for row in rows:
        order(row, 0)
    best, fewest = column.copy(), crossings()
    for sweep in range(sweeps):
        side = -1 if sweep % 2 == 0 else 1
        for row in (list(rows) if side < 0 else list(rows)[::-1]):
            order(row, side)
        transpose()
        count = crossings()
        if count < fewest:
            best, fewest = column.copy(), count
    x = _straighten(best, rows, neighbours, first, n_real=hg.n_nodes, sweeps=2 * sweeps)
    nodes = np.column_stack([x[:hg.n_nodes], layers]).astype(np.float64)
    routes = [np.column_stack([x[chain], [level[v] for v in chain]]) for chain in chains]
    return Layout(nodes, arc_list, routes, fewest)


def _spread(desired, gaps, lowest: float) -> np.ndarray:
    """The positions closest to ``desired`` (least squares) that keep their order, at least ``gaps[i]``
    between neighbours ``i`` and ``i + 1``, and are >= ``lowest`` (pool adjacent violators)."""
    offset = np.concatenate([[0.0], np.cumsum(gaps)])
    blocks: list[list[float]] = []  # [mean, size] of runs that share one shifted position
    for value in np.asarray(desired, dtype=np.float64) - offset:
        blocks.append([value, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, size = blocks.pop()
            blocks[-1] = [(blocks[-1][0] * blocks[-1][1] + mean * size) / (blocks[-1][1] + size), blocks[-1][1] + size]
    shifted = np.repeat([b[0] for b in blocks], [int(b[1]) for b in blocks])
    return np.maximum(shifted, lowest) + offset


def _straighten(column, rows, neighbours, first, n_real: int, sweeps: int) -> np.ndarray:
    """x of every slot: in the order of ``column``, each row moves towards its neighbours' mean x,
    one apart (half for a virtual point); the slots in ``first`` stay in the first columns."""
    x = column.astype(np.float64).copy()
    ordered = {row: sorted(members, key=lambda v: column[v]) for row, members in rows.items()}
    for sweep in range(sweeps):
        for row in (list(rows) if sweep % 2 == 0 else list(rows)[::-1]):
            pinned = [v for v in ordered[row] if v in first]
            rest = [v for v in ordered[row] if v not in first]
            x[pinned] = np.arange(len(pinned))
            if rest:
                desired = [np.mean([x[u] for u in neighbours[v]]) if neighbours[v] else x[v] for v in rest]
                gaps = [1.0 if a < n_real and b < n_real else 0.5 for a, b in zip(rest, rest[1:])]
                x[rest] = _spread(desired, gaps, len(pinned) if pinned else -np.inf)
    return x - x.min()


def _curve(route: np.ndarray, samples: int = 16) -> np.ndarray:
    """Points of a smooth curve through ``route`` (cubic Bezier pieces, Catmull-Rom tangents) that
    leaves its first point and enters its last one vertically."""
    tangents = np.zeros_like(route)
    tangents[[0, -1], 1] = 1.5 * np.sign(route[-1, 1] - route[0, 1])
    tangents[1:-1] = (route[2:] - route[:-2]) / 2
    t = np.linspace(0.0, 1.0, samples)[1:, None]
    pieces = [route[:1]]
    for k in range(len(route) - 1):
        a, b = route[k], route[k + 1]
        controls = (a, a + tangents[k] / 3, b - tangents[k + 1] / 3, b)
        weights = ((1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t ** 2 * (1 - t), t ** 3)
        pieces.append(sum(c * w for c, w in zip(controls, weights)))
    return np.concatenate(pieces)


def _inside(points: np.ndarray, box) -> np.ndarray:
    return (points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)


def _clip(points: np.ndarray, start, end) -> np.ndarray:
    """The part of a curve (points) between where it leaves the box ``start`` and enters the box ``end``."""
    out = np.flatnonzero(~_inside(points, start))
    into = np.flatnonzero(_inside(points, end))
    first = out[0] if out.size else 0
    last = into[0] - 1 if into.size and into[0] > first else len(points) - 1
    return points[max(first - 1, 0):last + 2] if last + 1 < len(points) else points[max(first - 1, 0):]


def _overlap(a, b) -> float:
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))


def draw_layered(hg: Hypergraph, ax, node_labels, layers=None, edge_labels=None, highlight=(),
                 fontsize: float = 7.0, color: str = "tab:red") -> Layout:
    """Draw ``hg`` bottom-up on the matplotlib axes ``ax`` (:func:`layered_layout`), nodes as boxes.

    An edge is a curved arrow from each of its tails to its head; edges without tails (axioms)
    are not drawn. ``edge_labels[e]`` (if given and not empty) goes on the edge's first arrow,
    where it covers no box and no other label if it can: the axes should have their final size,
    the labels are measured. The edges in ``highlight`` and their nodes are drawn in ``color``.
    """
    # matplotlib here, not at the top: minismt.hypergraph (so every tuner) imports this module, and
    # matplotlib would add 0.11 s to it
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path
    from matplotlib.transforms import Bbox
    layout = layered_layout(hg, layers, highlight)
    highlight = {int(e) for e in highlight}
    marked = {v for tail, head, e in layout.arcs if e in highlight for v in (tail, head)}
    reach = np.concatenate([layout.nodes] + layout.routes)
    ax.set_xlim(reach[:, 0].min() - 0.6, reach[:, 0].max() + 0.6)
    ax.set_ylim(reach[:, 1].min() - 0.5, reach[:, 1].max() + 0.5)
    ax.set_axis_off()
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()

    def extent(text):
        text.update_bbox_position_size(renderer)
        return Bbox(to_data.transform(text.get_bbox_patch().get_window_extent(renderer).get_points()))

    boxes = []
    for v, (x, y) in enumerate(layout.nodes):
        on = v in marked
        boxes.append(extent(ax.text(x, y, node_labels[v], ha="center", va="center", fontsize=fontsize, zorder=3,
                                    bbox=dict(boxstyle="round,pad=0.3", lw=1.2 if on else 0.6,
                                              fc="#fde0dd" if on else "white", ec=color if on else "#666666"))))
    placed = list(boxes)
    order = sorted(range(len(layout.arcs)), key=lambda i: layout.arcs[i][2] not in highlight)
    for i in order:
        tail, head, e = layout.arcs[i]
        on = e in highlight
        points = _clip(_curve(layout.routes[i]), boxes[tail], boxes[head])
        ax.add_patch(FancyArrowPatch(path=Path(points), arrowstyle="-|>", mutation_scale=7, zorder=2.5 if on else 2,
                                     color=color if on else "#8c8c8c", lw=1.4 if on else 0.7))
        label = edge_labels[e] if edge_labels is not None else ""
        if not label or tail != int(hg.edge_tails(e)[0]):
            continue
        text = ax.text(0, 0, label, ha="center", va="center", fontsize=fontsize - 1, style="italic",
                       color="#a50f15" if on else "#333333", zorder=5,
                       bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
        size = extent(text).size
        middle = layout.routes[i][0, 1] + 0.5
        candidates = sorted(points[1:-1] if len(points) > 2 else points, key=lambda p: abs(p[1] - middle))

        def covered(point):
            box = Bbox.from_bounds(point[0] - size[0] / 2, point[1] - size[1] / 2, *size)
            return sum(_overlap(box, other) for other in placed), box

        found = next((c for c in candidates if covered(c)[0] == 0.0), None)
        if found is None:
            found = min(candidates, key=lambda c: covered(c)[0])
        text.set_position(found)
        placed.append(covered(found)[1])
    return layout
