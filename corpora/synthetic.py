"""A deterministic toy language pair with real translation phenomena and its true word alignment.

Real corpora say how good a system is; they cannot say *why*: nobody knows their true
alignment. This generator writes a parallel corpus whose grammar is known exactly, so
that alignment, reordering and disambiguation can be measured against the truth and a
system can be debugged on a few thousand pairs in seconds.

The language pair (pseudo-words; the lexicon is fixed, the seed only picks sentences):

- **Word order.** The source is head-final (SOV): ``SUBJ [ADV] [PP PP] [OBJ] VERB``, with
  postposed adjectives ``ART NOUN ADJ ADJ``. The target is head-initial (SVO), its mirror
  image: ``SUBJ VERB [OBJ] [PP PP] [ADV]`` with ``ART ADJ ADJ NOUN``. Prepositions come
  first on both sides.
- **Inflection.** Source nouns and their adjectives carry a fused case+number suffix
  (nominative subject, accusative object, oblique after a preposition; singular/plural),
  so one target word has up to six source forms. Target nouns inflect for number and
  definiteness (``-er``, ``-en``, ``-ene``), target verbs agree with the subject in
  person and number (six endings; coordinated subjects are plural), source verbs do not.
- **Many-to-one.** The target has no definite article: ``le``/``lei`` + noun in the
  source becomes one definite noun form in the target (both source words link to it).
- **One-to-many.** Source compounds (one word, e.g. modifier+head) become two target
  words; particle verbs become a verb plus a particle (both linked to the one source word).
- **Ambiguity resolved by context.** Some source verbs have two translations chosen by
  the class of their object (food vs. tool); some source adjectives have two chosen by
  the noun they modify (animate vs. inanimate).
- **Variable length.** Optional adverbs, 0-2 prepositional phrases, 0-2 adjectives per
  noun phrase, coordinated subjects and a clause-final complement clause
  (``SUBJ [CLAUSE COMP] VERB`` -> ``SUBJ VERB COMP CLAUSE``) give sentences of 3-20 words.

About 360 lemmas, picked with Zipfian frequencies so that rare words still recur in a few
thousand pairs. Every word on both sides is aligned; links are exact, not estimated.
"""

from __future__ import annotations

import bisect
import json
import operator
import os
import random
from dataclasses import dataclass, field

from minismt.corpus import Alignment
from minismt.errors import InputError
from minismt.io import atomic_write, file_sha256, write_lines

GRAMMAR_VERSION = 1  # bump whenever the same seed would produce different text
LEXICON_SEED = 1729  # the language itself; corpus seeds only choose sentences
MIN_LENGTH, MAX_LENGTH = 3, 20
HELD_OUT_DEFAULT_MAX = 500

PERSONS = [(p, n) for n in ("sg", "pl") for p in (1, 2, 3)]
NOUN_CLASSES = {"person": 40, "animal": 25, "food": 25, "tool": 25, "place": 25, "thing": 30}
ANIMATE = ("person", "animal")
INANIMATE = ("food", "tool", "place", "thing")

# Source: fused case+number suffix of nouns and adjectives.
SOURCE_SUFFIX = {("nom", "sg"): "a", ("nom", "pl"): "an", ("acc", "sg"): "o",
                 ("acc", "pl"): "on", ("obl", "sg"): "e", ("obl", "pl"): "en"}
# Target: noun suffix by (number, definite); verb ending by (person, number).
TARGET_NOUN_SUFFIX = {("sg", False): "", ("pl", False): "er", ("sg", True): "en",
                      ("pl", True): "ene"}
TARGET_VERB_SUFFIX = {(1, "sg"): "o", (2, "sg"): "as", (3, "sg"): "at",
                      (1, "pl"): "amo", (2, "pl"): "ate", (3, "pl"): "ant"}

