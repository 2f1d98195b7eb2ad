"""Reading YAML that users give placer: safe tags only, aliases and nesting bounded.

Every YAML reader of user input goes through here: manifests and definitions
(:mod:`placer.definitions.documents`), snapshots, fleet files, policies and kubeconfigs.

Why bounds: YAML aliases share one node many times over. A 642-byte document of nine anchors,
each a list of nine aliases to the previous one (a "billion laughs"), is a billion strings once
expanded; PyYAML builds it cheaply as shared references, but anything that then walks the data
(normalising it for jq, writing JSON, copying it) expands it and exhausts memory. A recursive
alias (``&a [*a]``) makes an endless structure. Before a document is built, its node graph is
measured in linear time: refused when aliases would add more than :data:`MAX_ALIAS_VALUES`
values, when an alias refers to an enclosing node, or when it nests deeper than
:data:`MAX_DEPTH` levels (placer's own readers walk the data recursively). Ordinary anchors
(``<<: *defaults``) stay well within.

libyaml's C parser is used when PyYAML has it (many times faster on large files).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any, TextIO

import yaml

from placer.errors import EXIT_USAGE, InputError

__all__ = [
    "MAX_ALIAS_VALUES",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "SafeLoader",
    "YamlLimitError",
    "load",
    "load_all",
    "parse_yaml",
    "read_stream",
    "read_text",
    "read_yaml_file",
]

#: Values that alias expansion may add to a document at most.
MAX_ALIAS_VALUES = 100_000
#: Deepest nesting of collections accepted (Kubernetes objects nest some 20 levels).
MAX_DEPTH = 200
#: Largest file (or standard input) read (``/dev/zero`` or a wrong path must not fill memory).
MAX_FILE_BYTES = 64 << 20

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlLimitError(yaml.MarkedYAMLError):
    """The document is well-formed YAML but exceeds a bound (aliases, recursion, nesting)."""


class SafeLoader(_Base):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's when available) that measures a document before building
    it (see the module docstring)."""

    def construct_document(self, node: yaml.Node) -> Any:
        check_node(node)
        return super().construct_document(node)


def check_node(root: yaml.Node) -> None:
    """Raise :class:`YamlLimitError` when the document of ``root`` exceeds a bound.

    Iterative post-order walk over the node graph: each distinct node is measured once (its
    expanded size and depth), so the walk is linear in the text even for an alias bomb.
    """
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            heights[key] = 1 + max((heights[id(c)] for c in children), default=0)
            if heights[key] > MAX_DEPTH:
                raise _error(node, f"collections are nested deeper than {MAX_DEPTH} levels")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _error(node, "an alias refers to a node that contains it (a recursive alias)")
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise _error(
                    child, "an alias refers to a node that contains it (a recursive alias)"
                )
            if id(child) not in sizes:
                stack.append((child, False))
    added = sizes[id(root)] - len(sizes)
    if added > MAX_ALIAS_VALUES:
        raise _error(
            root,
            f"its aliases expand to {sizes[id(root)]:,} values, {added:,} more than written "
            f"(at most {MAX_ALIAS_VALUES:,} allowed: an alias bomb?)",
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _error(node: yaml.Node, problem: str) -> YamlLimitError:
    return YamlLimitError(problem=problem, problem_mark=node.start_mark)


def load(text: str, loader: type[Any] = SafeLoader) -> Any:
    """The single document of ``text`` (``None`` when empty); raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=loader)


def load_all(text: str, loader: type[Any] = SafeLoader) -> list[Any]:
    """Every document of ``text``, in order; raises ``yaml.YAMLError``."""
    return list(yaml.load_all(text, Loader=loader))


def read_text(path: str | Path, error: type[InputError] = InputError) -> str:
    """The UTF-8 text of a user's file (``-``: standard input), at most :data:`MAX_FILE_BYTES`.

    Raises ``error`` (naming the file) when it is missing, unreadable, a directory, larger than
    the limit (``/dev/zero``) or not UTF-8.
    """
    if str(path) == "-":
        return read_stream(sys.stdin, "<stdin>", error)
    source = str(path)
    try:
        with open(path, "rb") as stream:
            data = _read_bounded(stream)
    except FileNotFoundError:
        raise error("no such file", source=source, hint="check the path") from None
    except IsADirectoryError:
        raise error("is a directory, not a file", source=source) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    if data is None:
        raise error(
            f"larger than {MAX_FILE_BYTES >> 20} MiB: not a file placer reads",
            source=source,
            hint="check the path (a device such as /dev/zero never ends)",
        )
    return decode(data, source, error)


def read_stream(stream: TextIO, source: str, error: type[InputError] = InputError) -> str:
    """The text of an open stream (standard input), bounded and checked as :func:`read_text`."""
    raw = getattr(stream, "buffer", None)
    try:
        if raw is not None:
            data = _read_bounded(raw)
            text = None if data is None else decode(data, source, error)
        else:
            text = stream.read(MAX_FILE_BYTES + 1)
            text = None if len(text) > MAX_FILE_BYTES else text
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text: {exc.reason} at offset {exc.start}", source=source) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    if text is None:
        raise error(f"larger than {MAX_FILE_BYTES >> 20} MiB", source=source)
    return text


def decode(data: bytes, source: str, error: type[InputError] = InputError) -> str:
    """``data`` as UTF-8 text; raises ``error`` naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}",
            source=source,
            hint="save the file as UTF-8 (YAML and JSON are UTF-8)",
        ) from None


def _read_bounded(stream: IO[bytes]) -> bytes | None:
    data = stream.read(MAX_FILE_BYTES + 1)
    return None if len(data) > MAX_FILE_BYTES else data


def parse_yaml(
    text: str,
    source: str,
    error: type[InputError] = InputError,
    *,
    all_documents: bool = False,
    loader: type[Any] = SafeLoader,
) -> Any:
    """The document (or every document) of ``text``; raises ``error`` naming the line and the
    problem (bad syntax, or a bound of this module), with exit code 2 whatever ``error`` is:
    input that is not YAML is a usage error (:data:`placer.errors.EXIT_CODES`), for every kind
    of file as for manifests (:class:`placer.errors.MalformedYamlError`)."""
    try:
        if all_documents:
            return load_all(text, loader)
        return load(text, loader)
    except yaml.YAMLError as exc:
        problem = error(yaml_problem(exc), source=source, hint=_hint(exc))
        problem.exit_code = EXIT_USAGE
        raise problem from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``not valid YAML: line 3, column 5: <problem>`` (or ``refused: ...`` for a bound)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "malformed"
    if isinstance(exc, YamlLimitError):
        return f"refused: {where}{problem}"
    return f"not valid YAML: {where}{problem}"


def _hint(exc: yaml.YAMLError) -> str:
    if isinstance(exc, YamlLimitError):
        return "write the values out instead of repeating aliases, and nest less deeply"
    return "fix the YAML syntax (indentation, quotes, ':' separators)"


def read_yaml_file(
    path: str | Path, error: type[InputError] = InputError, *, all_documents: bool = False
) -> Any:
    """:func:`read_text` then :func:`parse_yaml`."""
    source = "<stdin>" if str(path) == "-" else str(path)
    return parse_yaml(read_text(path, error), source, error, all_documents=all_documents)
