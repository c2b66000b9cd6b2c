"""Hierarchical grammar files (minismt.extract.grammar): Moses rule tables and cdec grammars:
real files round-trip byte for byte, hand-written rules, conversions, malformed input, fuzzing,
and a decode of a written grammar by the real cdec."""

from __future__ import annotations

import gzip
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from fuzz_lines import mutations
from minismt.errors import InputError
from minismt.extract.grammar import (NT, GrammarRule, format_cdec_rule, format_moses_rule,
                                     iter_cdec_rules, iter_moses_rules, parse_cdec_rule,
                                     parse_moses_rule, read_cdec_rules, read_moses_rules,
                                     write_cdec_rules, write_moses_rules)

MOSES_FILES = ["rule-table.head2000.txt", "glue-grammar"]


def moses(name: str):
    return shared_path("fixtures", "moses", "m30k-hiero", name)


def cdec(name: str):
    return shared_path("fixtures", "cdec", "decode_nc", name)


def write(path, data: bytes):
    path.write_bytes(data)
    return path


# ---- real files ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", MOSES_FILES)
def test_moses_files_round_trip_byte_for_byte(tmp_path, name):
    rules = list(iter_moses_rules(moses(name)))
    assert write_moses_rules(tmp_path / name, rules) == len(rules)
    assert (tmp_path / name).read_bytes() == moses(name).read_bytes()
    gz = write(tmp_path / "in.gz", gzip.compress(moses(name).read_bytes(), mtime=0))
    assert read_moses_rules(gz) == rules
    write_moses_rules(tmp_path / "out.gz", rules)
    assert gzip.decompress((tmp_path / "out.gz").read_bytes()) == moses(name).read_bytes()


