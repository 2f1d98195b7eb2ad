"""The jq runtime: upstream-compatible evaluation of definition paths, fast and never hanging.

Upstream (Workload Map) evaluates every path with gojq. placer uses libjq through the ``jq``
PyPI binding and closes the gaps that matter (spec section 3):

* **Normalised input** (:func:`normalize`): the object is turned into plain JSON once, keys
  sorted and integral floats made ints, so that ``.[]``, ``to_entries`` and ``tostring`` behave
  as in gojq (which iterates objects in key order and prints ``1.0`` as ``1``). YAML timestamps
  become their RFC 3339 text, non-string keys become strings, as Kubernetes' YAML-to-JSON does.
* **All outputs** are collected, in order; reaching :attr:`JqLimits.max_outputs` (1000, so 999
  is the real maximum, as upstream) is an error, checked lazily so an endless generator stops.
* **Compiled once**: compiling costs libjq about a millisecond (it re-parses its builtins), so
  programs are cached by text (:func:`compile_jq`).
* **Never hangs.** libjq cannot be interrupted from Python: its C loop does not look at signals.
  :func:`placer.definitions.jqsyntax.termination_risk` proves most expressions terminate (all of
  the catalog's); those run in-process. Any other expression (a recursive ``def``, ``until``,
  ``repeat``, ``reduce``...) runs in a worker process that is killed when it exceeds
  :attr:`JqLimits.time_limit` (upstream's 10 s by default), with an error naming the expression.
  The worker is started on first need, reused, restarted after a kill, and capped at 4 GiB of
  address space.
* **Batched** (:class:`JqBatch`): the paths one object needs (a definition's instance ids, pod
  templates, replicas, status expressions) are fused into ONE program, ``[[p1], [p2], ...]``, so
  the object is parsed by libjq once instead of once per path (measured by
  ``simulations/bench_decompose.py``). Only expressions proven to terminate are fused, so their
  output count is finite (polynomial in the input) and the cap is checked on the collected
  lists, without jq's ``limit`` (which costs a third of the evaluation). When the fused program
  fails, the paths are run one by one to report the failing one.

Everything here is pure computation on values; the worker process is an implementation detail of
:meth:`JqProgram.run`.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jq as _libjq

from placer.definitions.jqcost import CostBound, cost_of, max_in_process_input
from placer.definitions.jqsyntax import (
    GUARDED_MULTIPLY_DEF,
    JqSyntaxError,
    Node,
    guard_repetition,
    isolation_violations,
    parse,
    termination_risk,
)
from placer.errors import JqError

__all__ = [
    "DEFAULT_LIMITS",
    "JqBatch",
    "JqLimits",
    "JqProgram",
    "adopt_programs",
    "compile_batch",
    "compile_jq",
    "compile_problems",
    "normalize",
    "relocate",
    "to_json_text",
    "trust_expressions",
]


@dataclass(frozen=True)
class JqLimits:
    """Per-evaluation limits (upstream: 10 s and 1000 outputs)."""

    #: seconds one evaluation may take; enforced for expressions not proven to terminate.
    time_limit: float = 10.0
    #: an evaluation reaching this many outputs fails (so ``max_outputs - 1`` is the real cap).
    max_outputs: int = 1000


DEFAULT_LIMITS = JqLimits()


# --------------------------------------------------------------------------------------------
# Input normalisation


def normalize(value: Any) -> Any:
    """A JSON-ready copy of ``value``: keys sorted (and made strings), integral floats as ints.

    Timestamps (as PyYAML may produce) become RFC 3339 text; tuples become lists. Raises
    ``TypeError`` for values JSON cannot hold.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        try:
            keys = sorted(value)
        except TypeError:  # mixed key types (YAML allows int keys)
            return {str(k): normalize(value[k]) for k in sorted(value, key=str)}
        if all(type(k) is str for k in keys):
            return {k: normalize(value[k]) for k in keys}
        return {str(k): normalize(value[k]) for k in sorted(value, key=str)}
    if kind is list:
        return [normalize(v) for v in value]
    return _normalize_other(value)


def _normalize_other(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): normalize(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str | int | bool):
        return value
    if isinstance(value, _dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, _dt.date):
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} cannot be represented in JSON")


