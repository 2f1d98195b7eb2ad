"""Workloads from Kubernetes manifests: files, directories and multi-document YAML.

Each YAML (or JSON) document is one root object, decomposed into a
:class:`~placer.model.Workload` by the definition interpreter (``placer.definitions``). Files
of a directory are read in name order (recursively: ``*.yaml``, ``*.yml``, ``*.json``), documents
in file order, empty documents skipped, so the order — which ``online`` mode decides in — is
reproducible.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from placer.errors import InputError
from placer.model import Workload

__all__ = ["MANIFEST_SUFFIXES", "manifest_files", "read_manifests"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(path: Path) -> list[Path]:
    """The manifest files at ``path`` (a file, or a directory searched recursively)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
    if path.exists():
        return [path]
    raise InputError("no such file or directory", source=str(path))


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"not valid YAML{where}", source=str(path)) from None
    for index, document in enumerate(documents):
        where = str(path) if len(documents) == 1 else f"{path} (document {index + 1})"
        if not isinstance(document, dict):
            raise InputError("a manifest must be a mapping with apiVersion and kind", source=where)
        yield where, document


def read_manifests(path: Path) -> list[Workload]:
    """Every workload at ``path`` (see the module docstring).

    Raises:
        InputError: unreadable or malformed files, or no definition interpreter in this build.
    """
    files = manifest_files(path)
    if not files:
        return []
    try:
        definitions = importlib.import_module("placer.definitions")
    except ImportError:
        raise InputError(
            "workloads from manifests need the definition interpreter (placer.definitions), "
            "which this build does not have yet",
            source=str(path),
            hint="use a trace or generator spec (trace:openb:default, synthetic:gangs?count=50)",
        ) from None
    catalog = definitions.Catalog.builtin()
    workloads: list[Workload] = []
    for file in files:
        for _, document in _documents(file):
            workloads.append(definitions.decompose(document, catalog).workload)
    return workloads
