"""Output helpers shared by subcommands: the ``-o`` option, JSON and YAML printing, simple
tables. Every command with ``-o json`` also has ``-o yaml``: the same document as YAML."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

__all__ = ["add_output_option", "print_data", "print_json", "print_table"]


def add_output_option(
    parser: argparse.ArgumentParser, choices: Sequence[str] = ("text", "json", "yaml")
) -> None:
    """Add ``-o/--output`` with ``choices`` (first one is the default)."""
    parser.add_argument(
        "-o",
        "--output",
        choices=list(choices),
        default=choices[0],
        help=f"output format (default {choices[0]})",
    )


def print_json(data: Any, out: TextIO | None = None) -> None:
    """Stable JSON: 2-space indent, keys in insertion order, trailing newline."""
    stream = out or sys.stdout
    json.dump(data, stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def print_data(data: Any, output: str, out: TextIO | None = None) -> None:
    """``data`` as ``-o json`` (:func:`print_json`) or ``-o yaml`` (block style, keys in
    insertion order, the same document)."""
    if output == "yaml":
        stream = out or sys.stdout
        yaml.safe_dump(data, stream, sort_keys=False, allow_unicode=True, default_flow_style=False)
        return
    print_json(data, out)


def print_table(
    rows: Sequence[Sequence[object]], out: TextIO | None = None, *, padding: int = 3
) -> None:
    """Left-aligned columns (first row is the header); trailing spaces trimmed."""
    stream = out or sys.stdout
    if not rows:
        return
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(len(cells[0]))]
    for row in cells:
        line = "".join(
            cell.ljust(widths[i] + padding) if i < len(row) - 1 else cell
            for i, cell in enumerate(row)
        )
        stream.write(line.rstrip() + "\n")
