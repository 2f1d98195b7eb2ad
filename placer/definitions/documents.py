"""Reading YAML/JSON documents the way Kubernetes tools do, with errors that point at the line.

Used for definitions and for workload manifests. Two Kubernetes habits are kept:

* multi-document streams (``---``); empty documents are skipped; ``kind: List`` (and
  ``KartaList``...) items are unpacked;
* timestamps stay text: PyYAML would turn ``2024-05-01T10:00:00Z`` into a ``datetime``, while
  Kubernetes' YAML-to-JSON conversion keeps the string. Everything else follows YAML 1.1 as
  Kubernetes' own YAML library does.

Reading goes through :mod:`placer.yamlload`: files and standard input are bounded in size and
must be UTF-8, YAML aliases and nesting are bounded (an alias bomb is refused, never expanded).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from placer.accelerators import ClaimIndex, is_claim_object
from placer.errors import InputError, MalformedYamlError
from placer.yamlload import SafeLoader, read_stream, read_text, yaml_problem

__all__ = [
    "DEPENDENCY_KINDS",
    "Document",
    "MalformedYamlError",
    "is_dependency",
    "parse_documents",
    "partition_claims",
    "read_documents",
    "read_input",
    "yaml_files",
]


class _Loader(SafeLoader):
    """Bounded safe loader (:mod:`placer.yamlload`) that leaves timestamps as strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in SafeLoader.yaml_implicit_resolvers.items()
}

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Document:
    """One document of a file: its data and where it came from (``file`` or ``file#2``)."""

    data: Any
    source: str
    #: 1-based position of the document in its stream.
    index: int = 1


def parse_documents(text: str, source: str) -> list[Document]:
    """Split ``text`` into documents; raises :class:`InputError` with the line on bad YAML."""
    try:
        raw = list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        refused = yaml_problem(exc).startswith("refused")
        raise MalformedYamlError(
            yaml_problem(exc),
            source=source,
            hint="write the values out instead of repeating aliases, and nest less deeply"
            if refused
            else "fix the YAML syntax (indentation, quotes, ':' separators)",
        ) from None
    except yaml.YAMLError as exc:
        raise MalformedYamlError(f"not valid YAML: {exc}", source=source) from None
    documents: list[Document] = []
    position = 0
    for data in raw:
        position += 1
        if data is None:
            continue
        where = source if len(raw) == 1 else f"{source}#{position}"
        if _is_list(data):
            for item in data.get("items") or []:
                documents.append(Document(item, where, position))
            continue
        documents.append(Document(data, where, position))
    return documents


def _is_list(data: Any) -> bool:
    if not isinstance(data, Mapping):
        return False
    kind = data.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(data.get("items"), list)


def yaml_files(path: Path) -> list[Path]:
    """``path`` itself, or the YAML/JSON files under the directory ``path`` (sorted, recursive)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
    return [path]


def read_documents(path: Path) -> list[Document]:
    """All documents of a file or of every YAML/JSON file under a directory."""
    if not path.exists():
        raise InputError("no such file or directory", source=str(path))
    documents: list[Document] = []
    for file in yaml_files(path):
        documents.extend(parse_documents(read_text(file), str(file)))
    return documents


def read_input(name: str, stdin: TextIO | None = None) -> list[Document]:
    """The documents of a command-line argument: a file, a directory, or ``-`` for ``stdin``."""
    if name == "-":
        stream = stdin if stdin is not None else sys.stdin
        return parse_documents(read_stream(stream, "<stdin>"), "<stdin>")
    return read_documents(Path(name))


#: the kinds of objects that travel with the workloads naming them (all ``v1``; see
#: :mod:`placer.dispatch.dependencies`): input documents, not workloads.
DEPENDENCY_KINDS = ("ConfigMap", "Secret", "ServiceAccount", "Service", "PersistentVolumeClaim")


def is_dependency(obj: object) -> bool:
    """Whether an input document is an object that travels with the workloads naming it (a
    document that is no mapping is not: reading it as a workload names the problem)."""
    return (
        isinstance(obj, Mapping)
        and obj.get("apiVersion") == "v1"
        and obj.get("kind") in DEPENDENCY_KINDS
    )


def partition_claims(documents: Sequence[Document]) -> tuple[ClaimIndex, list[Document]]:
    """The DRA claims among ``documents`` (ResourceClaims and ResourceClaimTemplates, which pods
    name in ``resourceClaims``) indexed, and the other documents in order (the workloads).

    Raises :class:`~placer.errors.InterpretationError` naming a malformed claim document.
    """
    claims = ClaimIndex()
    rest: list[Document] = []
    for document in documents:
        if is_claim_object(document.data):
            claims.add(document.data, source=document.source)
        else:
            rest.append(document)
    return claims, rest