def to_json_text(normalized: Any) -> str:
    """Compact JSON text of an already :func:`normalize`-d value (the form libjq reads)."""
    return json.dumps(normalized, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------------------------
# Programs


class JqProgram:
    """One analysed jq expression, compiled by libjq on first use.

    ``risk`` is ``None`` when the expression is proven to terminate (it then runs in-process),
    else the reason it may not (it then runs in the worker under the time limit). ``runnable``
    is the text libjq runs in-process: ``text`` with string repetition bounded
    (:func:`~placer.definitions.jqsyntax.guard_repetition`), to be preceded by
    :data:`~placer.definitions.jqsyntax.GUARDED_MULTIPLY_DEF`.
    """

    __slots__ = (
        "_compiled",
        "_tree",
        "bound",
        "isolation",
        "max_input",
        "risk",
        "runnable",
        "text",
    )

    def __init__(self, text: str, tree: Node, risk: str | None, runnable: str) -> None:
        self.text = text
        self._tree: Node | None = tree
        self.risk = risk
        self.runnable = runnable
        #: constructs reaching outside the object (``$ENV``, ``now``...): never run.
        self.isolation = tuple(isolation_violations(tree))
        #: the static bound of its cost (:mod:`placer.definitions.jqcost`)
        self.bound: CostBound = cost_of(tree)
        #: largest input (JSON bytes) it may run on in-process; -1: never in-process
        self.max_input = max_in_process_input(self.bound) if risk is None else -1
        self._compiled: Any = None

    #: what a pickle keeps (the compiled catalog): the analysis, not libjq's program nor the
    #: syntax tree (the bulk of an entry, and of its loading time; a command reads the trees
    #: of a few expressions, parsed again on first use)
    _PICKLED = ("text", "risk", "runnable", "isolation", "bound", "max_input")

    def __getstate__(self) -> tuple[object, ...]:
        """The analysis, for the compiled catalog (:mod:`placer.definitions.compiled`); libjq's
        compiled program and the syntax tree are not kept (made again on first use)."""
        return tuple(getattr(self, name) for name in self._PICKLED)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(self._PICKLED, state, strict=True):
            setattr(self, name, value)
        self._tree = None
        self._compiled = None

    @property
    def tree(self) -> Node:
        """The syntax tree (:func:`~placer.definitions.jqsyntax.parse`)."""
        if self._tree is None:
            # the text parsed when it was analysed: a program from a pickle parses again
            self._tree = parse(self.text)
        return self._tree

    @property
    def in_process(self) -> bool:
        """Whether this expression may run in placer's own process on some inputs."""
        return self.risk is None and not self.isolation

    def in_process_for(self, input_text: str) -> bool:
        """Whether this expression runs in-process on ``input_text`` (see the module docstring)."""
        if not self.in_process:
            return False
        return len(input_text) <= self.max_input or self.text in _TRUSTED

    def run(
        self,
        input_text: str,
        *,
        limits: JqLimits = DEFAULT_LIMITS,
        location: str | None = None,
    ) -> list[Any]:
        """All outputs for the JSON ``input_text`` (from :func:`to_json_text`).

        Raises :class:`JqError` (naming ``location``) when libjq does not compile it, on a
        runtime error, too many outputs or, for expressions not proven to terminate, exceeding
        the time limit. An expression reaching outside the object (``$ENV``, ``now``...) is
        never run.
        """
        if self.isolation:
            raise JqError(
                f"refused: {self.isolation[0]}",
                expression=self.text,
                location=location,
                hint="a definition may read only the object it describes",
            )
        if not self.in_process_for(input_text):
            return _WORKER.run(self.text, input_text, limits, location)
        if self._compiled is None:
            self._compiled = _compile_runnable(self, location)
        outputs: list[Any] = []
        try:
            for value in self._compiled.input_text(input_text):
                outputs.append(value)
                if len(outputs) >= limits.max_outputs:
                    raise _too_many(self.text, limits, location)
        except ValueError as exc:
            raise _runtime_error(self.text, exc, location) from None
        return outputs


def _compile_runnable(program: JqProgram, location: str | None) -> Any:
    try:
        return _libjq.compile(f"{GUARDED_MULTIPLY_DEF} {_wrap(program.runnable)}")
    except ValueError as exc:
        problem = compile_problems([program.text]).get(program.text) or _first_line(exc)
        raise JqError(
            f"does not compile: {problem}", expression=program.text, location=location
        ) from None


#: programs analysed by an earlier process (:func:`adopt_programs`), by text
_ADOPTED: dict[str, JqProgram] = {}


def adopt_programs(programs: Sequence[JqProgram]) -> None:
    """Take ``programs``, analysed by an earlier run of this same code (the compiled catalog,
    :mod:`placer.definitions.compiled`), as :func:`compile_jq`'s answers for their texts."""
    _ADOPTED.update((program.text, program) for program in programs)


def compile_jq(text: str) -> JqProgram:
    """Analyse ``text`` (cached): parse it, prove termination, bound string repetition.

    Raises :class:`JqError` when it is not jq. libjq itself compiles the expression on first
    use (a millisecond each, as libjq re-parses its builtins); :func:`compile_problems` checks
    many expressions with libjq in one go.
    """
    adopted = _ADOPTED.get(text)
    return adopted if adopted is not None else _analyse(text)


@lru_cache(maxsize=4096)
def _analyse(text: str) -> JqProgram:
    try:
        tree = parse(text)
    except JqSyntaxError as exc:
        problem = compile_problems([text]).get(text)
        if problem is not None:
            raise JqError(f"does not compile: {problem}", expression=text) from None
        # libjq accepts it but placer's parser does not: never run it unanalysed in-process.
        raise JqError(
            f"placer cannot analyse this expression ({exc.message})",
            expression=text,
            hint="rewrite it with simpler syntax, or report it as a placer bug",
        ) from None
    except RecursionError:
        raise _too_deep(text) from None
    try:
        return JqProgram(text, tree, termination_risk(tree), guard_repetition(text, tree))
    except RecursionError:
        raise _too_deep(text) from None


def _too_deep(text: str) -> JqError:
    """A hostile expression nested thousands of levels deep (the analysis is recursive)."""
    return JqError(
        "nested too deeply for placer to analyse (parentheses, brackets or pipes thousands "
        "of levels deep)",
        expression=text[:200] + ("..." if len(text) > 200 else ""),
        hint="write the expression with less nesting",
    )


def compile_problems(texts: Sequence[str]) -> dict[str, str]:
    """libjq's complaint about each of ``texts`` that does not compile (empty when all do).

    One libjq compile for all of them when they are fine; one each only to find the culprits.
    """
    unique = list(dict.fromkeys(texts))
    if not unique:
        return {}
    try:
        _libjq.compile("[" + ", ".join(_wrap(t) for t in unique) + "]")
        return {}
    except ValueError:
        pass
    problems = {}
    for text in unique:
        try:
            _libjq.compile(_wrap(text))
        except ValueError as wrapped:
            problems[text] = _compile_problem(text, wrapped)
    return problems


def _compile_problem(text: str, wrapped: ValueError) -> str:
    try:  # the bare text gives positions the user can relate to
        _libjq.compile(text)
    except ValueError as bare:
        return _first_line(bare)
    return _first_line(wrapped)


def _wrap(text: str) -> str:
    # Two newlines: a trailing comment (even one continued with a backslash) cannot swallow
    # the closing parenthesis of the wrappers below.
    return f"({text}\n\n)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.removeprefix("jq: error: ")


#: Longest excerpt of a jq run-time message placer repeats (conditions, Events, logs, HTTP).
MAX_MESSAGE_CHARS = 160


def bounded_message(raw: str) -> str:
    """A jq run-time message fit to repeat: one line, printable, at most :data:`MAX_MESSAGE_CHARS`.

    Run-time messages carry data (``error(.spec.x)`` is any text the expression builds, jq's own
    messages quote values), and they travel to hub conditions, Events, logs and HTTP answers:
    only the first line is kept, control characters are escaped and the rest is cut, said so.
    """
    line = raw.strip().splitlines()[0] if raw.strip() else "no message"
    for prefix in ("jq: error (at <unknown>): ", "jq: error (at <stdin>:0): ", "jq: error: "):
        line = line.removeprefix(prefix)
    printable = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    if len(printable) > MAX_MESSAGE_CHARS:
        cut = len(printable) - MAX_MESSAGE_CHARS
        printable = f"{printable[:MAX_MESSAGE_CHARS]}… ({cut} more characters not shown)"
    return printable


def _runtime_error(text: str, exc: BaseException, location: str | None) -> JqError:
    return JqError(
        f"failed at run time: jq said: {bounded_message(str(exc))}",
        expression=text,
        location=location,
        hint="the object may lack a field this path reads, or hold a value of another type; "
        "compare it with the definition (`placer definitions NAME` shows its paths)",
    )


def _too_many(text: str, limits: JqLimits, location: str | None) -> JqError:
    return JqError(
        f"produced {limits.max_outputs} outputs or more (at most {limits.max_outputs - 1} allowed)",
        expression=text,
        location=location,
    )


# --------------------------------------------------------------------------------------------
# Trust

#: Expression texts of placer's own built-in definitions: reviewed code, run in-process whatever
#: their static bound (which is loose) says about the input's size.
_TRUSTED: set[str] = set()


def trust_expressions(texts: Sequence[str]) -> None:
    """Mark ``texts`` (the built-in catalog's expressions) as placer's own code.

    Any other expression (hub Kartas, ``--catalog`` files) runs in-process only on inputs for
    which its static cost bound stays within limits, and in the capped worker otherwise.
    """
    _TRUSTED.update(texts)


# --------------------------------------------------------------------------------------------
# Batches


class JqBatch:
    """Several expressions evaluated on one input in one libjq call where possible.

    ``run`` returns one output list per expression, in order. The expressions that may run
    in-process on the input (:meth:`JqProgram.in_process_for`) are fused into one program (one
    per such subset, compiled once); the others are evaluated one by one in the worker.
    """

    __slots__ = ("_fused", "_fused_limit", "_safe", "programs")

    #: distinct subsets fused at most (each costs a libjq compile)
    MAX_SUBSETS = 16

    def __init__(self, programs: Sequence[JqProgram]) -> None:
        self.programs = tuple(programs)
        self._safe = tuple(i for i, p in enumerate(self.programs) if p.in_process)
        #: subset of expression indexes -> its fused program (None: one by one)
        self._fused: dict[tuple[int, ...], Any] = {}
        #: inputs up to this size run every in-process expression, trusted or not
        self._fused_limit = min((self.programs[i].max_input for i in self._safe), default=-1)
        self._compiled(self._safe)

    def _compiled(self, subset: tuple[int, ...]) -> Any:
        if subset in self._fused:
            return self._fused[subset]
        compiled = None
        if len(subset) > 1 and len(self._fused) < self.MAX_SUBSETS:
            parts = ", ".join(f"[{_wrap(self.programs[i].runnable)}]" for i in subset)
            try:
                compiled = _libjq.compile(f"{GUARDED_MULTIPLY_DEF} [{parts}]")
            except ValueError:
                compiled = None  # one of them does not compile: run them one by one
        self._fused[subset] = compiled
        return compiled

    def _subset(self, input_text: str) -> tuple[int, ...]:
        if len(input_text) <= self._fused_limit:
            return self._safe
        return tuple(i for i in self._safe if self.programs[i].in_process_for(input_text))

    def run(
        self,
        input_text: str,
        *,
        limits: JqLimits = DEFAULT_LIMITS,
        locate: Callable[[int], str] | None = None,
    ) -> list[list[Any]]:
        """Outputs of every expression; raises :class:`JqError` naming the failing location.

        ``locate(i)`` describes where expression ``i`` lives (called only to build an error).
        """
        results: list[list[Any] | None] = [None] * len(self.programs)
        subset = self._subset(input_text)
        fused_program = self._compiled(subset)
        if fused_program is not None:
            try:
                fused = fused_program.input_text(input_text).first()
            except ValueError:
                fused = None  # find the failing expression below, one by one
            if fused is not None:
                for slot, outputs in zip(subset, fused, strict=True):
                    if len(outputs) >= limits.max_outputs:
                        raise _too_many(self.programs[slot].text, limits, _where(locate, slot))
                    results[slot] = outputs
        for index, program in enumerate(self.programs):
            if results[index] is None:
                try:
                    results[index] = program.run(input_text, limits=limits)
                except JqError as exc:
                    raise relocate(exc, _where(locate, index)) from None
        return [r if r is not None else [] for r in results]


def relocate(exc: JqError, location: str | None) -> JqError:
    """The same error, said to happen at ``location``."""
    if location is None:
        return exc
    bare = exc.message.split(f"jq {exc.expression!r}: ", 1)[-1]
    return JqError(bare, expression=exc.expression, location=location, hint=exc.hint)


def _where(locate: Callable[[int], str] | None, index: int) -> str | None:
    return locate(index) if locate is not None else None


@lru_cache(maxsize=1024)
def compile_batch(texts: tuple[str, ...]) -> JqBatch:
    """A cached :class:`JqBatch` of ``texts`` (each compiled with :func:`compile_jq`)."""
    return JqBatch([compile_jq(t) for t in texts])


# --------------------------------------------------------------------------------------------
# The worker process for expressions not proven to terminate

_WORKER_SOURCE = r"""
import json, sys
try:
    import resource
except ImportError:
    resource = None
if resource is not None:
    limit = %(memory)d
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import jq
cache = {}
for line in sys.stdin:
    request = json.loads(line)
    if resource is not None:  # CPU seconds: what it used so far plus this evaluation's limit
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + request["t"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
    try:
        program = cache.get(request["p"])
        if program is None:
            program = cache[request["p"]] = jq.compile(request["p"])
        outputs = []
        answer = None
        for value in program.input_text(request["i"]):
            outputs.append(value)
            if len(outputs) >= request["n"]:
                answer = {"too_many": True}
                break
        if answer is None:
            answer = {"ok": outputs}
    except ValueError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": "out of memory"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


#: Address space of the worker process (bytes): an evaluation needing more is stopped.
WORKER_MEMORY = 1 << 30
#: How long the worker may take to start (Python and libjq loading), outside any time limit.
_STARTUP_SECONDS = 60.0


class _Worker:
    """One child Python process running libjq; killed and replaced when it overruns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def run(self, text: str, input_text: str, limits: JqLimits, location: str | None) -> list[Any]:
        request = json.dumps(
            {"p": _wrap(text), "i": input_text, "n": limits.max_outputs, "t": limits.time_limit}
        )
        with self._lock:
            proc = self._ensure()
            try:
                assert proc.stdin is not None
                proc.stdin.write(request.encode() + b"\n")
                proc.stdin.flush()
                line = self._read_line(proc, time.monotonic() + limits.time_limit)
            except (BrokenPipeError, OSError):
                line = None
            if line is None:
                crashed = proc.poll() is not None
                self._kill()
                if crashed:
                    raise JqError(
                        f"stopped: it needed more than the jq worker's {WORKER_MEMORY >> 20} MiB "
                        "of memory or its CPU time limit",
                        expression=text,
                        location=location,
                        hint="simplify the expression: its output must stay small",
                    )
                raise JqError(
                    f"did not finish within {limits.time_limit:g} s (stopped)",
                    expression=text,
                    location=location,
                    hint="make the expression terminate: avoid recursion, until/while/repeat, "
                    "and unbounded ranges",
                )
        answer = json.loads(line)
        if "ok" in answer:
            return list(answer["ok"])
        if answer.get("too_many"):
            raise _too_many(text, limits, location)
        raise _runtime_error(text, Exception(answer["error"]), location)

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_SOURCE % {"memory": WORKER_MEMORY}],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._proc = proc
        # wait until it answers, so that start-up time never counts against an evaluation
        ready = None
        try:
            assert proc.stdin is not None
            proc.stdin.write(b'{"p": ".", "i": "null", "n": 2, "t": 60}\n')
            proc.stdin.flush()
            ready = self._read_line(proc, time.monotonic() + _STARTUP_SECONDS)
        except OSError:
            ready = None
        if ready is None:
            self._kill()
            raise JqError(
                "the jq worker process did not start",
                expression=".",
                hint="check that the `jq` Python package is installed in this environment",
            )
        return proc

    @staticmethod
    def _read_line(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    return b"".join(chunks)

    def close(self) -> None:
        """Stop the worker process (it is started again on next need)."""
        with self._lock:
            self._kill()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


_WORKER = _Worker()
atexit.register(_WORKER.close)
