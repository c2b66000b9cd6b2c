"""Shared test helpers: the real Moses/cdec fixtures and corpora in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def shared_path(*parts: str) -> Path:
    """Path of a file under ../shared; skips the test with a reason when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the real Moses/cdec fixtures and corpora live in ../shared "
                    "next to the repository")
    return path


@pytest.fixture(scope="session")
def moses_system(tmp_path_factory) -> tuple[Path, Path]:
    """A small synthetic model for the tests that run the real Moses on it (1,000 pairs, 20 dev sentences),
    trained once per test session: ``(data folder, model folder)``; its model folder holds moses.ini."""
    return synthetic_system(tmp_path_factory, n_pairs=1000, seed=3, dev=20, test=5)


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory) -> Path:
    """A synthetic corpus of 3,000 training pairs (seed 11) with its dev and test sets, made once."""
    from corpora.synthetic import write_synthetic
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, n_pairs=3000, seed=11)
    return folder


@pytest.fixture(scope="session")
def hiero_system(synthetic_corpus, tmp_path_factory) -> tuple[Path, Path]:
    """``minismt train --hiero`` on :func:`synthetic_corpus` with grammars for its dev and test sets
    (3-gram LM), trained once: ``(data folder, model folder)``."""
    from minismt.cli import main
    model = tmp_path_factory.mktemp("hiero") / "model"
    assert main(["train", "--src", str(synthetic_corpus / "train.src"), "--tgt",
                 str(synthetic_corpus / "train.tgt"), "--out", str(model), "--lm-order", "3", "--hiero",
                 "--grammar-for", str(synthetic_corpus / "dev.src"), "--grammar-for",
                 str(synthetic_corpus / "test.src"), "--quiet"]) == 0
    return synthetic_corpus, model


@pytest.fixture
def shared():
    """The ../shared folder (fixtures, corpora); skips when it is absent."""
    return shared_path()


def synthetic_system(tmp_path_factory, *, n_pairs: int, seed: int, dev: int, test: int) -> tuple[Path, Path]:
    """A synthetic corpus (train/dev/test) and a phrase-based model trained on it with a 3-gram LM:
    ``(data folder, model folder)``, for the tests that decode or tune a small real system."""
    from corpora.synthetic import write_synthetic
    from minismt.train import Trainer, TrainingConfig
    data = tmp_path_factory.mktemp("data")
    write_synthetic(data, n_pairs=n_pairs, seed=seed, dev=dev, test=test)
    model = tmp_path_factory.mktemp("model")
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                           lm_order=3, progress=False)).run()
    return data, model
