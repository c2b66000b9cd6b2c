"""The code blocks of the README and of the manual pages it links (docs/manual/*.md) run as written.

Every ```python block is executed in a temporary folder (``../shared`` in it is the
shared fixtures folder next to the repository; the block is skipped, with that reason,
when the folder is absent). Every ```toml block is a pipeline configuration that
``minismt pipeline --check`` accepts. Every ``minismt ...`` command of a ```sh block parses
with minismt's own argument parser, so a renamed subcommand or flag breaks this test; so
do the ``minismt-kbmira`` flags given to mert-moses.pl with ``--batch-mira-args``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from conftest import SHARED

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCUMENTS = [README, *sorted((REPO / "docs" / "manual").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def located_blocks(kind: str) -> list[tuple[str, int, str]]:
    """(document, line number of the fence, text) of every fenced block of this kind in the documents."""
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        found += [(str(document.relative_to(REPO)), text.count("\n", 0, m.start()) + 1, m.group(2))
                  for m in FENCE.finditer(text) if m.group(1) == kind]
    return found


def blocks(kind: str) -> list[tuple[str, str]]:
    """("document:line", text) of every fenced block of this kind."""
    return [(f"{name}:{line}", text) for name, line, text in located_blocks(kind)]


def with_shared(code: str) -> str:
    """``code`` with ``../shared`` pointing at the shared folder; skips when it is absent."""
    if "../shared" not in code:
        return code
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the README's example reads the fixtures in ../shared "
                    "next to the repository")
    return code.replace("../shared", SHARED.as_posix())


def test_the_documents_have_each_kind_of_block():
    assert len(DOCUMENTS) > 1 and blocks("python") and blocks("sh") and blocks("toml")
    assert all(page.name in README.read_text(encoding="utf-8") for page in DOCUMENTS[1:]), "a page the README does not link"
    # an indented (unfenced) code block would escape these tests
    for document in DOCUMENTS:
        inside = False
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                inside = not inside
            assert inside or not line.startswith("    "), f"{document.name}:{number}: indented code block, fence it"


def _where(value) -> str:
    return value if isinstance(value, str) and ":" in value and "\n" not in value else ""


@pytest.mark.parametrize("where, code", blocks("python"), ids=_where)
def test_python_block_runs(where, code, tmp_path, monkeypatch):
    code = with_shared(code)
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, where, "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize("where, text", blocks("toml"), ids=_where)
def test_toml_block_is_a_valid_pipeline_configuration(where, text, tmp_path, capsys):
    from minismt.cli import main
    # relative paths in a configuration are read from its folder: put it next to the repository
    config = tmp_path / "experiment.toml"
    config.write_text(with_shared(text), encoding="utf-8")
    assert main(["pipeline", str(config), "--check"]) == 0, capsys.readouterr().err


# ---- shell commands ------------------------------------------------------------------------------------
def shell_commands() -> list[tuple[str, str]]:
    """("document:line", command line) of every command of the ```sh blocks, continuations joined."""
    commands = []
    for name, start, text in located_blocks("sh"):
        joined, first = "", None
        for offset, line in enumerate(text.splitlines(), 1):
            first = first or start + offset
            if line.endswith("\\"):
                joined += line[:-1] + " "
                continue
            commands.append((f"{name}:{first}", joined + line))
            joined, first = "", None
    return commands


def simple_commands(line: str) -> list[list[str]]:
    """The words of each simple command of a shell line: split at the operators &&, ||, ; and |
    standing as words (a `|` inside a word is a usage line's alternatives), redirections dropped."""
    result, words, skip = [], [], False
    for token in shlex.split(line, comments=True):
        if skip:
            skip = False
        elif token in (">", ">>", "<", "2>"):
            skip = True
        elif token in ("&&", "||", ";", "|"):
            result.append(words)
            words = []
        else:
            words.append(token)
    result.append(words)
    return [w for w in result if w]


def usage_variants(words: list[str]) -> list[list[str]]:
    """Concrete argument lists from a usage line: [optional] brackets dropped, `...` dropped,
    `a|b|c` alternatives expanded one at a time (the others take their first alternative)."""
    words = [w.strip("[]") for w in words]
    words = [w for w in words if w and w != "..."]
    alternatives = {i: w.split("|") for i, w in enumerate(words) if "|" in w and not w.startswith("-")}
    base = [alternatives[i][0] if i in alternatives else w for i, w in enumerate(words)]
    variants = [base]
    for i, options in alternatives.items():
        for option in options[1:]:
            variants.append(base[:i] + [option] + base[i + 1:])
    return variants


def exact(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` and its subcommands' parsers without abbreviations: a README flag that is only a
    prefix of a real one (the flag was renamed to something longer) must not parse."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                exact(sub)
    return parser