def test_moses_rule_table_contents():
    rules = read_moses_rules(moses("rule-table.head2000.txt"))
    assert len(rules) == 2000
    assert [sum(r.arity == k for r in rules) for k in range(3)] == [
        sum(line.count("][") // 2 == k for line in moses("rule-table.head2000.txt").read_text().splitlines())
        for k in range(3)]
    first = rules[0]
    assert (first.lhs, first.source, first.target) == ("X", ("!",), ("!",))
    assert first.scores.tolist() == [0.619048, 0.6, 0.866667, 0.882353]
    assert first.alignment == ((0, 0),) and first.counts == (21, 15, 13)
    assert first.sparse == "" and first.properties == "" and first.source_lhs is None
    # the swapping rule the README quotes: source NT 2 -> target NT 3, source NT 4 -> target NT 2
    swap = next(r for r in rules if r.source[:2] == ('"', "gedruckt") and r.target[1] == "printed"
                and len(r.source) == 5)
    assert swap.source == ('"', "gedruckt", NT("X", 1), "präsentation", NT("X", 2))
    assert swap.target == ('"', "printed", NT("X", 2), NT("X", 1), "presentation")
    assert swap.alignment == ((0, 0), (1, 1), (3, 4))
    assert format_moses_rule(swap).split(" ||| ")[3] == "0-0 1-1 2-3 3-4 4-2"


def test_glue_grammar_contents():
    start, end, glue = read_moses_rules(moses("glue-grammar"))
    assert (start.lhs, start.source_lhs, start.source, start.target) == ("S", "X", ("<s>",), ("<s>",))
    assert end.source == (NT("X", 1), "</s>") and end.target == (NT("S", 1), "</s>")
    assert glue.source == (NT("X", 1), NT("X", 2)) and glue.target == (NT("S", 1), NT("X", 2))
    assert glue.scores.tolist() == [2.718] and glue.counts == (0,) and glue.alignment == ()


def test_cdec_grammar_round_trips_byte_for_byte(tmp_path):
    rules = list(iter_cdec_rules(cdec("grammar.dev")))
    assert len(rules) == 3103
    write_cdec_rules(tmp_path / "g", rules)
    assert (tmp_path / "g").read_bytes() == cdec("grammar.dev").read_bytes()
    write_cdec_rules(tmp_path / "g.gz", rules)
    assert read_cdec_rules(tmp_path / "g.gz") == rules
    assert gzip.decompress((tmp_path / "g.gz").read_bytes()) == cdec("grammar.dev").read_bytes()


def test_cdec_grammar_contents():
    rules = read_cdec_rules(cdec("grammar.dev"))
    assert all(r.lhs == "X" and len(r.scores) == 7 and not r.features for r in rules)
    assert sum(r.arity > 0 for r in rules) == 2636
    assert rules[0].cdec_features()["PhraseModel_2"] == 1.39794003963
    rule = next(r for r in rules if r.source == ("amerika", NT("X", 1), "."))
    assert rule.target == ("american", NT("X", 1), ".") and rule.alignment == ((0, 0), (2, 2))
    # cdec's extractor does not sort alignment points: the order is kept
    assert any(r.alignment == ((0, 3), (0, 0)) for r in rules)


# ---- hand-written rules -------------------------------------------------------------------


def test_cdec_two_nonterminals_both_orders():
    straight = parse_cdec_rule("[X] ||| a [X,1] b [X,2] ||| c [X,1] d [X,2] ||| A=1 B=-0.5 ||| 0-0 2-2")
    swapped = parse_cdec_rule("[X] ||| a [X,1] b [X,2] ||| [X,2] c [X,1] ||| A=1 ||| 0-1 2-1")
    assert straight.target == ("c", NT("X", 1), "d", NT("X", 2))
    assert swapped.target == (NT("X", 2), "c", NT("X", 1))
    assert straight.features == {"A": 1.0, "B": -0.5} and swapped.alignment == ((0, 1), (2, 1))
    bare = parse_cdec_rule("[S] ||| [S,1] [X,2] ||| [2] [1] ||| Glue=1")
    assert bare.target == (NT(None, 2), NT(None, 1)) and bare.lhs == "S"
    for text in ["[X] ||| a [X,1] b [X,2] ||| [X,2] c [X,1] ||| A=1 ||| 0-1 2-1",
                 "[S] ||| [S,1] [X,2] ||| [2] [1] ||| Glue=1",
                 "[X] ||| a [X,1] ||| [X,1] ||| 0.5 1e-05 -3",
                 "[X] ||| a ||| ||| 0.5",  # empty target: legal (a deletion)
                 "[X] ||| a [X,0] [X] ||| b [X,10] ||| 1",  # not non-terminals for cdec: terminals
                 "[X] ||| a ||| b"]:
        rule = parse_cdec_rule(text)
        assert format_cdec_rule(rule) == text
    assert parse_cdec_rule("[X] ||| a ||| ||| 0.5").target == ()
    assert parse_cdec_rule("[X] ||| a [X,0] [X] ||| b [X,10] ||| 1").arity == 0


def test_moses_two_nonterminals_both_orders_and_empty_target():
    text = "a [X][X] b [X][X] [X] ||| [X][X] c [X][X] [X] ||| 0.5 0.25 ||| 0-1 1-2 3-0 ||| 2 4 1 ||| |||"
    rule = parse_moses_rule(text)
    assert rule.source == ("a", NT("X", 1), "b", NT("X", 2))
    assert rule.target == (NT("X", 2), "c", NT("X", 1))
    assert rule.alignment == ((0, 1),) and rule.counts == (2, 4, 1)
    assert format_moses_rule(rule) == text
    for text in ["a [X] ||| [X] ||| 0.5 ||| ||| 1 1 1 ||| |||",  # empty target: a deletion rule
                 "a b [X] ||| c [X] ||| 1 2 ||| 1-0",
                 "a [X] ||| b [S] ||| 1",
                 "a [X] ||| b [X] ||| 1 ||| 0-0 ||| 1 ||| sp 1 ||| {{Tree [X b]}}"]:
        assert format_moses_rule(parse_moses_rule(text)) == text
    assert parse_moses_rule("a [X] ||| [X] ||| 0.5 ||| ||| 1 1 1 ||| |||").target == ()


def test_numbers_keep_their_text_until_changed():
    rule = parse_cdec_rule("[X] ||| a ||| b ||| 0.10 1.0 3e-05")
    assert format_cdec_rule(rule) == "[X] ||| a ||| b ||| 0.10 1.0 3e-05"
    rule.scores[0] = 0.2
    rule.scores[2] = 0.123456789
    assert format_cdec_rule(rule) == "[X] ||| a ||| b ||| 0.2 1.0 0.123456789"
    assert format_cdec_rule(rule, names=["p", "q", "r"]) == "[X] ||| a ||| b ||| p=0.2 q=1 r=0.123456789"


# ---- conversions --------------------------------------------------------------------------


def _without_moses_parts(rule: GrammarRule) -> GrammarRule:
    return GrammarRule(rule.lhs, rule.source, rule.target, rule.scores, rule.features, rule.alignment)


@pytest.mark.parametrize("name", MOSES_FILES)
def test_moses_rules_written_as_cdec_read_back_the_same(name):
    for rule in read_moses_rules(moses(name)):
        back = parse_cdec_rule(format_cdec_rule(rule))
        assert back == _without_moses_parts(rule)
        assert back.cdec_features() == {f"PhraseModel_{k}": v for k, v in enumerate(rule.scores)}
        again = parse_moses_rule(format_moses_rule(back))
        assert again == GrammarRule(rule.lhs, rule.source, rule.target, rule.scores,
                                    alignment=rule.alignment, source_lhs=None)


def test_conversion_of_a_swapping_rule():
    rule = parse_moses_rule("a [X][X] b [X][Y] [X] ||| [X][Y] c [X][X] [S] ||| 0.5 ||| 0-1 1-2 3-0 ||| 1 1 1")
    assert format_cdec_rule(rule) == "[S] ||| a [X,1] b [X,2] ||| [Y,2] c [X,1] ||| 0.5 ||| 0-1"
    cdec_rule = parse_cdec_rule("[X] ||| a [X,1] b [X,2] ||| [2] c [1] ||| 0.5")
    assert format_moses_rule(cdec_rule) == "a [X][X] b [X][X] [X] ||| [X][X] c [X][X] [X] ||| 0.5 ||| 1-2 3-0"


def test_cdec_rules_written_as_moses_read_back_the_same():
    for rule in read_cdec_rules(cdec("grammar.dev")):
        back = parse_moses_rule(format_moses_rule(rule))
        assert back.source == rule.source and back.lhs == rule.lhs
        assert back.target == rule.target  # grammar.dev writes [X,k] on the target side
        assert back.scores.tolist() == rule.scores.tolist()
        assert back.alignment == tuple(sorted(rule.alignment))


# ---- malformed input ----------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("", "blank line"),
    ("a [X] ||| b [X]", "2 fields"),
    ("a [X] ||| b [X] ||| 1 ||| ||| ||| ||| ||| x", "8 fields"),
    ("a ||| b [X] ||| 1", "source left-hand side 'a'"),
    ("[X] ||| b [X] ||| 1", "empty source side"),
    ("a [X] ||| b [X] ||| x", "'x' is not a number"),
    ("a [X] ||| b [X] ||| nan", "not finite"),
    ("a [X] [X] ||| b [X] ||| 1", "non-terminal '[X]'"),
    ("a [X][X] [X] ||| b [X][X] [X] ||| 1 ||| 0-1", "links a terminal to a non-terminal"),
    ("a [X][X] [X] ||| b [X][X] [X] ||| 1 ||| 1-0 ||| 1", "links a terminal to a non-terminal"),
    ("a [X][X] [X] ||| b [X][X] [X] ||| 1", "source non-terminal at 1 is not linked"),
    ("a [X][X] [X] ||| [X][Y] [X] ||| 1 ||| 1-0", "differ"),
    ("a [X][X] [X] ||| [X][X] [X] ||| 1 ||| 1-0 1-0", "given twice"),
    ("a [X] ||| b [X] ||| 1 ||| 0-5", "outside the rule"),
    ("a [X] ||| b [X] ||| 1 ||| 0:0", "alignment point '0:0'"),
    ("a [X] ||| b [X] ||| 1 ||| 0-0 ||| x", "'x' is not a number"),
])
def test_malformed_moses_rules(tmp_path, text, message):
    path = write(tmp_path / "rt", ("a [X] ||| b [X] ||| 1\n" + text + "\n").encode())
    with pytest.raises(InputError, match=re.escape(message)) as err:
        read_moses_rules(path)
    assert err.value.path == str(path) and err.value.line == 2


