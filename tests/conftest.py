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


@pytest.fixture
def shared():
    """The ../shared folder (fixtures, corpora); skips when it is absent."""
    return shared_path()
