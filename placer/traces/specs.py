"""Workload specs: the traces and generators ``placer simulate --workloads`` accepts by name.

A spec names a source and, after ``?``, ``key=value`` parameters joined by ``&``::

    trace:openb:default                       openb's production tasks, as they ran
    trace:openb:gpuspec33?load=1.3&seed=42    FGD's replay: shuffled, tuned to 130 % of the fleet
    trace:kalos?time_scale=0.01&shape=fit     the 319 Kalos gangs, 100× faster, fitted to the fleet
    synthetic:gangs?seed=7&count=500          500 synthetic gangs
    synthetic:gangs?seed=7&load=1.2           synthetic gangs asking 120 % of the fleet's GPUs

Sources and their parameters (defaults in brackets):

``trace:openb:<variant>`` — openb tasks as one-pod workloads; ``<variant>`` is one of
:data:`placer.traces.openb.VARIANTS` (``default``, ``cpu050`` … ``multigpu50``).
    ``load`` [none] — FGD's replay protocol: shuffle, then tune the list's GPU request to
    ``load`` × the fleet's GPU capacity; one-second spacing, nothing departs (needs a fleet).
    ``seed`` [``--seed``, else 42] — seed of the shuffle and tuning (FGD uses 42–51).
    Without ``load``: arrival = creation time, duration = lifetime;
    ``time_scale`` [1] multiplies both, ``departures`` [true] keeps durations.
``trace:kalos`` — the Kalos gangs in submit order.
    ``time_scale`` [1]; ``shape`` [trace] — ``trace`` keeps CPU/memory per pod as in the trace
    (sized for 2-TB A100 servers), ``fit`` lowers them to what the fleet's nodes hold (needs a
    fleet).
``synthetic:gangs`` — gangs of openb pods with the Kalos size tail (:mod:`placer.traces.synthetic`).
    ``seed`` [``--seed``, else 42]; ``count`` [200] or ``load`` (draw until the GPU demand
    reaches ``load`` × the fleet's GPUs; needs a fleet); ``cap`` [0.15] — a workload's GPUs at
    most this share of the largest cluster (needs a fleet), or ``max_gpus`` — that cap in GPUs;
    ``small`` [0.7]; ``components`` [3] — at most this many components; ``fractional`` [true];
    ``source`` [default] — the openb list giving pod shapes and times; ``time_scale`` [1].

Booleans are ``true``/``false`` (or ``1``/``0``). Every mistake — unknown source, variant or
parameter, bad value, a parameter that needs a fleet without one — is an
:class:`~placer.errors.InputError` that names the spec and the parameter and lists what is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from placer.errors import InputError
from placer.model import Fleet
from placer.traces.kalos import kalos_replay, read_kalos_jobs
from placer.traces.openb import VARIANTS, fgd_replay, read_openb_tasks, trace_replay
from placer.traces.synthetic import GangMix, kalos_tail, synthetic_gangs
from placer.traces.workloads import TimedWorkload, fleet_gpu_milli, largest_cluster_gpu_milli

__all__ = [
    "DEFAULT_SEED",
    "SOURCES",
    "WorkloadSpec",
    "is_workload_spec",
    "parse_spec",
    "resolve_workloads",
]

DEFAULT_SEED = 42
_INF = float("inf")
#: Bounds of the parameters (beyond them a spec would generate for hours or fill memory).
MAX_SEED = 2**31 - 1
MAX_COUNT = 100_000
MAX_LOAD = 10.0
MAX_TIME_SCALE = 1e6
MAX_GANG_GPUS = 100_000
_PREFIXES = ("trace:", "synthetic:")
#: every source with its parameters.
SOURCES: Mapping[str, tuple[str, ...]] = {
    "trace:openb:<variant>": ("load", "seed", "time_scale", "departures"),
    "trace:kalos": ("time_scale", "shape"),
    "synthetic:gangs": (
        "seed",
        "count",
        "load",
        "cap",
        "max_gpus",
        "small",
        "components",
        "fractional",
        "source",
        "time_scale",
    ),
}


def is_workload_spec(text: str) -> bool:
    """Whether ``text`` names a trace or generator (rather than a manifest path)."""
    return text.startswith(_PREFIXES)


@dataclass(frozen=True)
class WorkloadSpec:
    """A parsed spec: the source (``trace:openb:default``) and its raw parameters."""

    text: str
    source: str
    params: Mapping[str, str]

    def error(self, message: str, key: str | None = None, hint: str | None = None) -> InputError:
        """An :class:`InputError` naming this spec and, when given, the parameter."""
        return InputError(message, source=f"workloads {self.text!r}", field=key, hint=hint)

    def _parse(self, key: str, kind: type[int] | type[float]) -> float:
        raw = self.params[key]
        try:
            if len(raw) > 40:
                raise ValueError(raw)
            return kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise self.error(f"{raw[:40]!r} is not {what}", key) from None

    def integer(
        self, key: str, default: int, *, minimum: int = 0, maximum: int | None = None
    ) -> int:
        """A whole-number parameter within bounds."""
        if key not in self.params:
            return default
        value = int(self._parse(key, int))
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise self.error(f"{value} is not {bounds}", key)
        return value

    def number(
        self, key: str, default: float, *, zero: bool = False, maximum: float = _INF
    ) -> float:
        """A finite number parameter, positive (or ``>= 0`` with ``zero``), at most ``maximum``."""
        if key not in self.params:
            return default
        value = self._parse(key, float)
        low_ok = value >= 0 if zero else value > 0
        if not (low_ok and value <= maximum and value < _INF):
            low = ">= 0" if zero else "> 0"
            high = f" and <= {maximum:g}" if maximum < _INF else ""
            raise self.error(f"{self.params[key]!r} is out of range: must be {low}{high}", key)
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """``true``/``false`` (or ``1``/``0``, ``yes``/``no``)."""
        if key not in self.params:
            return default
        raw = self.params[key].lower()
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no"):
            return False
        raise self.error(f"{self.params[key]!r} is not true or false", key)

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        """One of ``choices``."""
        value = self.params.get(key, default)
        if value not in choices:
            raise self.error(f"{value!r} is not one of {', '.join(choices)}", key)
        return value

    def needs_fleet(self, fleet: Fleet | None, key: str) -> Fleet:
        """``fleet``, or an error saying ``key`` needs one."""
        if fleet is None:
            raise self.error(
                "needs the fleet's capacity, and there is none",
                key,
                hint="give a capacity snapshot (placer simulate --snapshot FILE)",
            )
        return fleet


def parse_spec(text: str) -> WorkloadSpec:
    """Split ``SOURCE?key=value&...`` and check the source and parameter names."""
    source, _, query = text.partition("?")
    params: dict[str, str] = {}
    spec = WorkloadSpec(text=text, source=source, params=params)
    for item in query.split("&") if query else ():
        key, sep, value = item.partition("=")
        if not key or not sep:
            raise spec.error(f"{item!r} is not key=value", hint="write SOURCE?key=value&key=value")
        if key in params:
            raise spec.error("given twice", key)
        params[key] = value
    allowed = SOURCES.get(_source_key(source))
    if allowed is None:
        raise spec.error(
            f"unknown workload source {source!r}",
            hint="use one of: " + ", ".join(SOURCES) + f" (variants: {', '.join(VARIANTS)})",
        )
    if source.startswith("trace:openb:") and source.removeprefix("trace:openb:") not in VARIANTS:
        raise spec.error(
            f"unknown openb task list {source.removeprefix('trace:openb:')!r}",
            hint=f"use trace:openb:<variant> with one of: {', '.join(VARIANTS)}",
        )
    for key in params:
        if key not in allowed:
            raise spec.error(
                f"unknown parameter for {_source_key(source)}",
                key,
                hint=f"its parameters are: {', '.join(allowed)}",
            )
    return spec


def _source_key(source: str) -> str:
    return "trace:openb:<variant>" if source.startswith("trace:openb:") else source


def resolve_workloads(
    text: str, *, fleet: Fleet | None = None, seed: int | None = None
) -> tuple[TimedWorkload, ...]:
    """The timed workloads a spec names, in arrival order.

    Args:
        text: the spec (see the module docstring).
        fleet: the fleet being simulated; needed by ``load``, ``shape=fit`` and ``cap``.
        seed: the run's seed (``--seed``), used when the spec has no ``seed`` of its own.

    Raises:
        InputError: anything wrong with the spec (names the spec and the parameter).
    """
    spec = parse_spec(text)
    default_seed = DEFAULT_SEED if seed is None else seed
    if spec.source.startswith("trace:openb:"):
        return _openb(spec, fleet, default_seed)
    if spec.source == "trace:kalos":
        return _kalos(spec, fleet)
    return _gangs(spec, fleet, default_seed)


def _openb(spec: WorkloadSpec, fleet: Fleet | None, seed: int) -> tuple[TimedWorkload, ...]:
    tasks = read_openb_tasks(spec.source.removeprefix("trace:openb:"))
    if "load" not in spec.params:
        if "seed" in spec.params:
            raise spec.error("only applies with load= (FGD's replay)", "seed")
        return trace_replay(
            tasks,
            time_scale=spec.number("time_scale", 1.0, maximum=MAX_TIME_SCALE),
            departures=spec.boolean("departures", True),
        )
    for key in ("time_scale", "departures"):
        if key in spec.params:
            raise spec.error("does not apply with load= (FGD's replay has no departures)", key)
    load = spec.number("load", 1.3, maximum=MAX_LOAD)
    capacity = fleet_gpu_milli(spec.needs_fleet(fleet, "load"))
    if not capacity:
        raise spec.error("the fleet has no GPUs to load", "load")
    return fgd_replay(
        tasks,
        capacity_gpu_milli=capacity,
        load=load,
        seed=spec.integer("seed", seed, maximum=MAX_SEED),
    )


def _kalos(spec: WorkloadSpec, fleet: Fleet | None) -> tuple[TimedWorkload, ...]:
    fit = spec.choice("shape", "trace", ("trace", "fit")) == "fit"
    return kalos_replay(
        read_kalos_jobs(),
        time_scale=spec.number("time_scale", 1.0, maximum=MAX_TIME_SCALE),
        fit=spec.needs_fleet(fleet, "shape") if fit else None,
    )


def _gangs(spec: WorkloadSpec, fleet: Fleet | None, seed: int) -> tuple[TimedWorkload, ...]:
    for one, other in (("count", "load"), ("cap", "max_gpus")):
        if one in spec.params and other in spec.params:
            raise spec.error(f"give {one}= or {other}=, not both", other)
    if "max_gpus" in spec.params:
        max_gpus = spec.integer("max_gpus", 0, minimum=1, maximum=MAX_GANG_GPUS)
    else:
        cap = spec.number("cap", 0.15, maximum=1.0)
        largest = largest_cluster_gpu_milli(spec.needs_fleet(fleet, "cap"))
        max_gpus = max(1, round(cap * largest / 1000))
    mix = GangMix(
        max_gang_gpus=max_gpus,
        small=spec.number("small", 0.7, zero=True, maximum=1.0),
        max_components=spec.integer("components", 3, minimum=1, maximum=3),
        fractional=spec.boolean("fractional", True),
        time_scale=spec.number("time_scale", 1.0, maximum=MAX_TIME_SCALE),
    )
    tasks = read_openb_tasks(spec.choice("source", "default", VARIANTS))
    tail = kalos_tail(read_kalos_jobs())
    gang_seed = spec.integer("seed", seed, maximum=MAX_SEED)
    if "load" in spec.params:
        load = spec.number("load", 1.0, maximum=MAX_LOAD)
        target = round(load * fleet_gpu_milli(spec.needs_fleet(fleet, "load")))
        return synthetic_gangs(tasks, tail, mix, seed=gang_seed, target_gpu_milli=target)
    count = spec.integer("count", 200, minimum=1, maximum=MAX_COUNT)
    return synthetic_gangs(tasks, tail, mix, seed=gang_seed, count=count)
