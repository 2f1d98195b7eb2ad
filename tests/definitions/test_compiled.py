"""The compiled catalog (placer.definitions.compiled): the same definitions as reading the files,
a changed file or changed code is never served from a stale entry, and a cache that cannot be
written or is not trusted is no cache."""

from __future__ import annotations

import json
import os
import pickle
import stat
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import placer.definitions.compiled as compiled
import placer.definitions.jq as jq
from placer.cli import main
from placer.definitions import Catalog
from placer.definitions.catalog import builtin_catalog_dir
from placer.definitions.compiled import cache_dir, load_validated
from placer.definitions.loader import load_definitions
from placer.definitions.model import Definition
from placer.definitions.validate import check_definition
from placer.errors import DefinitionError

GIZMO = """\
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {{name: gizmos}}
spec:
  structureDefinition:
    rootComponent:
      name: gizmo
      kind: {{group: example.com, version: v1, kind: Gizmo}}
      specDefinition: {{podSpecPath: .spec.pod}}
      scaleDefinition: {{replicasPath: {replicas}}}
      statusDefinition: {{statusMappings: {{}}}}
"""

MANIFEST = """\
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g, namespace: lab}
spec:
  count: 2
  copies: 3
  pod: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]}
"""


def contents(definitions: list[Definition]) -> list[tuple[object, ...]]:
    """What each definition holds (a Definition compares by identity)."""
    return [tuple(getattr(d, f.name) for f in fields(d)) for d in definitions]


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("catalog-*.pickle"))


def test_an_entry_gives_the_definitions_the_files_give(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fresh = [check_definition(d) for d in load_definitions(builtin_catalog_dir(), origin="catalog")]
    first = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    (entry,) = entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert contents(first) == contents(fresh)
    second = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    assert contents(second) == contents(fresh)
    assert entries(cache) == [entry]


def test_the_second_load_reads_the_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    expected = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    monkeypatch.setattr(compiled, "parse_documents", _refuse)
    again = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    assert contents(again) == contents(expected)
    with pytest.raises(AssertionError, match="decoded"):  # without a cache the files are read
        load_validated(builtin_catalog_dir(), origin="catalog", cache=None)


def test_an_entry_keeps_the_analysis_and_parses_trees_on_demand(tmp_path: Path) -> None:
    """An entry holds each jq program's analysis but not its syntax tree (the bulk of the
    entry's loading time); the tree is parsed again when asked for, and is the same."""
    cache = tmp_path / "cache"
    load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    (entry,) = entries(cache)
    _, programs = pickle.loads(entry.read_bytes())
    assert programs and all(p._tree is None for p in programs)
    for program in programs[:40]:
        fresh = jq._analyse.__wrapped__(program.text)
        assert (program.risk, program.runnable, program.isolation, program.bound) == (
            fresh.risk,
            fresh.runnable,
            fresh.isolation,
            fresh.bound,
        )
        assert program.tree == fresh.tree


def _refuse(*_: Any, **__: Any) -> Any:
    raise AssertionError("the files were decoded, not read from the cache")


def test_a_changed_definition_file_is_read_again(tmp_path: Path) -> None:
    cache, defs = tmp_path / "cache", tmp_path / "defs"
    defs.mkdir()
    (defs / "gizmo.yaml").write_text(GIZMO.format(replicas=".spec.count"))
    (before,) = load_validated(defs, origin="file", cache=cache)
    assert before.root.scale is not None and before.root.scale.replicas_path == ".spec.count"
    # same size, same mtime: only the content tells them apart
    mtime = (defs / "gizmo.yaml").stat().st_mtime_ns
    (defs / "gizmo.yaml").write_text(GIZMO.format(replicas=".spec.copy"))
    os.utime(defs / "gizmo.yaml", ns=(mtime, mtime))
    (after,) = load_validated(defs, origin="file", cache=cache)
    assert after.root.scale is not None and after.root.scale.replicas_path == ".spec.copy"
    assert len(entries(cache)) == 2
    # a file added to the directory counts too
    (defs / "other.yaml").write_text(
        GIZMO.format(replicas=".spec.count")
        .replace("name: gizmos", "name: widgets")
        .replace("Gizmo", "Widget")
    )
    assert len(load_validated(defs, origin="file", cache=cache)) == 2


def test_changed_code_is_another_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    monkeypatch.setattr(compiled, "_code_fingerprint", lambda: "another placer")
    load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    assert len(entries(cache)) == 2


def test_an_invalid_file_is_reported_and_not_cached(tmp_path: Path) -> None:
    cache, defs = tmp_path / "cache", tmp_path / "defs"
    defs.mkdir()
    (defs / "gizmo.yaml").write_text(GIZMO.format(replicas="'.spec[' "))
    for _ in range(2):
        with pytest.raises(DefinitionError, match=r"gizmo\.yaml"):
            load_validated(defs, origin="file", cache=cache)
    assert entries(cache) == []


def test_a_damaged_entry_is_no_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expected = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    (entry,) = entries(cache)
    entry.write_bytes(b"not a pickle")
    again = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    assert contents(again) == contents(expected)
    assert entry.read_bytes() != b"not a pickle"  # written again


def test_an_entry_others_can_write_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    (entry,) = entries(cache)
    monkeypatch.setattr(compiled, "parse_documents", _refuse)
    entry.chmod(0o666)
    with pytest.raises(AssertionError, match="decoded"):
        load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    entry.chmod(0o600)
    cache.chmod(0o777)
    with pytest.raises(AssertionError, match="decoded"):
        load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_location_is_no_cache(tmp_path: Path) -> None:
    locked = tmp_path / "install"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        for cache in (locked, locked / "placer"):
            definitions = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
            assert len(definitions) == len(Catalog.builtin().definitions)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_a_cache_path_that_cannot_be_a_directory_is_no_cache(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    for cache in (tmp_path / "file", tmp_path / "file" / "placer"):
        definitions = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
        assert len(definitions) == len(Catalog.builtin().definitions)
    assert (tmp_path / "file").read_text() == "in the way"


def test_where_the_cache_lives() -> None:
    assert cache_dir({"PLACER_CACHE_DIR": "/c", "HOME": "/h"}) == Path("/c")
    assert cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/placer")
    assert cache_dir({"HOME": "/h"}) == Path("/h/.cache/placer")
    assert cache_dir({"PLACER_CACHE": "off", "PLACER_CACHE_DIR": "/c"}) is None
    assert cache_dir({}) is None


def test_the_cli_sees_an_edited_user_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, defs, manifest = tmp_path / "cache", tmp_path / "defs", tmp_path / "g.yaml"
    monkeypatch.setenv("PLACER_CACHE_DIR", str(cache))
    defs.mkdir()
    manifest.write_text(MANIFEST)
    argv = ["describe", "-f", str(manifest), "--catalog", str(defs), "-o", "json"]
    totals = []
    for replicas in (".spec.count", ".spec.copies", ".spec.count"):
        (defs / "gizmo.yaml").write_text(GIZMO.format(replicas=replicas))
        assert main(argv) == 0
        (item,) = json.loads(capsys.readouterr().out)
        totals.append(item["total"]["nvidia.com/gpu"])
    assert totals == [4, 6, 4]
    assert len(entries(cache)) == 3  # the built-in catalog and the user's two versions