@pytest.mark.parametrize("text, message", [
    ("[X] ||| a", "2 fields"),
    ("X ||| a ||| b", "left-hand side 'X'"),
    ("[X] [Y] ||| a ||| b", "left-hand side"),
    ("[X] ||| ||| b", "empty source side"),
    ("[X] ||| [X,2] a [X,1] ||| [1] [2]", "is number 1"),
    ("[X] ||| a [X,1] ||| b", "target non-terminal indices []"),
    ("[X] ||| a [X,1] ||| [1] [1]", "indices [1, 1]"),
    ("[X] ||| a ||| b [1]", "indices [1] for 0"),
    ("[X] ||| a ||| b ||| A=1 2", "mixed"),
    ("[X] ||| a ||| b ||| A=1 A=2", "given twice"),
    ("[X] ||| a ||| b ||| =1", "has no name"),
    ("[X] ||| a ||| b ||| A=x", "'x' is not a number"),
    ("[X] ||| a ||| b ||| 1 2 3 4 5 6 7 8 9 10 11", "11 unnamed scores"),
    ("[X] ||| a [X,1] ||| b [X,1] ||| 1 ||| 1-1", "links a non-terminal"),
    ("[X] ||| a ||| b ||| 1 ||| 1-0", "outside the rule"),
    ("[X] ||| a ||| b ||| 1 ||| 0-0 ||| x", "6 fields"),
])
def test_malformed_cdec_rules(tmp_path, text, message):
    path = write(tmp_path / "g", ("[X] ||| a ||| b ||| 1\n" + text + "\n").encode())
    with pytest.raises(InputError, match=re.escape(message)) as err:
        read_cdec_rules(path)
    assert err.value.path == str(path) and err.value.line == 2


