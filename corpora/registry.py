"""Real corpora by name: where every file is downloaded from, its checksum, and the splits.

A corpus name is ``FAMILY-SRC-TGT``: the same files serve both directions, the name only
says which language is the source. Checksums and sizes are pinned so that a fetch is
reproducible and a changed, truncated or damaged file is refused instead of silently used.
"""

from __future__ import annotations

from dataclasses import dataclass

from minismt.errors import InputError

SPLITS = ("train", "dev", "test", "test2017")

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"

# File name -> (sha256, bytes) of multi30k/dataset data/task1/raw/ on master.
_MULTI30K_FILES = {
    "train.de.gz": ("726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", 637044),
    "train.en.gz": ("d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", 568929),
    "train.fr.gz": ("622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c", 604242),
    "val.de.gz": ("f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", 24681),
    "val.en.gz": ("14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", 21650),
    "val.fr.gz": ("ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9", 23001),
    "test_2016_flickr.de.gz": ("9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", 22890),
    "test_2016_flickr.en.gz": ("611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", 21077),
    "test_2016_flickr.fr.gz": ("6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90", 22310),
    "test_2017_flickr.de.gz": ("a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee", 21471),
    "test_2017_flickr.en.gz": ("76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074", 19138),
    "test_2017_flickr.fr.gz": ("3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496", 20434),
}

# Split -> (file stem in the repository, lines).
_MULTI30K_SPLITS = {
    "train": ("train", 29000),
    "dev": ("val", 1014),
    "test": ("test_2016_flickr", 1000),
    "test2017": ("test_2017_flickr", 1000),
}

_LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French"}


@dataclass(frozen=True)
class RemoteFile:
    """One downloadable file: its local name, public address, sha256 and size in bytes."""

    name: str
    url: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Split:
    """The two line-aligned files of one split and their number of lines."""

    src: RemoteFile
    tgt: RemoteFile
    lines: int


@dataclass(frozen=True)
class CorpusSpec:
    """A named corpus: languages, a one-line description and its splits (train, dev, test, ...)."""

    name: str
    source: str
    target: str
    description: str
    splits: dict[str, Split]

    def files(self) -> list[RemoteFile]:
        """Every file the corpus needs, each once, in split order."""
        seen: dict[str, RemoteFile] = {}
        for split in self.splits.values():
            for remote in (split.src, split.tgt):
                seen.setdefault(remote.name, remote)
        return list(seen.values())

    def download_size(self) -> int:
        return sum(remote.size for remote in self.files())


def _multi30k_file(stem: str, lang: str) -> RemoteFile:
    name = f"{stem}.{lang}.gz"
    sha256, size = _MULTI30K_FILES[name]
    return RemoteFile(name, MULTI30K_URL + name, sha256, size)


def _multi30k(source: str, target: str) -> CorpusSpec:
    splits = {split: Split(_multi30k_file(stem, source), _multi30k_file(stem, target), lines)
              for split, (stem, lines) in _MULTI30K_SPLITS.items()}
    description = (f"Multi30k task 1 image captions, {_LANGUAGE_NAMES[source]} -> "
                   f"{_LANGUAGE_NAMES[target]} (dev = val, test = test_2016_flickr)")
    return CorpusSpec(f"multi30k-{source}-{target}", source, target, description, splits)


CORPORA: dict[str, CorpusSpec] = {
    spec.name: spec for spec in (
        _multi30k("de", "en"), _multi30k("en", "de"),
        _multi30k("fr", "en"), _multi30k("en", "fr"),
        _multi30k("de", "fr"), _multi30k("fr", "de"),
    )
}


def names() -> list[str]:
    """The registered corpus names, sorted."""
    return sorted(CORPORA)


def get(name: str) -> CorpusSpec:
    """The corpus called ``name``; an unknown name is an InputError listing the known ones."""
    spec = CORPORA.get(name)
    if spec is None:
        raise InputError(f"unknown corpus {name!r}", expected="one of " + ", ".join(names()))
    return spec
