"""Reference Hiero (SCFG) rule extraction for the tests: a slow, obvious re-statement of Moses ``extract-rules``.

This module says in plain Python *what* the real Moses tool ``extract-rules`` (phrase-extract/
extract-rules-main.cpp) writes into its extract files for one sentence pair when it runs with its
default options, as ``train-model.perl -hierarchical -glue-grammar`` runs it (through
``extract-parallel.perl``, one call per corpus part)::

    extract-rules PART.target PART.source PART.align extract.N \\
        --GlueGrammar glue.N --MaxSpan 10 --GZOutput --SentenceOffset OFFSET

It is written for checking, not for speed: it enumerates every box of the alignment matrix and
every set of holes directly. ``tests/test_hiero_reference.py`` compares it with the real binary.

Definitions (Chiang 2007, "Hierarchical phrase-based translation", Computational Linguistics
33(2), section 3.2), with Moses' choices
----------------------------------------------------------------------------------------------
Positions are 0-based and spans inclusive.  An alignment is a list of links ``(i, j)``: source
word ``i`` is aligned to target word ``j`` (Moses' ``i-j`` format, source first).

* **Initial phrase pair** (Chiang's "initial phrase", Och & Ney's "alignment template"): a box
  ``f[s1..s2] x e[t1..t2]`` that contains at least one link and is *consistent* with the
  alignment: no link has exactly one end inside the box.  Moses keeps the *loose* phrase pairs
  too: a box may extend over unaligned words at its boundaries, on both sides (the target side
  because ``extract-rules`` tries every target span that contains an aligned word; the source
  side because it then lets the start retreat and the end advance over unaligned source words,
  extract-rules-main.cpp ``extractRules``).  Every such box is a separate initial phrase with its
  own rules; Chiang 2007 instead keeps only the tightest one.
* **Rule** ``X -> <gamma, alpha, ~>``: either an initial phrase pair itself (a fully lexical
  rule), or an initial phrase pair ``P`` from which smaller initial phrase pairs ``Q1 .. Qk``
  ("holes", each a phrase pair lying inside ``P``) are cut out and replaced by co-indexed
  non-terminals ``X_1 .. X_k`` (Chiang's rule-forming step: if ``X -> <gamma, alpha>`` is a rule
  and ``<f_i^j, e_i'^j'>`` an initial phrase pair with ``gamma = gamma1 f_i^j gamma2``,
  ``alpha = alpha1 e_i'^j' alpha2``, then ``X -> <gamma1 X_k gamma2, alpha1 X_k alpha2>`` is a
  rule).

Moses' default options (phrase-extract/RuleExtractionOptions.h) and what each one does here:

=========================  =====  ===============================================================
option                     value  meaning
=========================  =====  ===============================================================
``--MaxSpan``              10     an initial phrase pair has at most 10 words on the source side
                                  and at most 10 on the target side (Chiang: 10).
``--MaxSymbolsSource``     5      a rule's source side has at most 5 symbols, terminals plus
                                  non-terminals (Chiang: 5).  This also applies to the fully
                                  lexical rule: a phrase pair with 6..10 source words gives no
                                  lexical rule but is still used for hierarchical rules and holes.
``--MaxSymbolsTarget``     999    the same on the target side; never binding (target <= 10 words).
``--MaxNonTerm``           2      at most 2 non-terminals (holes) per rule (Chiang: 2).
``--MinHoleSource``        2      a hole covers at least 2 *source* words.  Chiang 2007 has no
                                  such limit; this is Moses' default, and the main difference to
                                  the textbook Hiero grammar: ``X -> <f1 X, e1 X>`` with a
                                  one-word source hole is never extracted.
``--MinHoleTarget``        1      a hole covers at least 1 target word (always true).
``--MinWords``             1      at least 1 terminal is left on the source side and at least 1
                                  on the target side after cutting the holes (Chiang: "at least
                                  one pair of aligned words", see below).
``NonTermConsecSource``    false  two holes may not be adjacent on the source side (Chiang: no
                                  adjacent non-terminals on the French side).  On the target
                                  side adjacent holes are allowed (``nonTermConsecTarget`` true).
``NonTermFirstWord``       true   a hole may start at the first word of the phrase pair.
``RequireAlignedWord``     true   at least one of the target terminals left after cutting the
                                  holes is aligned (Chiang: a rule has at least one pair of
                                  aligned words).  Because the holes and the phrase pair are
                                  consistent, its link then lies between terminals on both sides.
``MaxScope``               999    never binding.
``duplicateRules``         true   identical rules from overlapping spans are all counted.
``fractionalCounting``     true   every rule extracted from an initial phrase pair ``P``
                                  (the lexical rule and all hierarchical ones) gets count
                                  ``1 / (number of rules extracted from P)``.
syntax, ``--BoundaryRules`` off   the only non-terminal label is ``X``; no ``<s>``/``</s>`` words
                                  are added to the sentences.
=========================  =====  ===============================================================

Consolidation and output (``ExtractTask::consolidateRules`` / ``writeRulesToFile``): within one
sentence pair the counts of rule instances with the same (source, target, alignment) strings are
summed and the rule is written once.  A line of the forward extract file ``extract.gz`` is::

    der [X][X] [X] ||| the [X][X] [X] ||| 0-0 1-1 ||| 0.333333 ||| 

(source side; target side; alignment; count; then an empty field: the line ends in ``" ||| "``),
and of the inverse file ``extract.inv.gz``: ``target ||| source ||| inverse alignment ||| count``.
Rule sides are the words of the phrase pair with every hole replaced by ``[X][X]`` (source label,
target label), followed by the left-hand side ``[X]``.  The alignment lists ``s-t`` pairs of
*symbol* positions (0-based, a hole counts as one symbol, the left-hand side is not counted): first
the word links, by target position and, for one target word, in the order the links appear in the
input alignment line (Moses keeps that order and does not remove repeated links); then one pair
per hole, the holes in target order (this pairing is the non-terminal co-indexing).  The inverse
alignment lists the same pairs in the same order as ``t-s``.  Counts are C++ ``float``\\s: each
rule instance gets ``1.0/n`` rounded to single precision, the instances of one rule are summed in
single precision in extraction order, and the sum is printed with ``operator<<`` (6 significant
digits, ``%g``): 1/3 is written ``0.333333``.  The single-precision sum can differ from the exact
one in the 6th printed digit, so ``HieroRule`` keeps both (``count``, exact; ``moses_count``) and
this module visits phrase pairs and holes in extract-rules' order (``_moses_order``): target span
length, target start, source start retreating over unaligned words, source end advancing; holes by
target span then the same source order, a one-hole rule before its two-hole extensions.

The glue grammar (``--GlueGrammar FILE``, no target syntax) is always the same three rules; see
``glue_grammar``.

Moses skips a sentence pair with an empty side (and writes nothing for it); ``extract_rules``
returns no rules for it.  Moses also skips (with a warning) a pair whose alignment has a link out
of range; ``extract_rules`` raises ``ValueError`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import numpy as np

from minismt.extract.hiero import HieroOptions

__all__ = [
    "DEFAULT_OPTIONS", "ExtractRulesOptions", "HieroRule", "PhrasePair", "ScoredRule",
    "extract_corpus", "extract_rules", "format_count", "glue_grammar", "hole_sets",
    "initial_phrase_pairs", "lexical_probabilities", "score_corpus", "source_matches",
]

#: How a non-terminal (hole) is written on both sides of a rule: source label, target label.
NONTERMINAL = "[X][X]"
#: The left-hand side written at the end of both rule sides.
LHS = "[X]"


ExtractRulesOptions = HieroOptions
"""The ``extract-rules`` options this reference honours (the product's option set; its defaults are Moses'
defaults). Only the defaults are checked against the real binary (``tests/test_hiero_reference.py``)."""

DEFAULT_OPTIONS = ExtractRulesOptions()


@dataclass(frozen=True, order=True)
class PhrasePair:
    """A box of the alignment matrix: source words ``s1..s2`` and target words ``t1..t2`` (inclusive)."""

    s1: int
    s2: int
    t1: int
    t2: int

    @property
    def source_length(self) -> int:
        return self.s2 - self.s1 + 1

    @property
    def target_length(self) -> int:
        return self.t2 - self.t1 + 1

    def contains(self, other: PhrasePair) -> bool:
        """True when ``other`` lies inside this box on both sides."""
        return self.s1 <= other.s1 and other.s2 <= self.s2 and self.t1 <= other.t1 and other.t2 <= self.t2


@dataclass(frozen=True)
class HieroRule:
    """One line of Moses' extract file: the rule's two sides, its alignment and its (summed) count.

    ``source``/``target`` are written as Moses writes them (``"der [X][X] [X]"``), ``alignment`` is
    the ``s-t`` string and ``alignment_inv`` the ``t-s`` string of the inverse file; ``count`` is
    exact (a ``Fraction``); ``moses_count`` is the value Moses computes and prints: the sum, in
    single precision and in Moses' extraction order, of the instances' ``1.0/n`` (it can differ
    from ``count`` in the 7th digit, e.g. 0.0748112 printed where the exact sum is 0.07481125...)."""

    source: str
    target: str
    alignment: str
    alignment_inv: str
    count: Fraction
    moses_count: float

    @property
    def key(self) -> tuple[str, str, str]:
        return self.source, self.target, self.alignment

    @property
    def num_nonterminals(self) -> int:
        return self.source.split().count(NONTERMINAL)

    def extract_line(self) -> str:
        """The line of the forward extract file (without the newline)."""
        return f"{self.source} ||| {self.target} ||| {self.alignment} ||| {format_count(self.moses_count)} ||| "

    def inverse_line(self) -> str:
        """The line of the inverse extract file (without the newline)."""
        return f"{self.target} ||| {self.source} ||| {self.alignment_inv} ||| {format_count(self.moses_count)}"


def format_count(count: Fraction | float) -> str:
    """A count as Moses prints it: a C++ ``float`` through ``operator<<`` (``%g``, 6 digits)."""
    return "%g" % float(np.float32(float(count)))


def glue_grammar() -> list[str]:
    """The glue grammar ``extract-rules --GlueGrammar FILE`` writes (no target syntax), one string
    per line: ``<s>`` rule, ``</s>`` rule, concatenation rule ``S -> <S X, S X>`` (score e)."""
    return [
        "<s> [X] ||| <s> [S] ||| 1 ||| 0-0 ||| 0 ||| |||",
        "[X][S] </s> [X] ||| [X][S] </s> [S] ||| 1 ||| 0-0 1-1 ||| 0 ||| |||",
        "[X][S] [X][X] [X] ||| [X][S] [X][X] [S] ||| 2.718 ||| 0-0 1-1 ||| 0 ||| |||",
    ]


def _is_consistent(box: PhrasePair, links: Sequence[tuple[int, int]]) -> bool:
    """Chiang's / Och & Ney's consistency: at least one link inside, none with exactly one end inside."""
    inside_any = False
    for s, t in links:
        s_in = box.s1 <= s <= box.s2
        t_in = box.t1 <= t <= box.t2
        if s_in != t_in:
            return False
        if s_in and t_in:
            inside_any = True
    return inside_any


def initial_phrase_pairs(n_source: int, n_target: int, links: Sequence[tuple[int, int]],
                         max_span: int = DEFAULT_OPTIONS.max_span) -> list[PhrasePair]:
    """All consistent boxes with at most ``max_span`` words on each side, loose ones included
    (unaligned words at either boundary, on either side)."""
    pairs = []
    for s1 in range(n_source):
        for s2 in range(s1, min(n_source, s1 + max_span)):
            for t1 in range(n_target):
                for t2 in range(t1, min(n_target, t1 + max_span)):
                    box = PhrasePair(s1, s2, t1, t2)
                    if _is_consistent(box, links):
                        pairs.append(box)
    return pairs


def _moses_order(p: PhrasePair) -> tuple[int, int, int, int]:
    """The order in which extract-rules visits the phrase pairs of one target length (and the holes
    of one phrase pair): by target span, then the source start retreating over unaligned words, then
    the source end advancing over unaligned words."""
    return p.t1, p.t2, -p.s1, p.s2


def _source_overlapping(a: PhrasePair, b: PhrasePair) -> bool:
    return not (a.s2 < b.s1 or b.s2 < a.s1)


def _target_overlapping(a: PhrasePair, b: PhrasePair) -> bool:
    return not (a.t2 < b.t1 or b.t2 < a.t1)


def hole_sets(phrase: PhrasePair, phrases: Iterable[PhrasePair], aligned_target: set[int],
              options: ExtractRulesOptions = DEFAULT_OPTIONS) -> list[tuple[PhrasePair, ...]]:
    """Every allowed way of cutting 1..``max_nonterm`` holes out of ``phrase``; each hole set is a
    tuple of phrase pairs in target order.  ``phrases`` are the sentence's initial phrase pairs and
    ``aligned_target`` the target positions that have at least one link."""
    # a hole is an initial phrase pair inside the phrase, not spanning its whole target side,
    # big enough on both sides
    candidates = sorted(
        (q for q in phrases
         if phrase.contains(q) and (q.t1, q.t2) != (phrase.t1, phrase.t2)
         and q.source_length >= options.min_hole_source and q.target_length >= options.min_hole_target),
        key=_moses_order)
    result = []
    for k in range(1, options.max_nonterm + 1):
        for holes in combinations(candidates, k):
            # holes may not overlap on either side (two holes can share an unaligned source word
            # when both are loose), and by default they may not touch on the source side
            if any(_target_overlapping(a, b) or _source_overlapping(a, b) for a, b in combinations(holes, 2)):
                continue
            if not options.nonterm_consec_source and any(
                    a.s2 + 1 == b.s1 or b.s2 + 1 == a.s1 for a, b in combinations(holes, 2)):
                continue
            source_words = phrase.source_length - sum(q.source_length for q in holes)
            target_words = phrase.target_length - sum(q.target_length for q in holes)
            if source_words < options.min_words or target_words < options.min_words:
                continue
            if source_words + k > options.max_symbols_source or target_words + k > options.max_symbols_target:
                continue
            if options.require_aligned_word:
                terminals = [t for t in range(phrase.t1, phrase.t2 + 1)
                             if not any(q.t1 <= t <= q.t2 for q in holes)]
                if not any(t in aligned_target for t in terminals):
                    continue
            result.append(tuple(sorted(holes, key=lambda q: q.t1)))
    # Moses' order (it only matters for the float32 sums in ``extract_rules``): by the first hole,
    # a one-hole set before the two-hole sets that extend it, then by the second hole
    return sorted(result, key=lambda hs: [_moses_order(q) for q in hs])


def _render(source: Sequence[str], target: Sequence[str], aligned_to_t: Sequence[Sequence[int]],
            phrase: PhrasePair, holes: tuple[PhrasePair, ...]) -> tuple[str, str, str, str]:
    """Moses' strings for a phrase pair with holes (none for the lexical rule): source side, target
    side, alignment ``s-t`` and inverse alignment ``t-s``."""
    def side(first: int, last: int, words: Sequence[str], hole_spans: list[tuple[int, int]]):
        symbols, word_pos, hole_pos = [], {}, {}
        pos = first
        while pos <= last:
            starting = [span for span in hole_spans if span[0] == pos]
            if starting:
                hole_pos[starting[0]] = len(symbols)
                symbols.append(NONTERMINAL)
                pos = starting[0][1] + 1
            else:
                word_pos[pos] = len(symbols)
                symbols.append(words[pos])
                pos += 1
        return " ".join(symbols + [LHS]), word_pos, hole_pos

    src_str, src_word_pos, src_hole_pos = side(phrase.s1, phrase.s2, source, [(q.s1, q.s2) for q in holes])
    tgt_str, tgt_word_pos, tgt_hole_pos = side(phrase.t1, phrase.t2, target, [(q.t1, q.t2) for q in holes])
    pairs = []
    for t in range(phrase.t1, phrase.t2 + 1):
        if t in tgt_word_pos:
            for s in aligned_to_t[t]:
                pairs.append((src_word_pos[s], tgt_word_pos[t]))
    for q in holes:  # target order
        pairs.append((src_hole_pos[(q.s1, q.s2)], tgt_hole_pos[(q.t1, q.t2)]))
    alignment = " ".join(f"{s}-{t}" for s, t in pairs)
    alignment_inv = " ".join(f"{t}-{s}" for s, t in pairs)
    return src_str, tgt_str, alignment, alignment_inv


def extract_rules(source: Sequence[str] | str, target: Sequence[str] | str,
                  alignment: Iterable[tuple[int, int]],
                  options: ExtractRulesOptions = DEFAULT_OPTIONS) -> list[HieroRule]:
    """The rules Moses ``extract-rules`` writes for one sentence pair, consolidated (one per distinct
    (source, target, alignment)), in order of first extraction.  ``source``/``target`` are token
    lists or whitespace-separated strings; ``alignment`` is a list of (source, target) links."""
    source = source.split() if isinstance(source, str) else list(source)
    target = target.split() if isinstance(target, str) else list(target)
    links = [(int(s), int(t)) for s, t in alignment]
    if not source or not target:
        return []
    for s, t in links:
        if not (0 <= s < len(source) and 0 <= t < len(target)):
            raise ValueError(f"alignment point {s}-{t} out of range for {len(source)} source and "
                             f"{len(target)} target words")
    aligned_to_t: list[list[int]] = [[] for _ in target]
    for s, t in links:
        aligned_to_t[t].append(s)  # input order kept, as Moses does
    aligned_target = {t for _, t in links}

    phrases = initial_phrase_pairs(len(source), len(target), links, options.max_span)

    # every rule instance with the initial phrase pair it comes from
    instances: list[tuple[PhrasePair, tuple[str, str, str, str]]] = []
    for phrase in sorted(phrases, key=lambda p: (p.target_length,) + _moses_order(p)):
        if (phrase.source_length <= options.max_symbols_source
                and phrase.target_length <= options.max_symbols_target):
            instances.append((phrase, _render(source, target, aligned_to_t, phrase, ())))
        for holes in hole_sets(phrase, phrases, aligned_target, options):
            instances.append((phrase, _render(source, target, aligned_to_t, phrase, holes)))

    # fractional counts: the rules of one initial phrase pair share one count
    per_phrase: dict[PhrasePair, int] = {}
    for phrase, _ in instances:
        per_phrase[phrase] = per_phrase.get(phrase, 0) + 1
    totals: dict[tuple[str, str, str], Fraction] = {}
    totals32: dict[tuple[str, str, str], np.float32] = {}
    inverse: dict[tuple[str, str, str], str] = {}
    for phrase, (src, tgt, align, align_inv) in instances:
        n = per_phrase[phrase] if options.fractional_counting else 1
        key = (src, tgt, align)
        totals[key] = totals.get(key, Fraction(0)) + Fraction(1, n)
        # what Moses computes: float count = 1.0 / n, summed in float, in extraction order
        totals32[key] = np.float32(totals32.get(key, np.float32(0)) + np.float32(1.0 / n))
        inverse[key] = align_inv
    return [HieroRule(src, tgt, align, inverse[(src, tgt, align)], count, float(totals32[(src, tgt, align)]))
            for (src, tgt, align), count in totals.items()]


def extract_corpus(sources: Iterable[Sequence[str] | str], targets: Iterable[Sequence[str] | str],
                   alignments: Iterable[Iterable[tuple[int, int]]],
                   options: ExtractRulesOptions = DEFAULT_OPTIONS) -> list[list[HieroRule]]:
    """``extract_rules`` for every sentence pair of a corpus: one list of rules per pair."""
    return [extract_rules(s, t, a, options) for s, t, a in zip(sources, targets, alignments, strict=True)]


# ---------------------------------------------------------------------------------------------
# Scoring: Moses ``score --Hierarchical`` (both directions) + ``consolidate``, in plain Python
# ---------------------------------------------------------------------------------------------

NULL = None


def lexical_probabilities(sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                          alignments: Sequence[Iterable[tuple[int, int]]]):
    """Moses' ``lex.f2e`` and ``lex.e2f`` as dicts: ``w_e_f[(f, e)] = c(f, e) / c(f)`` and
    ``w_f_e[(f, e)] = c(f, e) / c(e)``, a word without links counted with NULL, each value rounded
    to 7 decimals as the files carry them."""
    pair_count: dict[tuple, int] = {}
    for source, target, links in zip(sources, targets, alignments):
        links = set(links)
        for i, j in links:
            pair_count[source[i], target[j]] = pair_count.get((source[i], target[j]), 0) + 1
        for i, word in enumerate(source):
            if not any(a == i for a, _ in links):
                pair_count[word, NULL] = pair_count.get((word, NULL), 0) + 1
        for j, word in enumerate(target):
            if not any(b == j for _, b in links):
                pair_count[NULL, word] = pair_count.get((NULL, word), 0) + 1
    c_f: dict = {}
    c_e: dict = {}
    for (f, e), c in pair_count.items():
        c_f[f] = c_f.get(f, 0) + c
        c_e[e] = c_e.get(e, 0) + c
    w_e_f = {k: float(f"{c / c_f[k[0]]:.7f}") for k, c in pair_count.items()}
    w_f_e = {k: float(f"{c / c_e[k[1]]:.7f}") for k, c in pair_count.items()}
    return w_e_f, w_f_e


@dataclass(frozen=True)
class ScoredRule:
    """A line of the consolidated rule table: the two sides, the written alignment, the scores
    p(f|e), lex(f|e), p(e|f), lex(e|f) and the counts c(e), c(f), c(f,e) (exact fractions)."""

    source: str
    target: str
    alignment: str
    scores: tuple[float, float, float, float]
    counts: tuple[Fraction, Fraction, Fraction]


def _links(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in point.split("-")) for point in text.split()]


def _sets(links: list[tuple[int, int]], size: int, by_target: bool) -> list[list[int]]:
    """The alignment as Moses' ``vector<set<size_t>>``: for each target symbol (``by_target``) or
    source symbol the sorted positions linked to it."""
    sets: list[set[int]] = [set() for _ in range(size)]
    for s, t in links:
        if by_target:
            sets[t].add(s)
        else:
            sets[s].add(t)
    return [sorted(x) for x in sets]


def _lexical_weight(outer_words: list[str], inner_words: list[str], sets: list[list[int]],
                    table: dict, outer_is_target: bool) -> float:
    """Moses' ``computeLexicalTranslation``: the product over the outer symbols of the mean table
    value over their linked symbols (NULL for none); a pair that is not in the table (a
    non-terminal pair) counts 1."""
    score = 1.0
    for o, linked in enumerate(sets):
        if not linked:
            key = (NULL, outer_words[o]) if outer_is_target else (outer_words[o], NULL)
            score *= table.get(key, 1.0)
            continue
        total = 0.0
        for i in linked:
            key = (inner_words[i], outer_words[o]) if outer_is_target else (outer_words[o], inner_words[i])
            total += table.get(key, 1.0)
        score *= total / len(linked)
    return score


def score_corpus(sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                 alignments: Sequence[Iterable[tuple[int, int]]],
                 options: ExtractRulesOptions = DEFAULT_OPTIONS) -> list[ScoredRule]:
    """The rule table of a corpus as Moses' ``score`` (forward and ``--Inverse``) and
    ``consolidate`` with ``--Hierarchical`` define it, with exact counts:

    * a rule is a source string, a target string and the pairing of their non-terminals (the
      non-terminal links of its alignment); its variants differ in their word links;
    * c(f,e) sums the fractional counts of all its occurrences; c(f) sums c(f,e) over the rules
      with the same source string; c(e) over those with the same target string;
    * p(e|f) = c(f,e)/c(f), p(f|e) = c(f,e)/c(e);
    * lex(e|f) uses the variant with the highest count, ties to the greater alignment compared
      as target-to-source sets; lex(f|e) the same with source-to-target sets; the written
      alignment is lex(e|f)'s, its ``s-t`` pairs sorted as strings.

    Rules are returned sorted as Moses' table (source string, then target string)."""
    sources = [s.split() if isinstance(s, str) else list(s) for s in sources]
    targets = [t.split() if isinstance(t, str) else list(t) for t in targets]
    alignments = [list(a) for a in alignments]
    w_e_f, w_f_e = lexical_probabilities(sources, targets, alignments)
    variants: dict[tuple, dict[str, Fraction]] = {}
    for rules in extract_corpus(sources, targets, alignments, options):
        for rule in rules:
            links = _links(rule.alignment)
            src = rule.source.split()[:-1]
            tgt = rule.target.split()[:-1]
            pairing = tuple(sorted((s, t) for s, t in links if src[s] == NONTERMINAL))
            key = (rule.source, rule.target, pairing)
            by_alignment = variants.setdefault(key, {})
            by_alignment[rule.alignment] = by_alignment.get(rule.alignment, Fraction(0)) + rule.count
    c_f: dict[str, Fraction] = {}
    c_e: dict[str, Fraction] = {}
    for (source, target, _), by_alignment in variants.items():
        total = sum(by_alignment.values(), Fraction(0))
        c_f[source] = c_f.get(source, Fraction(0)) + total
        c_e[target] = c_e.get(target, Fraction(0)) + total
    table = []
    for (source, target, _), by_alignment in variants.items():
        src = source.split()[:-1]
        tgt = target.split()[:-1]

        def best(by_target: bool) -> list[tuple[int, int]]:
            size = len(tgt) if by_target else len(src)
            candidates = [(count, _sets(_links(text), size, by_target), text)
                          for text, count in by_alignment.items()]
            return _links(max(candidates, key=lambda c: (c[0], c[1]))[2])

        forward, inverse = best(True), best(False)
        lex_ef = _lexical_weight(tgt, src, _sets(forward, len(tgt), True), w_e_f, True)
        lex_fe = _lexical_weight(src, tgt, _sets(inverse, len(src), False), w_f_e, False)
        written = " ".join(sorted({f"{s}-{t}" for s, t in forward}))
        c_fe = sum(by_alignment.values(), Fraction(0))
        table.append(ScoredRule(source, target, written,
                                (float(c_fe / c_e[target]), lex_fe, float(c_fe / c_f[source]), lex_ef),
                                (c_e[target], c_f[source], c_fe)))
    table.sort(key=lambda r: ((r.source + " |||").encode(), (r.target + " |||").encode(), r.alignment))
    return table


def source_matches(source: str, sentence: Sequence[str]) -> bool:
    """Whether a rule's source side (``"a [X][X] b [X]"``) matches some span of ``sentence``: its
    words in order, each non-terminal over at least one word (Moses' ``filter-rule-table
    hierarchical``)."""
    symbols = source.split()[:-1]
    n = len(sentence)

    def match(k: int, p: int) -> bool:
        if k == len(symbols):
            return True
        if symbols[k] == NONTERMINAL:
            return any(match(k + 1, q) for q in range(p + 1, n + 1))
        return p < n and sentence[p] == symbols[k] and match(k + 1, p + 1)

    return any(match(0, start) for start in range(n))
