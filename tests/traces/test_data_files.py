"""The carried trace files (placer's, and the benchmarks' own): present, intact (checksums in
their READMEs), same as the sources."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from placer.traces.datasets import DATA_DIR
from simulations.datasets import DATA_DIR as BENCHMARK_DATA_DIR

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
#: placer.traces' package data, and the files only the benchmarks read.
DATA_DIRS = [DATA_DIR, BENCHMARK_DATA_DIR]


def _listed(data_dir: Path) -> list[tuple[Path, str]]:
    """(carried file, sha256 of its uncompressed bytes) from every folder README."""
    entries = []
    for readme in sorted(data_dir.glob("*/README.md")):
        for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme.read_text(), re.M):
            path = readme.parent / name
            entries.append((path if path.exists() else path.with_name(path.name + ".gz"), digest))
    return entries


def _content(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


@pytest.mark.parametrize("data_dir", DATA_DIRS, ids=["placer", "simulations"])
def test_every_carried_data_file_is_listed_with_its_checksum(data_dir: Path) -> None:
    listed = _listed(data_dir)
    carried = {p for p in data_dir.rglob("*.csv*")}
    assert {p for p, _ in listed} == carried
    for path, digest in listed:
        assert hashlib.sha256(_content(path)).hexdigest() == digest, path
    for folder in data_dir.iterdir():
        if folder.is_dir():
            text = (folder / "README.md").read_text()
            assert "License" in text and "cite" in text.lower(), folder


@pytest.mark.shared
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not available")
@pytest.mark.parametrize("data_dir", DATA_DIRS, ids=["placer", "simulations"])
def test_carried_files_are_byte_identical_to_the_shared_copies(data_dir: Path) -> None:
    for path, _ in _listed(data_dir):
        # same layout, except that the task lists sit in pods/ here, gzip-compressed
        relative = path.relative_to(data_dir).as_posix().replace("/pods/", "/")
        source = SHARED / relative.removesuffix(".gz")
        assert _content(path) == source.read_bytes(), path
