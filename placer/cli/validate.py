"""``placer validate FILE...``: check Workload Map definitions before using them.

Static, no cluster. Every definition in every file (several YAML documents allowed, ``-`` reads
stdin) is decoded and validated with upstream's rules plus placer's (see
:mod:`placer.definitions.validate`); every problem is printed, indented under ``INVALID:``.
Exit 0 when all are valid, 1 when any is not (or a document is not a definition), 2 when a file
is not YAML at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from placer.definitions import validate_definition
from placer.definitions.documents import Document, read_input, yaml_files
from placer.definitions.loader import definition_from_dict
from placer.errors import (
    EXIT_ERROR,
    EXIT_OK,
    DefinitionError,
    DefinitionInvalidError,
    PlacerError,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check Workload Map (Karta) definition files",
        description="Validate Workload Map definitions (Karta or ResourceInterface documents).",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="definition files or directories (- = stdin)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    code = EXIT_OK
    for name in _files(args.files):
        try:
            documents = read_input(name)
        except PlacerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = max(code, exc.exit_code)
            continue
        if not documents:
            print(f"INVALID: {name}\n  no documents found")
            code = max(code, EXIT_ERROR)
            continue
        for document in documents:
            problems = _check(document)
            if not problems:
                definition = definition_from_dict(document.data, source=document.source)
                print(
                    f"OK: {document.source} is a valid definition "
                    f"({definition.name}: {definition.target})"
                )
                continue
            code = max(code, EXIT_ERROR)
            print(f"INVALID: {document.source}")
            for problem in problems:
                print(f"  {problem}")
            print(f"error: {len(problems)} finding(s) in {document.source}", file=sys.stderr)
    return code


def _files(names: list[str]) -> list[str]:
    """The files to check: each directory's YAML/JSON files one by one (recursively, sorted),
    so that one malformed file does not hide what the others say."""
    files: list[str] = []
    for name in names:
        path = Path(name)
        found = yaml_files(path) if name != "-" and path.is_dir() else []
        files.extend([str(f) for f in found] or [name])
    return files


def _check(document: Document) -> list[str]:
    try:
        definition = definition_from_dict(document.data, source=document.source)
    except DefinitionInvalidError as exc:
        return list(exc.problems)
    except DefinitionError as exc:
        return [str(exc).removeprefix(f"{document.source}: ")]
    return validate_definition(definition)