def test_unwritable_rules_leave_no_file(tmp_path):
    bad = [GrammarRule("X", ("a b",), ("c",)),
           GrammarRule("X", ("[Y,1]",), ("c",)),
           GrammarRule("X", (NT("X", 2),), (NT("X", 2),)),
           GrammarRule("X[", ("a",), ("c",)),
           GrammarRule("X", ("a",), ("c",), features={"A": 1.0}, scores=[1.0])]
    for rule in bad:
        with pytest.raises(InputError, match="rule 2"):
            write_cdec_rules(tmp_path / "g", [GrammarRule("X", ("a",), ("b",)), rule])
        assert not (tmp_path / "g").exists()
    with pytest.raises(InputError, match="named features"):
        write_moses_rules(tmp_path / "m", [GrammarRule("X", ("a",), ("c",), features={"A": 1.0})])
    with pytest.raises(InputError, match="cannot be written"):
        format_moses_rule(GrammarRule("X", ("[a]",), ("c",)))
    assert not (tmp_path / "m").exists()


def test_gzip_and_bad_bytes(tmp_path):
    with pytest.raises(InputError, match="not UTF-8"):
        read_moses_rules(write(tmp_path / "a", b"a [X] ||| b [X] ||| 1\n\xff [X] ||| b [X] ||| 1\n"))
    data = gzip.compress(b"[X] ||| a ||| b ||| 1\n" * 50, mtime=0)
    with pytest.raises(InputError, match="corrupt gzip"):
        read_cdec_rules(write(tmp_path / "b.gz", data[:-9]))


# ---- fuzzing ------------------------------------------------------------------------------

MOSES_SAMPLE = (
    "! [X] ||| ! [X] ||| 0.619048 0.6 0.866667 0.882353 ||| 0-0 ||| 21 15 13 ||| |||\n"
    "\" gedruckt [X][X] präsentation [X][X] [X] ||| \" printed [X][X] [X][X] presentation [X] ||| "
    "1 0.00537368 0.499999 0.19697 ||| 0-0 1-1 2-3 3-4 4-2 ||| 0.0833333 0.166667 0.0833333 ||| |||\n"
    "[X][S] [X][X] [X] ||| [X][S] [X][X] [S] ||| 2.718 ||| 0-0 1-1 ||| 0 ||| |||\n"
    "a [X] ||| [X] ||| 1e-05 ||| ||| 1 1 1\n"
).encode()

CDEC_SAMPLE = (
    "[X] ||| amerika [X,1] . ||| american [X,1] . ||| 0.477121263742 0.60206001997 1.0 ||| 0-0 2-2\n"
    "[X] ||| auf [X,1] ||| in a [X,1] of ||| 2.22010803223 0.0 ||| 0-3 0-0\n"
    "[X] ||| a [X,1] b [X,2] ||| [2] c [X,1] ||| Glue=1 PassThrough=-0.5\n"
    "[S] ||| [S,1] [X,2] ||| [1] [2]\n"
).encode()

TOKENS = ["|||", "||", "|", " ||| ", " ", "  ", "\t", "\n", "\r\n", "\r", "0", "1", "2", "9", "10",
          "-", "0-0", "1-0", "0-1", "2-3", "=", "A=", "A=1", "=1", ";", "+", ".", "e", "-0", "1e-05",
          "3.5", "nan", "inf", "1e999", "1_0", "[", "]", "[X]", "[S]", "[X][X]", "[X][S]", "[X,1]",
          "[X,2]", "[X,0]", "[1]", "[2]", "[,1]", "[X,", "][", "[[X]]", "a", "é", "\x00", "\u2028",
          "\x85", "\ufeff", "{{", "}}"]

