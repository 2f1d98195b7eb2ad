"""Typed reads of the documents users write (policies, snapshots, fleet files, definitions).

One decoder for every reader: each read takes a value parsed from YAML or JSON and the field path
it came from, checks its type, and returns it typed. Absent (``null``) is the same as missing.

* :func:`type_name` — how a wrong value is named in messages (``a list``, ``null``);
* :func:`whole_number_problem` — why a value is not a whole number, with what to write instead
  (a number in quotes, ``"3"``, is the usual slip: Kubernetes rejects it in an integer field);
* :class:`Decoder` — the reads, raising the reader's own :class:`~placer.errors.InputError`
  subclass at the first wrong value, naming the file (``source``) and the field path
  (``clusters[0].nodeGroups[2].ready``), with what to do where it is not obvious. The definitions
  loader collects every problem instead (:mod:`placer.definitions.loader`) and names the wrong
  types with :func:`type_name` as well.

Pure: no I/O, no globals.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from typing import Any, NoReturn

from placer.errors import InputError
from placer.quantity import resource_amount

__all__ = ["Decoder", "type_name", "whole_number_problem"]


def type_name(value: object) -> str:
    """``value``'s JSON type as messages name it: ``null``, ``a boolean``, ``a number``,
    ``a string``, ``a list``, ``a mapping``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def whole_number_problem(value: object) -> str | None:
    """Why ``value`` is not a whole number, with what to write instead when that is clear
    (``None``: it is one). For messages that name the field first: ``spec.parallelism`` +
    `` is the string '3', not a number: write 3 without quotes``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None
    if isinstance(value, str):
        if re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
            return f"is the string {value!r}, not a number: write {int(value)} without quotes"
        return f"is the string {value!r}, not a whole number"
    if isinstance(value, float):
        return f"is {value!r}, not a whole number"
    return f"is {type_name(value)}, not a whole number"


class Decoder:
    """Typed reads of one document from ``source``; a wrong value raises ``error`` naming
    ``source`` and its field path (see the module docstring)."""

    def __init__(self, error: type[InputError], source: str) -> None:
        self.error = error
        self.source = source

    def fail(self, field: str | None, message: str, *, hint: str | None = None) -> NoReturn:
        """Raise the reader's error for ``field``."""
        raise self.error(message, source=self.source, field=field, hint=hint)

    def header(self, data: Mapping[str, Any], api_version: str, kind: str) -> None:
        """``kind`` and ``apiVersion`` are the expected ones."""
        if data.get("kind") != kind:
            self.fail("kind", f"kind is {data.get('kind')!r}, expected {kind!r}")
        if data.get("apiVersion") != api_version:
            self.fail(
                "apiVersion", f"apiVersion is {data.get('apiVersion')!r}, expected {api_version!r}"
            )

    def mapping(
        self, value: object, field: str, *, message: str = "must be a mapping"
    ) -> Mapping[str, Any]:
        """A mapping (absent: empty)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(field, message)
        return value

    def entries(
        self, value: object, field: str, *, message: str = "must be a list"
    ) -> list[tuple[str, Any]]:
        """A list's items with their field paths (``field[i]``); absent: none."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(field, message)
        return [(f"{field}[{i}]", item) for i, item in enumerate(value)]

    def only(
        self,
        data: Mapping[str, Any],
        known: Collection[str],
        field: str,
        *,
        hint: str | None = None,
    ) -> None:
        """``data`` has no key but the ``known`` ones."""
        for key in data:
            if key not in known:
                at = f"{field}.{key}" if field else str(key)
                self.fail(at, f"unknown field {key!r}", hint=hint)

    def string(self, value: object, field: str, *, required: bool = False) -> str:
        """A non-empty string (absent and not ``required``: ``""``)."""
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value:
            self.fail(field, "must be a non-empty string")
        return value

    def flag(self, value: object, field: str, *, default: bool) -> bool:
        """``true`` or ``false`` (absent: ``default``)."""
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(field, "must be true or false")
        return value

    def count(self, value: object, field: str, *, maximum: int) -> int:
        """A whole number from 0 to ``maximum``."""
        problem = whole_number_problem(value)
        if problem is not None:
            self.fail(field, f"must be a whole number from 0 to {maximum:,}; it {problem}")
        assert isinstance(value, int)
        if not 0 <= value <= maximum:
            self.fail(field, f"must be a whole number from 0 to {maximum:,}, got {value!r}")
        return value

    def number(self, value: object, field: str, *, positive: bool = False, unit: str = "") -> float:
        """A finite number ``>= 0`` (``> 0`` when ``positive``); ``unit`` names it in messages
        (``seconds``)."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
            or (positive and value == 0)
        ):
            what = f"a positive number of {unit}" if positive else "a number >= 0"
            self.fail(field, f"must be {what}, got {value!r}")
        return float(value)

    def labels(self, value: object, field: str) -> dict[str, str]:
        """A ``{string: string}`` map (labels, attributes); numbers and booleans become their
        JSON text (``true``, ``4``)."""
        data = self.mapping(value, field, message="must be a mapping of strings")
        result: dict[str, str] = {}
        for key, item in data.items():
            if not isinstance(key, str) or isinstance(item, Mapping | list) or item is None:
                self.fail(field, f"entry {key!r} must map a string to a string")
            result[key] = item if isinstance(item, str) else json.dumps(item)
        return result

    def resources(self, value: object, field: str) -> dict[str, int]:
        """Resource quantities (``{cpu: "4", memory: 64Gi}``) in placer's integer units."""
        data = self.mapping(value, field, message="must be a mapping of resource quantities")
        result: dict[str, int] = {}
        for name, quantity in data.items():
            try:
                amount = resource_amount(str(name), quantity)
            except ValueError as exc:
                text = str(exc)
                self.fail(
                    f"{field}.{name}",
                    text
                    if "not a quantity" not in text
                    else f"{quantity!r} is not a Kubernetes quantity",
                    hint='write quantities like "4", "500m", "64Gi"',
                )
            result[str(name)] = amount
        return result