SOURCE_FUNCTION = {"def_sg": "le", "def_pl": "lei", "indef": "un", "and": "ka", "comp": "ku"}
TARGET_FUNCTION = {"indef": "en", "and": "og", "comp": "dat"}
SOURCE_PRONOUNS = {(1, "sg"): "mi", (2, "sg"): "tu", (3, "sg"): "si",
                   (1, "pl"): "mis", (2, "pl"): "tus", (3, "pl"): "sis"}
TARGET_PRONOUNS = {(1, "sg"): "ek", (2, "sg"): "dy", (3, "sg"): "hy",
                   (1, "pl"): "wy", (2, "pl"): "jy", (3, "pl"): "hulle"}
PARTICLES = ("op", "uit", "af", "om", "deur")

# Object classes a transitive verb takes, assigned to verbs in turn.
OBJECT_FRAMES = (ANIMATE, ("food",), ("tool", "thing"), ANIMATE + ("food", "tool", "thing"),
                 ("place",))
AMBIGUOUS_OBJECTS = ("food", "tool")
PREPOSITION_OBJECTS = (("place",),) * 5 + (ANIMATE + ("tool", "thing"),) * 5
VERB_COUNTS = {"intr": 20, "tr": 30, "amb": 10, "prt": 10, "say": 6}
N_ADJECTIVES, N_AMBIGUOUS_ADJECTIVES, N_ADVERBS, N_COMPOUNDS = 55, 10, 15, 25
AMBIGUOUS_ADJECTIVE_EVERY = 5  # adjectives 1, 6, 11, ... (spread over the frequency ranks)


@dataclass(frozen=True)
class Noun:
    """A noun lemma: source stem, target stems (two for a compound: modifier, head), class."""

    src: str
    tgt: tuple[str, ...]
    cls: str


@dataclass(frozen=True)
class Adjective:
    """An adjective; ``tgt_inanimate`` differs from ``tgt`` only for ambiguous ones."""

    src: str
    tgt: str
    tgt_inanimate: str

    def translate(self, noun_class: str) -> str:
        return self.tgt if noun_class in ANIMATE else self.tgt_inanimate


@dataclass(frozen=True)
class Verb:
    """A verb lemma; ``kind`` is intr, tr, amb (translation by object class), prt or say."""

    src: str
    kind: str
    tgt: str
    objects: tuple[str, ...] = ()
    by_object: dict = field(default_factory=dict)
    particle: str | None = None

    def translate(self, object_class: str | None) -> str:
        return self.by_object.get(object_class, self.tgt)


@dataclass(frozen=True)
class Preposition:
    src: str
    tgt: str
    objects: tuple[str, ...]


@dataclass(frozen=True)
class Form:
    """What a surface word is: tag (N, ADJ, V, ...), lemma, and features such as case or class."""

    tag: str
    lemma: str
    features: tuple[tuple[str, object], ...] = ()

    def feature(self, name: str):
        return dict(self.features).get(name)


@dataclass
class Lexicon:
    """The fixed vocabulary of the language pair, and every surface form's analysis."""

    nouns: dict[str, list[Noun]]
    compounds: dict[str, list[Noun]]
    adjectives: list[Adjective]
    verbs: dict[str, list[Verb]]
    prepositions: list[Preposition]
    adverbs: list[tuple[str, str]]
    src_forms: dict[str, Form]
    tgt_forms: dict[str, Form]

    def n_lemmas(self) -> int:
        return (sum(map(len, self.nouns.values())) + sum(map(len, self.compounds.values()))
                + len(self.adjectives) + sum(map(len, self.verbs.values()))
                + len(self.prepositions) + len(self.adverbs) + len(SOURCE_PRONOUNS)
                + len(SOURCE_FUNCTION))


