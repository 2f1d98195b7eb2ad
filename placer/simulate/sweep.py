"""Sweeps: many independent simulations, run side by side in processes or on a Ray cluster.

Capacity planning asks the same question many times: every solver, on every seed, at every
load, with each cluster drained in turn. Each such simulation (a :class:`Task`: the workloads,
the fleet and the :class:`~placer.simulate.engine.Settings`) depends on nothing but its own
inputs, so :func:`run_tasks` runs them

* one after the other in this process (``jobs=1``, or a single task);
* in ``jobs`` worker processes of this machine (``concurrent.futures``; a fresh interpreter
  per worker, ``spawn``: nothing of this process's state, threads or locks is inherited);
* or as Ray tasks on an existing Ray cluster (``ray_address``; Ray is an optional extra,
  ``pip install 'placer[ray]'``, and every Ray node needs placer installed).

The answers come back in the order of the tasks, each what :func:`simulate` gives for that
task in any process: the baselines (greedy, karmada, first/best/worst-fit) are deterministic,
so a sweep in parallel equals the serial one apart from the measured seconds
(tests/simulate/test_sweep.py checks it). CP-SAT's search stops on the process's CPU time
(:mod:`placer.solver.clock`), which varies from run to run, so its figures can differ a little
between any two runs, serial or parallel.

Unlike the rest of :mod:`placer.simulate` this module starts processes (or talks to Ray); it
reads and writes no file.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from placer.errors import UsageError
from placer.model import Fleet
from placer.simulate.engine import Run, Settings, Timed, simulate

__all__ = ["RAY_LOCAL", "Task", "backend_name", "default_jobs", "run_task", "run_tasks"]

#: ``ray_address`` that starts a Ray instance on this machine instead of joining a cluster.
RAY_LOCAL = "local"


@dataclass(frozen=True)
class Task:
    """One simulation of a sweep, with everything it needs (sent to a worker as a pickle)."""

    items: tuple[Timed, ...]
    fleet: Fleet
    settings: Settings


def run_task(task: Task) -> Run:
    """Simulate one task (in whatever process runs it)."""
    return simulate(task.items, task.fleet, task.settings)


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def backend_name(tasks: int, jobs: int, ray_address: str | None) -> str:
    """Where :func:`run_tasks` runs ``tasks`` tasks: ``ray``, ``processes`` or ``serial``."""
    if ray_address is not None:
        return "ray"
    return "processes" if jobs > 1 and tasks > 1 else "serial"


def run_tasks(
    tasks: Sequence[Task], *, jobs: int | None = None, ray_address: str | None = None
) -> list[Run]:
    """Every task's :class:`~placer.simulate.engine.Run`, in the order of ``tasks``.

    Args:
        tasks: the simulations.
        jobs: worker processes at most (default :func:`default_jobs`); 1 runs them here.
        ray_address: run them on this Ray cluster (``ray.init(address=...)``) instead;
            :data:`RAY_LOCAL` starts Ray on this machine.

    Raises:
        UsageError: ``jobs`` below 1, or ``ray_address`` given and Ray not installed.
    """
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise UsageError(f"--jobs must be 1 or more, got {jobs}")
    backend = backend_name(len(tasks), jobs, ray_address)
    if backend == "ray":
        assert ray_address is not None
        return _on_ray(tasks, ray_address)
    if backend == "serial":
        return [run_task(task) for task in tasks]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        return list(pool.map(run_task, tasks))


def _on_ray(tasks: Sequence[Task], address: str) -> list[Run]:
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError:
        raise UsageError(
            "--ray needs Ray, which is not installed",
            hint="pip install 'placer[ray]' (and placer on every node of the Ray cluster)",
        ) from None
    started = not ray.is_initialized()
    if started:
        if address == RAY_LOCAL:
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(run_task)
        runs: list[Run] = ray.get([remote.remote(task) for task in tasks])
        return runs
    finally:
        if started:
            ray.shutdown()
