"""Shared fixtures for the definition tests: sample manifests, the catalogs, reference data."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from placer.definitions import Catalog, Document, read_documents

SAMPLES = Path(__file__).parent / "samples"
REPO = Path(__file__).resolve().parents[2]


def shared_reference() -> Path | None:
    """``../shared/reference`` next to the repository (or ``$PLACER_SHARED/reference``)."""
    candidates = []
    if os.environ.get("PLACER_SHARED"):
        candidates.append(Path(os.environ["PLACER_SHARED"]) / "reference")
    candidates += [REPO.parent / "shared" / "reference", Path("/work/shared/reference")]
    for candidate in candidates:
        if (candidate / "karta-catalog").is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.builtin()


@pytest.fixture(scope="session")
def reference() -> Path:
    path = shared_reference()
    if path is None:
        pytest.skip("reference data (../shared/reference) is not available")
    return path


def _sample(name: str) -> list[Document]:
    return read_documents(SAMPLES / f"{name}.yaml")


@pytest.fixture(scope="session")
def sample() -> Callable[[str], list[Document]]:
    """``sample(name)``: the documents of ``samples/<name>.yaml``."""
    return _sample


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