class _Namer:
    """Invents pseudo-words whose every inflected form is new on its side of the pair."""

    def __init__(self, rng: random.Random, consonants: str, vowels: str, reserved):
        self.rng = rng
        self.letters = {"C": consonants, "V": vowels}
        self.used: set[str] = set(reserved)

    def claim(self, forms: list[str]) -> bool:
        if len(set(forms)) != len(forms) or any(f in self.used for f in forms):
            return False
        self.used.update(forms)
        return True

    def new(self, patterns: tuple[str, ...], forms_of) -> str:
        while True:
            pattern = patterns[self.rng.randrange(len(patterns))]
            stem = "".join(self.rng.choice(self.letters[c]) for c in pattern)
            if self.claim(forms_of(stem)):
                return stem


def _single(stem: str) -> list[str]:
    """Forms of an uninflected word."""
    return [stem]


def _src_nominal_forms(stem: str) -> list[str]:
    return [stem + suffix for suffix in SOURCE_SUFFIX.values()]


def _tgt_noun_forms(stem: str) -> list[str]:
    return [stem + suffix for suffix in TARGET_NOUN_SUFFIX.values()]


def _tgt_verb_forms(stem: str) -> list[str]:
    return [stem + suffix for suffix in TARGET_VERB_SUFFIX.values()]


