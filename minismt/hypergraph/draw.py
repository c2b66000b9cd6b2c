"""Pictures of a hypergraph: a bipartite :mod:`networkx` graph and Graphviz DOT text.

Both draw every hyperedge as a small node of its own: arcs go from each tail
node to the edge (labelled with the tail position, 1-based as in cdec rules)
and from the edge to its head.
"""

from __future__ import annotations

import networkx as nx

from minismt.hypergraph.graph import Hypergraph


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
