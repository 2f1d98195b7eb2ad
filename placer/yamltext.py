"""YAML text for plain data, fast, byte for byte what PyYAML writes.

Why: ``yaml.dump`` builds a representation node and an event per scalar in Python before its
emitter runs; a 16-cluster × 500-node snapshot has ~300,000 scalars and spent seconds there.
Snapshot data is simple — mappings and lists of short names, quantities, numbers and booleans —
so :func:`dump_plain` writes the text directly, exactly as
``yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)`` would (existing
snapshot files and generated example fleets keep their bytes):

* block style for collections holding collections, flow style (``{a: 1}``, ``[x, y]``) for
  collections of scalars, lists under a key not indented, flow collections wrapped the way
  PyYAML's emitter wraps them (a new line once the column passes the width after a comma);
* a string made of ``[A-Za-z0-9_./-]`` (not starting with ``.``, ``/`` or ``-``; commas too
  outside flow collections) that reads back as a string is written plain; one made of
  ``[A-Za-z0-9_./:+,-]`` that would read back as something else (``'8'``, ``'true'``,
  ``'2026-11-29T12:00:00Z'``) or holds a comma inside a flow collection is single-quoted; the
  empty string is ``''``.

Anything else — a string with spaces, quotes, non-ASCII or control characters, a float, a
non-string key, a list of lists — is not decided here: the whole document is then written by
PyYAML itself, so the result is always PyYAML's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["dump_plain"]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
#: commas are plain in block context only
_PLAIN_BLOCK = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./,-]*")
_QUOTED = re.compile(r"[A-Za-z0-9_.+-][A-Za-z0-9_./:+,-]*")
_STR_TAG = "tag:yaml.org,2002:str"
#: PyYAML's own implicit-tag rules (untyped in the stubs): which plain text stays a string.
_RESOLVER: Any = yaml.resolver.Resolver()
_INDENT = 2


class _NotSimpleError(Exception):
    """The data holds something this writer leaves to PyYAML."""


def dump_plain(data: object, *, width: int = 120) -> str:
    """``yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=width)``, faster."""
    if isinstance(data, Mapping) and data and not _is_leaf(data):
        lines: list[str] = []
        try:
            _block_mapping(data, 0, lines, width)
        except _NotSimpleError:
            pass
        else:
            return "\n".join(lines) + "\n"
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=width)
    return text


@functools.lru_cache(maxsize=65536)
def _string(value: str, flow: bool) -> str:
    if not value:
        return "''"
    if _PLAIN.fullmatch(value) or (not flow and _PLAIN_BLOCK.fullmatch(value)):
        if _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG:
            return value
        return f"'{value}'"
    if _QUOTED.fullmatch(value):
        # NB: commas may not be plain inside a flow collection; nothing else here needs quotes
        if "," in value or _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) != _STR_TAG:
            return f"'{value}'"
    raise _NotSimpleError(value)


def _scalar(value: object, flow: bool = True) -> str:
    if isinstance(value, str):
        return _string(value, flow)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    raise _NotSimpleError(type(value).__name__)


def _key(value: object, flow: bool = True) -> str:
    if not isinstance(value, str):
        raise _NotSimpleError("non-string key")
    return _string(value, flow)


def _is_leaf(value: object) -> bool:
    """A scalar, or a collection of scalars only (written in flow style)."""
    if isinstance(value, Mapping):
        return not any(isinstance(v, (Mapping, list)) for v in value.values())
    if isinstance(value, list):
        return not any(isinstance(v, (Mapping, list)) for v in value)
    return True


def _leaf(value: object, column: int, indent: int, width: int) -> str:
    """A scalar in block context, or a collection of scalars in flow style."""
    if isinstance(value, (Mapping, list)):
        return _flow(value, column, indent, width)
    return _scalar(value, flow=False)


def _flow(value: object, column: int, indent: int, width: int) -> str:
    """A leaf written from ``column`` on; continuation lines start at ``indent``."""
    if isinstance(value, Mapping):
        items = [f"{_key(k)}: {_scalar(v)}" for k, v in value.items()]
        opening, closing = "{", "}"
    elif isinstance(value, list):
        items = [_scalar(v) for v in value]
        opening, closing = "[", "]"
    else:
        return _scalar(value)
    parts = [opening]
    col = column + 1
    for index, item in enumerate(items):
        if index:
            parts.append(",")
            col += 1
        if col > width:  # PyYAML breaks the line once past the width, before the next item
            parts.append("\n" + " " * indent)
            col = indent
        elif index:
            parts.append(" ")
            col += 1
        parts.append(item)
        col += len(item)
    parts.append(closing)
    return "".join(parts)


def _block_mapping(
    data: Mapping[object, object], indent: int, lines: list[str], width: int
) -> None:
    pad = " " * indent
    for key, value in data.items():
        head = f"{pad}{_key(key, False)}:"
        if _is_leaf(value):
            lines.append(f"{head} {_leaf(value, len(head) + 1, indent + _INDENT, width)}")
        elif isinstance(value, Mapping):
            lines.append(head)
            _block_mapping(value, indent + _INDENT, lines, width)
        else:
            assert isinstance(value, list)
            lines.append(head)
            _block_sequence(value, indent, lines, width)


def _block_sequence(data: list[object], indent: int, lines: list[str], width: int) -> None:
    """A sequence under a mapping key: ``- item`` at the key's own indent (indentless)."""
    pad = " " * indent
    for item in data:
        if isinstance(item, Mapping) and not _is_leaf(item):
            first = len(lines)
            _block_mapping(item, indent + _INDENT, lines, width)
            lines[first] = f"{pad}- {lines[first][indent + _INDENT :]}"
        elif _is_leaf(item):
            lines.append(f"{pad}- {_leaf(item, indent + 2, indent + _INDENT, width)}")
        else:
            raise _NotSimpleError("list of lists")