def build_lexicon(seed: int = LEXICON_SEED) -> Lexicon:
    """Invent the vocabulary: the same ``seed`` always gives the same language."""
    rng = random.Random(seed)
    src = _Namer(rng, "bdgklmnprstvz", "aeiou",
                 list(SOURCE_FUNCTION.values()) + list(SOURCE_PRONOUNS.values()))
    tgt = _Namer(rng, "bdfghklmnprstw", "aeiouy",
                 list(TARGET_FUNCTION.values()) + list(TARGET_PRONOUNS.values()) + list(PARTICLES))
    src_nominal = ("CVC", "CVCVC", "VCVC")
    tgt_stem = ("CVC", "CVCC", "CVCVC")

    nouns = {cls: [Noun(src.new(src_nominal, _src_nominal_forms),
                        (tgt.new(tgt_stem, _tgt_noun_forms),), cls) for _ in range(count)]
             for cls, count in NOUN_CLASSES.items()}
    compounds: dict[str, list[Noun]] = {cls: [] for cls in INANIMATE}
    made = 0
    while made < N_COMPOUNDS:
        modifier = rng.choice(nouns[rng.choice(INANIMATE)])
        head = rng.choice(nouns[rng.choice(INANIMATE)])
        stem = modifier.src + head.src
        if modifier is head or not src.claim(_src_nominal_forms(stem)):
            continue
        compounds[head.cls].append(Noun(stem, (modifier.tgt[0], head.tgt[0]), head.cls))
        made += 1

    adjectives = []
    for index in range(N_ADJECTIVES):
        source = src.new(src_nominal, _src_nominal_forms)
        animate = tgt.new(tgt_stem, _single)
        ambiguous = (index % AMBIGUOUS_ADJECTIVE_EVERY == 1
                     and index // AMBIGUOUS_ADJECTIVE_EVERY < N_AMBIGUOUS_ADJECTIVES)
        inanimate = tgt.new(tgt_stem, _single) if ambiguous else animate
        adjectives.append(Adjective(source, animate, inanimate))

    verbs: dict[str, list[Verb]] = {}
    for kind, count in VERB_COUNTS.items():
        verbs[kind] = []
        for index in range(count):
            source = src.new(("CVCVCV", "CVCV", "VCVCV"), _single)
            target = tgt.new(tgt_stem, _tgt_verb_forms)
            if kind == "tr":
                frame = OBJECT_FRAMES[index % len(OBJECT_FRAMES)]
                verbs[kind].append(Verb(source, kind, target, frame))
            elif kind == "amb":
                other = tgt.new(tgt_stem, _tgt_verb_forms)
                verbs[kind].append(Verb(source, kind, target, AMBIGUOUS_OBJECTS,
                                        dict(zip(AMBIGUOUS_OBJECTS, (target, other)))))
            elif kind == "prt":
                verbs[kind].append(Verb(source, kind, target, ("food", "tool", "thing"),
                                        particle=PARTICLES[index % len(PARTICLES)]))
            else:
                verbs[kind].append(Verb(source, kind, target))

    prepositions = [Preposition(src.new(("VC", "CV", "CVC"), _single),
                                tgt.new(("VC", "CVC"), _single), objects)
                    for objects in PREPOSITION_OBJECTS]
    adverbs = [(src.new(("CVCVCVC", "VCVCVC"), _single), tgt.new(("CVCVC", "CVCCVC"), _single))
               for _ in range(N_ADVERBS)]

    return Lexicon(nouns, compounds, adjectives, verbs, prepositions, adverbs,
                   *_analyses(nouns, compounds, adjectives, verbs, prepositions, adverbs))


def _analyses(nouns, compounds, adjectives, verbs, prepositions, adverbs):
    """Surface form -> :class:`Form` for both sides (used by analyses and tests)."""
    src_forms: dict[str, Form] = {}
    tgt_forms: dict[str, Form] = {}
    for (case, number), suffix in SOURCE_SUFFIX.items():
        for noun in [n for group in (nouns, compounds) for ns in group.values() for n in ns]:
            src_forms[noun.src + suffix] = Form("N", noun.src, (("case", case), ("number", number),
                                                                ("class", noun.cls)))
        for adjective in adjectives:
            src_forms[adjective.src + suffix] = Form("ADJ", adjective.src,
                                                     (("case", case), ("number", number)))
    for ns in nouns.values():
        for noun in ns:
            for (number, definite), suffix in TARGET_NOUN_SUFFIX.items():
                tgt_forms[noun.tgt[0] + suffix] = Form("N", noun.tgt[0], (
                    ("number", number), ("definite", definite), ("class", noun.cls)))
    for adjective in adjectives:
        for word in {adjective.tgt, adjective.tgt_inanimate}:
            tgt_forms[word] = Form("ADJ", word)
    for group in verbs.values():
        for verb in group:
            src_forms[verb.src] = Form("V", verb.src, (("kind", verb.kind),))
            for stem in {verb.tgt, *verb.by_object.values()}:
                for (person, number), suffix in TARGET_VERB_SUFFIX.items():
                    tgt_forms[stem + suffix] = Form("V", stem, (("person", person),
                                                                ("number", number)))
    for prep in prepositions:
        src_forms[prep.src], tgt_forms[prep.tgt] = Form("P", prep.src), Form("P", prep.tgt)
    for source, target in adverbs:
        src_forms[source], tgt_forms[target] = Form("ADV", source), Form("ADV", target)
    for key, word in SOURCE_PRONOUNS.items():
        src_forms[word] = Form("PRON", word, (("person", key[0]), ("number", key[1])))
        tgt_forms[TARGET_PRONOUNS[key]] = Form("PRON", TARGET_PRONOUNS[key],
                                               (("person", key[0]), ("number", key[1])))
    for key, word in SOURCE_FUNCTION.items():
        tag = {"and": "CONJ", "comp": "COMP"}.get(key, "ART")
        src_forms[word] = Form(tag, word)
    for key, word in TARGET_FUNCTION.items():
        tgt_forms[word] = Form({"and": "CONJ", "comp": "COMP"}.get(key, "ART"), word)
    for particle in PARTICLES:
        tgt_forms[particle] = Form("PRT", particle)
    return src_forms, tgt_forms


LEXICON = build_lexicon()


class _Zipf:
    """Draw items with probability proportional to 1/rank (rank in list order)."""

    def __init__(self, items):
        self.items = list(items)
        self.cumulative = []
        total = 0.0
        for rank in range(len(self.items)):
            total += 1.0 / (rank + 1)
            self.cumulative.append(total)

    def __call__(self, rng: random.Random):
        index = bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])
        return self.items[min(index, len(self.items) - 1)]


class _Phrase:
    """Source and target tokens (word, tag) of a constituent and its links (local positions)."""

    __slots__ = ("src", "tgt", "links")

    def __init__(self, src, tgt, links):
        self.src, self.tgt, self.links = src, tgt, links


