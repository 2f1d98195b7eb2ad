"""Label and field selectors, parsed and matched as kube-apiserver does.

Label selectors support the full string syntax of ``labels.Parse``: ``k``, ``!k``, ``k=v``,
``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k>1`` and ``k<1``; keys and values are
validated, and a malformed selector is a 400 BadRequest. Field selectors support ``=``, ``==``
and ``!=`` on the field labels the resource type really supports (``metadata.name``,
``metadata.namespace`` plus the type's own, e.g. ``spec.nodeName`` and ``status.phase`` for pods);
any other label is a 400 ``field label not supported``, so client code that relies on a field the
real server would refuse fails here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.testing._resources import ResourceType
from placer.testing._status import StatusError

__all__ = ["FieldSelector", "LabelSelector"]

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|<|>|[^\s!=(),<>]+)")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (qualified name), or ``None``."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "prefix part must be non-empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return (
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.'"
        )
    if not name or len(name) > 63 or not _NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (at most 63 characters)"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or ``None``."""
    if value == "":
        return None
    if len(value) > 63 or not _NAME.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (at most 63 "
            "characters)"
        )
    return None


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # exists, !exists, in, notin, gt, lt
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op == "in":
            return has and labels[self.key] in self.values
        if self.op == "notin":
            return not has or labels[self.key] not in self.values
        if not has:
            return False
        try:
            left, right = int(labels[self.key]), int(next(iter(self.values)))
        except ValueError:
            return False
        return left > right if self.op == "gt" else left < right


class LabelSelector:
    """A parsed ``labelSelector``; ``LabelSelector("")`` matches everything.

    Raises:
        StatusError: 400 BadRequest when the text does not parse or a key/value is invalid.
    """

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self._requirements = self._parse(self.text)

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self._requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        labels = labels or {}
        return all(r.matches(labels) for r in self._requirements)

    @staticmethod
    def _fail(message: str) -> StatusError:
        return StatusError(400, f"unable to parse requirement: {message}")

    def _parse(self, text: str) -> tuple[_Requirement, ...]:
        tokens: list[str] = []
        pos = 0
        stripped = text.strip()
        while pos < len(stripped):
            m = _TOKEN.match(stripped, pos)
            if not m:  # pragma: no cover - the token pattern matches any non-space run
                raise self._fail(f"unexpected character at {pos}")
            tokens.append(m.group(1))
            pos = m.end()
        reqs: list[_Requirement] = []
        i = 0

        def take() -> str:
            nonlocal i
            if i >= len(tokens):
                raise self._fail("unexpected end of selector")
            i += 1
            return tokens[i - 1]

        while i < len(tokens):
            tok = take()
            if tok == "!":
                key = take()
                reqs.append(self._req(key, "!exists", ()))
            elif tok in {"=", "==", "!=", "(", ")", ",", "<", ">"}:
                raise self._fail(f"found '{tok}', expected: !, identifier, or 'end of string'")
            else:
                key = tok
                nxt = tokens[i] if i < len(tokens) else ","
                if nxt == ",":
                    reqs.append(self._req(key, "exists", ()))
                elif nxt in {"=", "==", "!="}:
                    i += 1
                    value = tokens[i] if i < len(tokens) and tokens[i] != "," else ""
                    if value:
                        i += 1
                    reqs.append(self._req(key, "notin" if nxt == "!=" else "in", (value,)))
                elif nxt in {"<", ">"}:
                    i += 1
                    value = take()
                    if not value.lstrip("-").isdigit():
                        raise self._fail(
                            f"for 'Gt', 'Lt' operators, the value must be an integer: {value}"
                        )
                    reqs.append(self._req(key, "gt" if nxt == ">" else "lt", (value,)))
                elif nxt in {"in", "notin"}:
                    i += 1
                    if take() != "(":
                        raise self._fail("found '', expected: '('")
                    values: list[str] = []
                    while True:
                        tok = take()
                        if tok == ")":
                            break
                        if tok == ",":
                            continue
                        values.append(tok)
                    if not values:
                        raise self._fail(
                            f"for 'in', 'notin' operators, values set can't be empty: {key}"
                        )
                    reqs.append(self._req(key, nxt, tuple(values)))
                else:
                    raise self._fail(f"found '{nxt}', expected: in, notin, =, ==, !=, gt, lt")
            if i < len(tokens):
                if tokens[i] != ",":
                    raise self._fail(f"found '{tokens[i]}', expected: ',' or 'end of string'")
                i += 1
                if i == len(tokens):
                    raise self._fail("found '', expected: !, identifier, or 'end of string'")
        return tuple(reqs)

    def _req(self, key: str, op: str, values: tuple[str, ...]) -> _Requirement:
        problem = label_key_problem(key)
        if problem:
            raise self._fail(f'key: Invalid value: "{key}": {problem}')
        if op not in {"gt", "lt"}:
            for value in values:
                problem = label_value_problem(value)
                if problem:
                    raise self._fail(f'values[0][{key}]: Invalid value: "{value}": {problem}')
        return _Requirement(key, op, frozenset(values))


def _field_value(obj: Mapping[str, Any], label: str) -> str:
    path = "source.component" if label == "source" else label
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


class FieldSelector:
    """A parsed ``fieldSelector`` for one resource type.

    Raises:
        StatusError: 400 BadRequest for a malformed term or a field label the type does not
            support (``field label not supported: spec.foo``).
    """

    def __init__(self, text: str | None, rt: ResourceType) -> None:
        self.text = text or ""
        allowed = {"metadata.name", "metadata.namespace", *rt.field_labels}
        terms: list[tuple[str, bool, str]] = []
        for raw in re.split(r"(?<!\\),", self.text):
            term = raw.strip()
            if not term:
                continue
            m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", term)
            if not m:
                raise StatusError(
                    400, f"invalid selector: '{self.text}'; can't understand '{term}'"
                )
            label, op, value = m.group(1).strip(), m.group(2), _unescape(m.group(3).strip())
            if label not in allowed:
                raise StatusError(400, f"field label not supported: {label}")
            terms.append((label, op != "!=", value))
        self._terms = tuple(terms)

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self._terms

    def exact_name(self) -> str | None:
        """The name when the selector pins ``metadata.name=X`` (a fast path), else ``None``."""
        for label, positive, value in self._terms:
            if label == "metadata.name" and positive:
                return value
        return None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is selected."""
        for label, positive, value in self._terms:
            if (_field_value(obj, label) == value) != positive:
                return False
        return True