def parse(parser: argparse.ArgumentParser, args: list[str], where: str) -> argparse.Namespace:
    parser = exact(parser)
    error = io.StringIO()
    try:
        with contextlib.redirect_stderr(error):
            return parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{where}: {shlex.join(args)}: {error.getvalue().strip()}")
    except Exception as err:  # minismt-kbmira's parser raises InputError
        pytest.fail(f"{where}: {shlex.join(args)}: {err}")


def minismt_commands() -> list[tuple[str, str]]:
    return [(n, c) for n, c in shell_commands() if any(w and w[0] == "minismt" for w in simple_commands(c))]


def test_the_documents_show_every_subcommand():
    from minismt.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    shown = {words[1] for _, line in shell_commands() for words in simple_commands(line)
             if words[0] == "minismt" and len(words) > 1}
    assert set(sub.choices) <= shown | {"corpora"}, set(sub.choices) - shown


@pytest.mark.parametrize("where, command", minismt_commands(), ids=_where)
def test_minismt_command_parses(where, command):
    from minismt.cli import build_parser
    for words in simple_commands(command):
        if words[0] != "minismt":
            continue
        for args in usage_variants(words[1:]):
            namespace = parse(build_parser(), args, where)
            assert hasattr(namespace, "run"), f"{where}: {command}: not a full command"


def test_kbmira_flags_given_to_mert_moses_parse():
    from plugins.moses.kbmira_cli import build_parser
    found = 0
    for where, command in shell_commands():
        for words in simple_commands(command):
            if "--batch-mira-args" in words:
                args = shlex.split(words[words.index("--batch-mira-args") + 1])
                parse(build_parser(), args, where)
                found += 1
    assert found


# ---- the documentation site's commands ------------------------------------------------------------------
DOCS = REPO / "docs"
RST_SH_BLOCK = re.compile(r"^\.\. code-block:: sh\n\n((?:   .*\n|\n)+)", re.M)


def docs_minismt_commands() -> list[tuple[str, str]]:
    """(page:line, command line) of every ``minismt`` command in the site's ``.. code-block:: sh`` blocks."""
    commands = []
    for page in sorted(DOCS.glob("**/*.rst")):
        if {"_build", "generated"} & set(page.relative_to(DOCS).parts):
            continue
        text = page.read_text(encoding="utf-8")
        for block in RST_SH_BLOCK.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            for offset, line in enumerate(block.group(1).splitlines()):
                if any(w and w[0] == "minismt" for w in simple_commands(line.strip())):
                    commands.append((f"{page.relative_to(REPO)}:{first + offset}", line.strip()))
    return commands


def test_the_site_has_commands():
    assert len(docs_minismt_commands()) >= 5


@pytest.mark.parametrize("where, command", docs_minismt_commands(), ids=lambda v: v if ":" in v else "")
def test_site_minismt_command_parses(where, command):
    from minismt.cli import build_parser
    for words in simple_commands(command):
        if words[0] == "minismt":
            namespace = parse(build_parser(), words[1:], where)
            assert hasattr(namespace, "run"), f"{where}: {command}: not a full command"
