"""``placer describe -f FILE``: what a workload is made of, read through its definition.

For every object in FILE (``-`` = stdin; several YAML documents allowed): the component tree
with replicas and GPUs, the matched status (``Phase:``), the Resources table and the predicted
gangs, or (``-o json``) the stable JSON list documented in the README.

All objects are read first; if any cannot be described, every problem is printed and nothing
else (exit 4 when the first problem is a kind no definition covers, 2 for unparsable YAML, 1
otherwise). Rendering lives in :mod:`placer.definitions.view`, shared with the live mode.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from placer.cli._output import add_output_option, print_json
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.definitions import Decomposition, Document, decompose
from placer.definitions.documents import read_input
from placer.definitions.view import build_view, render_text, to_json
from placer.errors import InputError, PlacerError

__all__ = ["read_manifests", "register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "describe",
        help="show a workload's components, replicas, resources, status and gangs",
        description="Decompose the workloads in FILE with their definitions and show them.",
    )
    parser.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="FILE",
        help="workload manifests (YAML or JSON, several documents allowed; - reads stdin)",
    )
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def read_manifests(filename: str) -> list[Document]:
    """The documents of ``filename`` (``-`` = stdin); a directory is refused."""
    if filename != "-" and Path(filename).is_dir():
        raise InputError("is a directory; give a file (or - for stdin)", source=filename)
    return read_input(filename)


def run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args)
    documents = read_manifests(args.filename)
    if not documents:
        raise InputError("no objects found", source=args.filename)
    results: list[Decomposition] = []
    problems: list[PlacerError] = []
    for document in documents:
        try:
            results.append(decompose(document.data, catalog, source=document.source))
        except PlacerError as exc:
            problems.append(exc)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return problems[0].exit_code
    if args.output == "json":
        print_json([to_json(d) for d in results])
        return 0
    blocks = [render_text(build_view(d)) for d in results]
    sys.stdout.write("\n".join(blocks))
    return 0