token_soup = st.lists(st.sampled_from(TOKENS), max_size=80).map(lambda t: "".join(t).encode())


mutated = mutations(TOKENS, any_separator=True)


def documents(sample: bytes):
    return st.one_of(st.binary(max_size=300), token_soup, mutated(sample))


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("grammar_fuzz")


def survives_and_round_trips(path, read, fmt, parse) -> None:
    """Reading raises nothing but InputError (naming the file); rules read are written and read
    back equal, and a second write gives the same text."""
    try:
        rules = read(path)
    except InputError as err:
        assert err.path == str(path)
        return
    for rule in rules:
        text = fmt(rule)
        again = parse(text)
        assert again == rule, (text, rule, again)
        assert fmt(again) == text


@FUZZ
@given(data=documents(MOSES_SAMPLE))
def test_fuzz_moses_rules(fuzz_dir, data):
    survives_and_round_trips(write(fuzz_dir / "rt", data), read_moses_rules, format_moses_rule,
                             parse_moses_rule)


@FUZZ
@given(data=documents(CDEC_SAMPLE))
def test_fuzz_cdec_rules(fuzz_dir, data):
    survives_and_round_trips(write(fuzz_dir / "g", data), read_cdec_rules, format_cdec_rule,
                             parse_cdec_rule)


@FUZZ
@given(data=documents(MOSES_SAMPLE + CDEC_SAMPLE))
def test_fuzz_each_reader_on_the_other_format(fuzz_dir, data):
    survives_and_round_trips(write(fuzz_dir / "x", data), read_moses_rules, format_moses_rule,
                             parse_moses_rule)
    survives_and_round_trips(write(fuzz_dir / "y", data), read_cdec_rules, format_cdec_rule,
                             parse_cdec_rule)


def test_fuzz_samples_are_valid(tmp_path):
    """The fuzzing seeds themselves read and round-trip (so mutations start from valid input)."""
    assert len(read_moses_rules(write(tmp_path / "m", MOSES_SAMPLE))) == 4
    assert len(read_cdec_rules(write(tmp_path / "c", CDEC_SAMPLE))) == 4
    write_moses_rules(tmp_path / "m2", read_moses_rules(tmp_path / "m"))
    write_cdec_rules(tmp_path / "c2", read_cdec_rules(tmp_path / "c"))
    assert (tmp_path / "m2").read_bytes() == MOSES_SAMPLE
    assert (tmp_path / "c2").read_bytes() == CDEC_SAMPLE


# ---- the real cdec ------------------------------------------------------------------------


def test_real_cdec_decodes_a_written_grammar(tmp_path):
    """The rules of grammar.dev whose source words all occur in dev sentence 3, written by
    write_cdec_rules as a grammar of their own, decode that sentence with cdec."""
    tool = shared_path("tools", "cdec", "cdec")
    sentence = cdec("dev.src").read_text(encoding="utf-8").splitlines()[2]
    words = set(sentence.split())
    rules = [r for r in read_cdec_rules(cdec("grammar.dev"))
             if all(isinstance(s, NT) or s in words for s in r.source)]
    assert 0 < len(rules) < 3103
    assert write_cdec_rules(tmp_path / "grammar.sent", rules) == len(rules)
    ini = []
    for line in cdec("cdec.run.ini").read_text().splitlines():
        if line.startswith("grammar="):
            line = f"grammar={tmp_path / 'grammar.sent'}"
        elif "KLanguageModel" in line:
            line = f"feature_function=KLanguageModel {cdec('lm.3.arpa.gz')}"
        ini.append(line)
    assert any(line.startswith("grammar=") for line in ini)
    (tmp_path / "cdec.ini").write_text("\n".join(ini) + "\n")
    (tmp_path / "input").write_text(sentence + "\n", encoding="utf-8")
    result = subprocess.run([str(tool), "-c", "cdec.ini", "-w", str(cdec("weights.init")),
                             "-i", "input"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    best = result.stdout.splitlines()
    assert len(best) == 1 and best[0].split()
    assert "is" in best[0].split() or "this" in best[0].split(), best
