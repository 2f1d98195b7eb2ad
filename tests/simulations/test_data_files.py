"""The carried trace files: present, intact (checksums in their READMEs), same as the sources."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from simulations.datasets import DATA_DIR

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def _listed() -> list[tuple[Path, str]]:
    """(carried file, sha256 of its uncompressed bytes) from every folder README."""
    entries = []
    for readme in sorted(DATA_DIR.glob("*/README.md")):
        for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme.read_text(), re.M):
            path = readme.parent / name
            entries.append((path if path.exists() else path.with_name(path.name + ".gz"), digest))
    return entries


def _content(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def test_every_carried_data_file_is_listed_with_its_checksum() -> None:
    listed = _listed()
    carried = {p for p in DATA_DIR.rglob("*.csv*")}
    assert {p for p, _ in listed} == carried
    for path, digest in listed:
        assert hashlib.sha256(_content(path)).hexdigest() == digest, path
    for folder in DATA_DIR.iterdir():
        if folder.is_dir():
            text = (folder / "README.md").read_text()
            assert "License" in text and "cite" in text.lower(), folder


@pytest.mark.shared
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not available")
def test_carried_files_are_byte_identical_to_the_shared_copies() -> None:
    for path, _ in _listed():
        # same layout, except that the task lists sit in pods/ here, gzip-compressed
        relative = path.relative_to(DATA_DIR).as_posix().replace("/pods/", "/")
        source = SHARED / relative.removesuffix(".gz")
        assert _content(path) == source.read_bytes(), path
