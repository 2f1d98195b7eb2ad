"""YAML text for plain data (dicts, lists, str, int, bool, None), fast.

Why not ``yaml.dump``: PyYAML builds a representation node and an event object per scalar in
Python before its C emitter runs; a 16-cluster × 500-node snapshot has ~300,000 scalars and spent
seconds there. Snapshots are plain data of a known shape, so this writer emits text directly,
in the same layout as ``yaml.dump(..., sort_keys=False, default_flow_style=None)``: block style
for collections that contain collections, flow style (``{a: 1}``, ``[x, y]``) for collections
of scalars, long flow collections wrapped.

Correctness rule for strings: a string is written plain only when it is made of
``[A-Za-z0-9_./-]`` (no indicator, space or flow character can appear) *and* PyYAML's resolver
reads it back as a string (so ``"8"``, ``"true"``, ``"null"`` or ``"2026-11-29"`` are quoted);
anything else is single-quoted when all its characters are printable, and double-quoted with
``\\u``/``\\U`` escapes otherwise.
``yaml.safe_load(dump_plain(x)) == x`` for every plain ``x`` (tested).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

__all__ = ["dump_plain"]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_STR_TAG = "tag:yaml.org,2002:str"
#: PyYAML's own implicit-tag rules (untyped in the stubs): decides which plain text stays str.
_RESOLVER: Any = yaml.resolver.Resolver()


def dump_plain(data: object, *, width: int = 120) -> str:
    """YAML text for ``data`` (a mapping or sequence of plain values).

    Raises:
        TypeError: a value is not plain data (e.g. a float or an object).
    """
    lines: list[str] = []
    if _is_leaf(data):
        lines.append(_flow(data, 0, width))
    elif isinstance(data, Mapping):
        _block_mapping(data, 0, lines, width)
    else:
        assert isinstance(data, list)
        _block_sequence(data, 0, lines, width)
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=65536)
def _string(value: str) -> str:
    if _PLAIN.fullmatch(value) and (
        _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG
    ):
        return value
    if all(_printable(c) for c in value):
        return "'" + value.replace("'", "''") + "'"
    return '"' + "".join(_escaped(c) for c in value) + '"'


def _printable(char: str) -> bool:
    """Characters a single-quoted scalar may hold as they are (no line breaks, no tabs)."""
    return " " <= char <= "~" or (char >= "\xa0" and char.isprintable() and char != "\ufeff")


def _escaped(char: str) -> str:
    """One character inside a double-quoted scalar."""
    if char in '"\\':
        return "\\" + char
    if _printable(char):
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"not plain data for YAML: {type(value).__name__}")


def _is_leaf(value: object) -> bool:
    """A scalar, or a collection of scalars only (written in flow style)."""
    if isinstance(value, Mapping):
        return not any(isinstance(v, (Mapping, list)) for v in value.values())
    if isinstance(value, list):
        return not any(isinstance(v, (Mapping, list)) for v in value)
    return True


def _flow(value: object, indent: int, width: int) -> str:
    """A leaf in flow style; long collections wrap onto lines indented by ``indent + 2``."""
    if isinstance(value, Mapping):
        items = [f"{_scalar(k)}: {_scalar(v)}" for k, v in value.items()]
        opening, closing = "{", "}"
    elif isinstance(value, list):
        items = [_scalar(v) for v in value]
        opening, closing = "[", "]"
    else:
        return _scalar(value)
    text = opening + ", ".join(items) + closing
    if len(text) + indent <= width:
        return text
    pad = "\n" + " " * (indent + 2)
    out, line = [], opening
    for index, item in enumerate(items):
        piece = item + ("," if index < len(items) - 1 else closing)
        if len(line) + len(piece) + indent > width and line.strip(opening):
            out.append(line.rstrip())
            line = ""
        line += piece + " "
    out.append(line.rstrip())
    return pad.join(out)


def _block_mapping(
    data: Mapping[object, object], indent: int, lines: list[str], width: int
) -> None:
    pad = " " * indent
    for key, value in data.items():
        head = f"{pad}{_scalar(key)}:"
        _block_value(head, value, indent, lines, width)


def _block_sequence(data: Sequence[object], indent: int, lines: list[str], width: int) -> None:
    pad = " " * indent
    for item in data:
        if isinstance(item, Mapping) and not _is_leaf(item):
            first = len(lines)
            _block_mapping(item, indent + 2, lines, width)
            lines[first] = f"{pad}- {lines[first][indent + 2 :]}"
        elif _is_leaf(item):
            lines.append(f"{pad}- {_flow(item, indent, width)}")
        else:
            assert isinstance(item, list)
            lines.append(f"{pad}-")
            _block_sequence(item, indent + 2, lines, width)


def _block_value(head: str, value: object, indent: int, lines: list[str], width: int) -> None:
    if _is_leaf(value):
        lines.append(f"{head} {_flow(value, indent, width)}")
    elif isinstance(value, Mapping):
        lines.append(head)
        _block_mapping(value, indent + 2, lines, width)
    else:
        assert isinstance(value, list)
        lines.append(head)
        _block_sequence(value, indent, lines, width)