def _join(src_order: list[_Phrase], tgt_order: list[_Phrase]) -> _Phrase:
    """Concatenate the same phrases in one order on the source side, another on the target."""
    src_at, tgt_at = {}, {}
    src, tgt = [], []
    for phrase in src_order:
        src_at[id(phrase)] = len(src)
        src.extend(phrase.src)
    for phrase in tgt_order:
        tgt_at[id(phrase)] = len(tgt)
        tgt.extend(phrase.tgt)
    links = [(i + src_at[id(p)], j + tgt_at[id(p)]) for p in src_order for i, j in p.links]
    return _Phrase(src, tgt, links)


def _word(src_word, src_tag, tgt_word, tgt_tag) -> _Phrase:
    return _Phrase([(src_word, src_tag)], [(tgt_word, tgt_tag)], [(0, 0)])


class _Grammar:
    """Samples sentence pairs from the lexicon with a seeded random.Random."""

    def __init__(self, lexicon: Lexicon, seed: int):
        self.lex = lexicon
        self.rng = random.Random(seed)
        self.nouns = {cls: _Zipf(group) for cls, group in lexicon.nouns.items()}
        self.compounds = {cls: _Zipf(group) for cls, group in lexicon.compounds.items() if group}
        self.adjectives = _Zipf(lexicon.adjectives)
        self.verbs = {kind: _Zipf(group) for kind, group in lexicon.verbs.items()}
        self.adverbs = _Zipf(lexicon.adverbs)
        self.prepositions = _Zipf(lexicon.prepositions)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, weights: dict):
        point = self.rng.random() * sum(weights.values())
        for key, weight in weights.items():
            point -= weight
            if point < 0:
                return key
        return key

    def noun_phrase(self, case: str, classes: tuple[str, ...]) -> tuple[_Phrase, str, str]:
        """``[ART] N ADJ*`` (source) / ``[ART] ADJ* N`` (target); returns (phrase, class, number)."""
        cls = classes[self.rng.randrange(len(classes))]
        if cls in self.compounds and self.chance(0.15):
            noun = self.compounds[cls](self.rng)
        else:
            noun = self.nouns[cls](self.rng)
        number = "pl" if self.chance(0.3) else "sg"
        definite = self.chance(0.5)
        suffix = SOURCE_SUFFIX[case, number]
        head = noun.tgt[-1] + TARGET_NOUN_SUFFIX[number, definite]
        tgt_words = [(stem, "N") for stem in noun.tgt[:-1]] + [(head, "N")]
        head_at = len(tgt_words) - 1
        src_words = [(noun.src + suffix, "N")]
        links = [(0, j) for j in range(len(tgt_words))]
        if definite:
            article = SOURCE_FUNCTION["def_sg" if number == "sg" else "def_pl"]
            src_words.insert(0, (article, "ART"))
            links = [(0, head_at)] + [(i + 1, j) for i, j in links]
        core = _Phrase(src_words, tgt_words, links)
        n_adjectives = self.pick({0: 0.6, 1: 0.3, 2: 0.1})
        adjectives: list[_Phrase] = []
        while len(adjectives) < n_adjectives:
            adjective = self.adjectives(self.rng)
            if any(a.src[0][0] == adjective.src + suffix for a in adjectives):
                continue
            adjectives.append(_word(adjective.src + suffix, "ADJ", adjective.translate(cls), "ADJ"))
        parts_src = [core] + adjectives
        parts_tgt = adjectives[::-1] + [core]
        if not definite and number == "sg":
            article = _word(SOURCE_FUNCTION["indef"], "ART", TARGET_FUNCTION["indef"], "ART")
            parts_src, parts_tgt = [article] + parts_src, [article] + parts_tgt
        return _join(parts_src, parts_tgt), cls, number

    def subject(self, classes: tuple[str, ...]) -> tuple[_Phrase, tuple[int, str]]:
        """A pronoun, a noun phrase or two coordinated ones; returns (phrase, person/number)."""
        if self.chance(0.25):
            person = PERSONS[self.rng.randrange(len(PERSONS))]
            return _word(SOURCE_PRONOUNS[person], "PRON", TARGET_PRONOUNS[person], "PRON"), person
        first, _, number = self.noun_phrase("nom", classes)
        if self.chance(0.1):
            second, _, _ = self.noun_phrase("nom", classes)
            conj = _word(SOURCE_FUNCTION["and"], "CONJ", TARGET_FUNCTION["and"], "CONJ")
            return _join([first, conj, second], [first, conj, second]), (3, "pl")
        return first, (3, number)

    def clause(self, embedded: bool) -> _Phrase:
        """One clause: SOV with modifiers before the verb (source), SVO mirror (target)."""
        kinds = {"intr": 0.22, "tr": 0.33, "amb": 0.15, "prt": 0.15, "say": 0.0 if embedded else 0.15}
        kind = self.pick(kinds)
        verb = self.verbs[kind](self.rng)
        subject, agreement = self.subject(("person",) if kind == "say" else ANIMATE)
        obj, object_class = None, None
        if kind in ("tr", "amb", "prt"):
            obj, object_class, _ = self.noun_phrase("acc", verb.objects)
        tgt_verb = [(verb.translate(object_class) + TARGET_VERB_SUFFIX[agreement], "V")]
        if verb.particle:
            tgt_verb.append((verb.particle, "PRT"))
        verb_phrase = _Phrase([(verb.src, "V")], tgt_verb, [(0, j) for j in range(len(tgt_verb))])
        if kind == "say":
            complement = self.clause(embedded=True)
            comp = _word(SOURCE_FUNCTION["comp"], "COMP", TARGET_FUNCTION["comp"], "COMP")
            return _join([subject, complement, comp, verb_phrase],
                         [subject, verb_phrase, comp, complement])
        adverb = None
        if self.chance(0.2):
            source, target = self.adverbs(self.rng)
            adverb = _word(source, "ADV", target, "ADV")
        pps = [self.prepositional_phrase() for _ in range(self.pick({0: 0.55, 1: 0.33, 2: 0.12}))]
        middle = ([adverb] if adverb else []) + pps + ([obj] if obj else [])
        after = ([obj] if obj else []) + pps[::-1] + ([adverb] if adverb else [])
        return _join([subject] + middle + [verb_phrase], [subject, verb_phrase] + after)

    def prepositional_phrase(self) -> _Phrase:
        prep = self.prepositions(self.rng)
        noun_phrase, _, _ = self.noun_phrase("obl", prep.objects)
        head = _word(prep.src, "P", prep.tgt, "P")
        return _join([head, noun_phrase], [head, noun_phrase])

    def sentence(self) -> _Phrase:
        """A main clause of 3-20 words on both sides (resampled until it is)."""
        while True:
            phrase = self.clause(embedded=False)
            if (MIN_LENGTH <= len(phrase.src) <= MAX_LENGTH
                    and MIN_LENGTH <= len(phrase.tgt) <= MAX_LENGTH):
                return phrase


