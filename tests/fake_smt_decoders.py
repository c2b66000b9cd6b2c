"""Fake Moses and cdec programs for the decoder-driver tests.

``python fake_smt_decoders.py moses --pool NBEST --src SRC [--hypergraphs DIR] <Moses flags>``
takes the flags the Moses driver passes (``-config``, ``-weight-overwrite``,
``-weight-file``, ``-n-best-list FILE K distinct``,
``-output-search-graph-hypergraph true txt DIR``, ``-input-file``), rescores a
real Moses n-best list (the pool; each input line is found in SRC) with the
weights it was given and prints the K best as Moses would, and the 1-best on
stdout; in hypergraph mode it copies the real Moses hypergraphs of the input
sentences. ``... cdec --pool KBEST [--pool KBEST] --src SRC [--forests DIR] -c INI -w
WEIGHTS -i INPUT [-k K -r] [-O DIR]`` does the same with cdec k-best lists and JSON forests. Given both,
each writes the k-best lists and the forests from one run, as the real programs do.

``... moses ... -config INI -show-weights`` prints the weights as Moses does: ``Name UNTUNEABLE`` for a
producer whose ``[feature]`` line says ``tuneable=false`` (and UnknownWordPenalty, untuneable by
default), ``UNTUNEABLECOMPONENT`` for the zeros of ``tuneable-components``.

Failures for the tests: the environment variable ``FAKE_FAIL=mode:N`` makes
the N-th run (counted in the file ``FAKE_COUNTER``) fail: ``exit`` (status 1
and a message on stderr), ``truncate`` (the list stops halfway, status 0) or
``kill`` (SIGKILL after writing half the list). ``FAKE_HIDE=NAME`` scores with feature NAME but leaves it
out of the lists, as Moses does with UnknownWordPenalty0.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import sys


def _pool_moses(path: str) -> list[list[tuple[str, str]]]:
    """Per sentence: (text, feature field) of every line of a Moses n-best list."""
    pool: list[list[tuple[str, str]]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            sid, text, features, _ = line.rstrip("\n").split(" ||| ")[:4]
            while len(pool) <= int(sid):
                pool.append([])
            pool[int(sid)].append((text, features))
    return pool


def _moses_values(field: str) -> dict[str, float]:
    """``{Label_i: value}`` of a Moses feature field or a -weight-overwrite string."""
    values: dict[str, float] = {}
    label, index = None, 0
    for token in field.split():
        if token.endswith("="):
            label, index = token[:-1], 0
        else:
            values[f"{label}_{index}"] = float(token)
            index += 1
    return values


def _pool_cdec(paths: list[str]) -> list[list[tuple[str, dict[str, float]]]]:
    """Per sentence: distinct (text, features) of cdec k-best lists."""
    pool: list[list[tuple[str, dict[str, float]]]] = []
    seen: set[tuple[int, str]] = set()
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                sid, text, features, _ = line.rstrip("\n").split(" ||| ")
                if (int(sid), text) in seen:
                    continue
                seen.add((int(sid), text))
                while len(pool) <= int(sid):
                    pool.append([])
                pool[int(sid)].append((text, {k: float(v) for k, v in
                                              (item.rsplit("=", 1) for item in features.split())}))
    return pool


def _failure() -> str | None:
    """The failure mode if this run is the one ``FAKE_FAIL`` names."""
    spec = os.environ.get("FAKE_FAIL")
    counter = os.environ.get("FAKE_COUNTER")
    if not spec or not counter:
        return None
    calls = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    with open(counter, "w") as out:
        out.write(str(calls))
    mode, at = spec.split(":")
    return mode if calls == int(at) else None


def _option(argv: list[str], flag: str, count: int = 1, repeat: bool = False):
    """The value(s) after ``flag`` (None if absent); ``repeat`` collects every occurrence."""
    found = [argv[i + 1:i + 1 + count] for i, item in enumerate(argv) if item == flag]
    if repeat:
        return [values[0] for values in found]
    if not found:
        return None
    return found[-1][0] if count == 1 else found[-1]


def _show_weights(config: str) -> None:
    """Print a moses.ini's weights as ``moses -show-weights`` does."""
    section, counts, untuneable, components = None, {}, set(), {}
    for line in open(config, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            section = line
        elif line and section == "[feature]":
            kind, *options = line.split()
            settings = dict(option.split("=", 1) for option in options)
            name = settings.get("name", f"{kind}{counts.get(kind, 0)}")
            counts[kind] = counts.get(kind, 0) + 1
            if settings.get("tuneable", "true" if kind != "UnknownWordPenalty" else "false") == "false":
                untuneable.add(name)
            if "tuneable-components" in settings:
                components[name] = settings["tuneable-components"].split(",")
        elif line and section == "[weight]":
            name, *values = line.split()
            name = name[:-1]
            if name in untuneable:
                print(f"{name} UNTUNEABLE")
            else:
                shown = [v if components.get(name, ["1"] * len(values))[i] == "1" else "UNTUNEABLECOMPONENT"
                         for i, v in enumerate(values)]
                print(f"{name}= " + " ".join(shown))


def main(argv: list[str]) -> int:
    kind, argv = argv[0], argv[1:]
    if kind == "moses" and "-show-weights" in argv:
        _show_weights(_option(argv, "-config"))
        return 0
    failure = _failure()
    if failure == "exit":
        print("Exception: the phrase table cannot be loaded (fake failure)", file=sys.stderr)
        return 1
    sources = open(_option(argv, "--src"), encoding="utf-8").read().splitlines()
    index = {text: i for i, text in enumerate(sources)}
    input_path = _option(argv, "-input-file" if kind == "moses" else "-i")
    sentences = []
    for number, text in enumerate(open(input_path, encoding="utf-8").read().splitlines()):
        if text not in index:
            print(f"line {number + 1}: a sentence this fake decoder has no translations for", file=sys.stderr)
            return 2
        sentences.append(index[text])
    if kind == "moses":
        weights = _moses_values(_option(argv, "-weight-overwrite"))
        sparse_path = _option(argv, "-weight-file")
        if sparse_path:
            for line in open(sparse_path, encoding="utf-8"):
                name, value = line.split()
                weights[name] = float(value)
        pool = [[(text, field, _moses_values(field)) for text, field in sentence]
                for sentence in _pool_moses(_option(argv, "--pool"))]
    else:
        weights = {}
        for line in open(_option(argv, "-w"), encoding="utf-8"):
            if line.strip() and not line.startswith("#"):
                name, value = line.split()
                weights[name] = float(value)
        pool = [[(text, None, features) for text, features in sentence]
                for sentence in _pool_cdec(_option(argv, "--pool", repeat=True))]
    lines, best = [], []
    k = int((_option(argv, "-n-best-list", 3) or [None, "100"])[1]) if kind == "moses" else \
        int(_option(argv, "-k") or 1)
    for local, sentence in enumerate(sentences):
        scored = sorted(((sum(weights.get(n, 0.0) * v for n, v in features.items()), j)
                         for j, (_, _, features) in enumerate(pool[sentence])), key=lambda x: (-x[0], x[1]))
        best.append(pool[sentence][scored[0][1]][0])
        hidden = os.environ.get("FAKE_HIDE")
        for score, j in scored[:k]:
            text, field, features = pool[sentence][j]
            if kind == "moses":
                if hidden:
                    field = re.sub(rf"(^| ){re.escape(hidden)}= \S+", "", field).strip()
                lines.append(f"{local} ||| {text} ||| {field} ||| {score!r}")
            else:
                items = " ".join(f"{n}={v!r}" for n, v in features.items() if n != hidden)
                lines.append(f"{local} ||| {text} ||| {items} ||| {score!r}")
    if failure in ("truncate", "kill"):
        lines = lines[: len(lines) // 2]
    hypergraph_dir = _option(argv, "-output-search-graph-hypergraph", 3) if kind == "moses" else \
        [None, None, _option(argv, "-O")]
    if hypergraph_dir and hypergraph_dir[2]:
        source_dir = _option(argv, "--hypergraphs" if kind == "moses" else "--forests")
        for local, sentence in enumerate(sentences):
            if kind == "moses" and hypergraph_dir[1] == "gz":
                shutil.copy(os.path.join(source_dir, f"{sentence}.gz"), os.path.join(hypergraph_dir[2], f"{local}.gz"))
            elif kind == "moses":
                with gzip.open(os.path.join(source_dir, f"{sentence}.gz"), "rb") as graph, \
                        open(os.path.join(hypergraph_dir[2], str(local)), "wb") as out:
                    shutil.copyfileobj(graph, out)
            else:
                shutil.copy(os.path.join(source_dir, f"{sentence}.json"),
                            os.path.join(hypergraph_dir[2], f"{local}.json"))
    with_kbest = _option(argv, "-n-best-list", 3) if kind == "moses" else _option(argv, "-k")
    if hypergraph_dir and hypergraph_dir[2] and not with_kbest:
        print("\n".join(best))
    elif kind == "moses":
        with open(_option(argv, "-n-best-list", 3)[0], "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            if failure == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        print("\n".join(best))
    else:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
        if failure == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
