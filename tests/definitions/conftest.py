"""Shared fixtures for the definition tests: sample manifests, the catalogs, reference data."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from placer.definitions import Catalog, Document, read_documents

SAMPLES = Path(__file__).parent / "samples"
REPO = Path(__file__).resolve().parents[2]
#: upstream's catalog, carried as test data (tests/data/workload-map/README.md)
UPSTREAM_CATALOG = REPO / "tests" / "data" / "workload-map" / "catalog"


def shared_reference() -> Path | None:
    """``$PLACER_SHARED/reference`` when set, else ``../shared/reference`` next to the checkout."""
    shared = os.environ.get("PLACER_SHARED")
    base = Path(shared) if shared else REPO.parent / "shared"
    reference = base / "reference"
    return reference if (reference / "karta-catalog").is_dir() else None


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.builtin()


@pytest.fixture(scope="session")
def upstream_catalog_dir() -> Path:
    return UPSTREAM_CATALOG


@pytest.fixture(scope="session")
def upstream_catalog() -> Catalog:
    """Upstream's 23 catalog definitions alone (no built-ins)."""
    return Catalog.load([UPSTREAM_CATALOG], builtin=False)


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
