"""The compiled catalog: a directory of definitions read, validated and analysed once per content.

Loading the built-in catalog costs a command more than anything else it does before talking to
a cluster: decoding 23 YAML files, validating every definition and analysing each of its jq
expressions (parsing, the termination proof, the cost bound of :mod:`placer.definitions.jqcost`).
The outcome — the decoded definitions and their analysed jq programs — depends only on the
files and on placer's code, so :func:`load_validated` keeps it in a cache file whose name is
the SHA-256 of:

* :data:`FORMAT`, the Python version and the source of every module the outcome depends on
  (:data:`CODE_MODULES`: decoding, validation, the jq analysis);
* the origin given to the definitions (``catalog``, ``file``);
* every file read: its path and its bytes.

A changed file, another version of placer or another Python gives another name, so a stale entry
is never read; a run with a name not on disk reads and validates the files as without a cache
and writes the entry (definitions found invalid are reported as always and never cached). The
:data:`KEPT` most recent entries are kept.

The entries are pickles, which are code, like the ``__pycache__`` files Python itself runs: an
entry is read only from a directory and a file owned by the user running placer and writable by
no one else; anything else, a damaged entry or a directory that cannot be written, is the same
as no cache. Where the cache lives: :func:`cache_dir` (``$PLACER_CACHE_DIR``, else
``$XDG_CACHE_HOME/placer``, else ``~/.cache/placer``; ``PLACER_CACHE=off`` turns it off).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from placer import __version__
from placer.definitions.documents import parse_documents, yaml_files
from placer.definitions.jq import JqProgram, adopt_programs, compile_jq
from placer.definitions.loader import definition_from_dict
from placer.definitions.model import Definition
from placer.definitions.validate import check_definition, jq_fields, remember_valid
from placer.errors import InputError
from placer.yamlload import read_text

__all__ = ["CODE_MODULES", "FORMAT", "KEPT", "cache_dir", "load_validated"]

#: version of the entries' layout
FORMAT = 2
#: entries kept in the cache directory (the most recently written)
KEPT = 16
#: the sources that decide what an entry holds (globs relative to the ``placer`` package): the
#: definition package and every top-level module of placer, which it may import
CODE_MODULES = ("*.py", "definitions/*.py")

_PREFIX = "catalog-"
_SUFFIX = ".pickle"


def cache_dir(environ: Mapping[str, str]) -> Path | None:
    """Where the compiled catalog lives for the environment ``environ``; ``None``: no cache."""
    if environ.get("PLACER_CACHE", "").lower() in ("off", "0", "false", "no"):
        return None
    if environ.get("PLACER_CACHE_DIR"):
        return Path(environ["PLACER_CACHE_DIR"])
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "placer"
    home = environ.get("HOME")
    return Path(home) / ".cache" / "placer" if home else None


def load_validated(directory: Path, *, origin: str, cache: Path | None) -> list[Definition]:
    """Every definition in the YAML/JSON files under ``directory`` (or the file ``directory``),
    each validated: what :func:`~placer.definitions.loader.load_definitions` followed by
    :func:`~placer.definitions.validate.check_definition` gives, from the cache directory
    ``cache`` when an entry for these files and this code is there (``None``: no cache).

    Raises as those two do (:class:`~placer.errors.InputError`,
    :class:`~placer.errors.DefinitionError`), naming the file.
    """
    if not directory.exists():
        raise InputError("no such file or directory", source=str(directory))
    texts = [(str(file), read_text(file)) for file in yaml_files(directory)]
    entry = None if cache is None else cache / f"{_PREFIX}{_key(texts, origin)}{_SUFFIX}"
    if entry is not None:
        cached = _read(entry)
        if cached is not None:
            definitions, programs = cached
            adopt_programs(programs)
            for definition in definitions:
                remember_valid(definition)
            return definitions
    decoded = [
        definition_from_dict(d.data, source=d.source, origin=origin)
        for source, text in texts
        for d in parse_documents(text, source)
    ]
    definitions = [check_definition(d) for d in decoded]
    if entry is not None:
        expressions = sorted({t for d in definitions for _, t in jq_fields(d) if t.strip()})
        _write(entry, (definitions, [compile_jq(t) for t in expressions]))
    return definitions


def _key(texts: list[tuple[str, str]], origin: str) -> str:
    digest = hashlib.sha256()
    for part in (str(FORMAT), sys.version, __version__, _code_fingerprint(), origin):
        digest.update(part.encode() + b"\0")
    for source, text in texts:
        digest.update(source.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def _code_fingerprint() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for pattern in CODE_MODULES:
        for file in sorted(package.glob(pattern)):
            name = str(file.relative_to(package))
            digest.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _trusted(path: Path) -> bool:
    """Owned by this user and writable by no one else (a file or a directory)."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(entry: Path) -> tuple[list[Definition], list[JqProgram]] | None:
    if not (_trusted(entry.parent) and _trusted(entry)):
        return None
    try:
        data = pickle.loads(entry.read_bytes())
    except Exception:  # a damaged or foreign entry is no entry: read the files again
        return None
    if (
        isinstance(data, tuple)
        and len(data) == 2
        and all(isinstance(d, Definition) for d in data[0])
        and all(isinstance(p, JqProgram) for p in data[1])
    ):
        return data[0], data[1]
    return None


def _write(entry: Path, data: tuple[list[Definition], list[JqProgram]]) -> None:
    """Write ``entry`` atomically and prune the oldest; a cache that cannot be written is
    no cache (the command itself is not concerned)."""
    try:
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(entry.parent):
            return
        import tempfile  # only when writing

        handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=entry.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                pickle.dump(data, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, entry)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _prune(entry.parent)
    except (OSError, pickle.PicklingError, RecursionError):
        return


def _prune(directory: Path) -> None:
    entries = []
    for path in directory.glob(f"{_PREFIX}*{_SUFFIX}"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue
    for _, path in sorted(entries, reverse=True)[KEPT:]:
        path.unlink(missing_ok=True)