@dataclass
class SyntheticCorpus:
    """Parallel sentences (tokenised, lowercase) with their true alignment and word tags."""

    src: list[str]
    tgt: list[str]
    alignment: Alignment
    src_tags: list[list[str]]
    tgt_tags: list[list[str]]

    def __len__(self) -> int:
        return len(self.src)


def _count(value, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum``, or an InputError."""
    try:
        number = operator.index(value)
    except TypeError:
        raise InputError(f"{name} {value!r}", expected="a whole number") from None
    if isinstance(value, bool) or number < minimum:
        raise InputError(f"{name} {value!r}", expected=f"a whole number >= {minimum}")
    return number


def _corpus(phrases: list[_Phrase]) -> SyntheticCorpus:
    return SyntheticCorpus(
        src=[" ".join(w for w, _ in p.src) for p in phrases],
        tgt=[" ".join(w for w, _ in p.tgt) for p in phrases],
        alignment=Alignment.from_lists(p.links for p in phrases),
        src_tags=[[t for _, t in p.src] for p in phrases],
        tgt_tags=[[t for _, t in p.tgt] for p in phrases])


def generate(n_pairs: int, seed: int) -> SyntheticCorpus:
    """``n_pairs`` sentence pairs drawn with ``seed``; the same seed gives the same corpus."""
    n_pairs = _count(n_pairs, "number of pairs", 0)
    grammar = _Grammar(LEXICON, _count(seed, "seed", 0))
    return _corpus([grammar.sentence() for _ in range(n_pairs)])


def default_held_out(n_pairs: int) -> int:
    """Default dev and test size: 10% of the training pairs, at most 500."""
    return min(HELD_OUT_DEFAULT_MAX, n_pairs // 10)


def write_synthetic(out_dir: str | os.PathLike, n_pairs: int, seed: int,
                    dev: int | None = None, test: int | None = None) -> dict:
    """Write ``out_dir/{train,dev,test}.{src,tgt,align}`` and ``corpus.json``; return the manifest.

    train is exactly ``generate(n_pairs, seed)``; dev and test (default
    ``min(500, n_pairs // 10)`` each) are further draws of the same stream whose source
    sentences occur neither in train nor in each other, so scores on them measure
    generalisation rather than memory. Alignments are Pharaoh ``i-j`` (source-target,
    0-based). Every file is written atomically; same arguments give identical bytes.
    """
    n_pairs = _count(n_pairs, "number of training pairs", 1)
    seed = _count(seed, "seed", 0)
    sizes = {"train": n_pairs,
             "dev": default_held_out(n_pairs) if dev is None else _count(dev, "dev size", 0),
             "test": default_held_out(n_pairs) if test is None else _count(test, "test size", 0)}
    grammar = _Grammar(LEXICON, seed)
    train = [grammar.sentence() for _ in range(n_pairs)]
    seen = {" ".join(w for w, _ in p.src) for p in train}
    splits = {"train": train}
    budget = 1000 + 100 * (sizes["dev"] + sizes["test"])
    for split in ("dev", "test"):
        phrases = []
        while len(phrases) < sizes[split]:
            budget -= 1
            if budget < 0:
                raise InputError(f"cannot draw {sizes['dev']} + {sizes['test']} held-out sentences "
                                 f"distinct from {n_pairs} training sentences",
                                 expected="smaller dev/test sets")
            phrase = grammar.sentence()
            line = " ".join(w for w, _ in phrase.src)
            if line not in seen:
                seen.add(line)
                phrases.append(phrase)
        splits[split] = phrases

    out_dir = os.fspath(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create folder: {err.strerror or err}", out_dir) from None
    records = {}
    for split, phrases in splits.items():
        corpus = _corpus(phrases)
        record = {}
        for side, write in (("src", lambda p: write_lines(p, corpus.src)),
                            ("tgt", lambda p: write_lines(p, corpus.tgt)),
                            ("align", corpus.alignment.write)):
            path = os.path.join(out_dir, f"{split}.{side}")
            write(path)
            record[side] = {"path": f"{split}.{side}", "lines": len(corpus), "sha256": file_sha256(path)}
        records[split] = record
    manifest = {
        "name": "synthetic", "description": "toy SOV -> SVO language pair with its true alignment "
                                            "(corpora.synthetic)",
        "source_language": "synth-sov", "target_language": "synth-svo",
        "seed": seed, "grammar_version": GRAMMAR_VERSION, "lexicon_seed": LEXICON_SEED,
        "lemmas": LEXICON.n_lemmas(), "splits": records, "tokenizer": None, "lowercase": True,
    }
    path = os.path.join(out_dir, "corpus.json")
    with atomic_write(path) as out:
        out.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
