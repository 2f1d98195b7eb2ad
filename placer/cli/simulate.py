"""``placer simulate``: where would these workloads go — offline, on a capacity snapshot.

Reads a fleet snapshot and workloads (manifests, or a trace / generator spec such as
``trace:openb:default?load=1.3`` — :mod:`placer.traces.specs`), runs one or more solvers on the
identical input in ``batch``, ``online`` or ``stream`` mode (:mod:`placer.simulate`), and
prints per workload the cluster or the reasons, per cluster the utilisation before and after,
and a summary (placed GPU against the tightest bound, gang admission by size, fragmentation,
decision time, stream waits). ``-o json`` prints the same document the text is rendered from;
``--report DIR`` writes it with a Markdown summary and PNG plots (:mod:`placer.simulate.report`).
Several ``--seed``/``--load`` values or ``--drain-sweep`` sets make a sweep, its runs in
parallel (``--jobs``, ``--ray``; :mod:`placer.cli._sweep`).

Checks before simulating, each a clear message rather than a silent zero: the snapshot loads;
``--drain`` names clusters of it; the workload set is not empty; and resources requested by
workloads that no node of the snapshot offers are reported as a warning naming the resource,
the workloads asking for it and the closest names the snapshot has (the affected workloads are
then refused with that reason by the solver).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from placer.cli._decision import (
    add_policy_option,
    add_queues_option,
    add_rebalance_options,
    add_reserve_horizon_options,
    add_reserve_preempt_options,
    decision_queues,
    rebalance_policy,
    shared_reservation_policy,
    warn_unknown_clusters,
)
from placer.cli._output import add_output_option, print_data, print_table
from placer.cli._sweep import (
    drain_set,
    load_list,
    points,
    render_sweep,
    run_sweep,
    seed_list,
    sources_at_load,
)
from placer.cli._types import count, seconds, seconds_or_zero
from placer.cli.definitions import add_catalog_option, catalog_cache
from placer.errors import EXIT_ERROR, EXIT_OK, InputError, UsageError
from placer.model import GPU_SHARE, Fleet
from placer.policy import load_policies
from placer.quantity import GPU, PODS
from placer.simulate import MODES

if TYPE_CHECKING:
    from placer.queues import QueueSet
    from placer.simulate import Timed
    from placer.solver.rebalance import RebalancePolicy
    from placer.solver.reservations import ReservationPolicy
from placer.snapshot import load_snapshot
from placer.solver import SOLVERS

__all__ = ["register", "run"]

#: text output lists at most this many workloads, and reasons for this many unplaced ones.
TEXT_WORKLOADS = 40
TEXT_REASONS = 10
#: reservations listed per solver in text output.
TEXT_RESERVATIONS = 10
#: progress lines on stderr (a TTY, or --progress) at most this often, in seconds.
PROGRESS_EVERY = 5.0
DRAIN_REASON = "drained (what-if: placer simulate --drain)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="what-if placement on a capacity snapshot (several solvers side by side)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--snapshot", required=True, metavar="FILE", help="fleet snapshot YAML")
    parser.add_argument(
        "--workloads",
        required=True,
        action="append",
        metavar="PATH|SPEC",
        help="manifest file or directory, or a trace/generator spec "
        "(trace:openb:<variant>[?load=1.3&seed=42], trace:kalos, synthetic:gangs?seed=1&count=200);"
        " repeatable",
    )
    add_policy_option(parser)
    add_queues_option(parser)
    parser.add_argument(
        "--allow-preemption",
        action="store_true",
        help="stream with --queues: evict running work for pending work the queues entitle "
        "(reclaim over-quota work, preempt lower priorities; docs/queues.md)",
    )
    parser.add_argument(
        "--reserve-after",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="stream: a gang waiting this long gets a reservation, the rest backfills around "
        "it (docs/reservations.md); default: no reservations",
    )
    parser.add_argument(
        "--reserve-min-gpus",
        type=float,
        default=0.0,
        metavar="N",
        help="with --reserve-after: only gangs asking at least N GPUs get reservations",
    )
    parser.add_argument(
        "--reserve-priority",
        type=int,
        default=None,
        metavar="P",
        help="with --reserve-after: a gang with placer.dev/priority P or more gets a "
        "reservation at once, however short its wait",
    )
    parser.add_argument(
        "--max-reservations",
        type=count(1, 1000, "a number of reservations"),
        default=1,
        metavar="N",
        help="with --reserve-after: reservations held at once (default 1)",
    )
    add_reserve_preempt_options(parser)
    add_reserve_horizon_options(parser)
    parser.add_argument(
        "--runtime-noise",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="with --reserve-after: traces' run times as estimates are off by up to this "
        "fraction (0.5: ±50 %%; default 0, exact)",
    )
    parser.add_argument(
        "--fair-share-reclaim",
        action="store_true",
        help="with --allow-preemption: over-quota work may also evict other queues' "
        "over-quota work down to the weighted fair share (docs/queues.md)",
    )
    add_rebalance_options(parser, "with --allow-preemption")
    parser.add_argument(
        "--solver",
        default="cpsat",
        metavar="NAME[,NAME...]",
        help=f"solvers to compare on the same input: {', '.join(SOLVERS)} or all (default cpsat)",
    )
    parser.add_argument("--mode", choices=MODES, default="batch", help="default batch")
    parser.add_argument(
        "--drain",
        action="append",
        default=[],
        metavar="CLUSTER",
        help="take this cluster out of the fleet (what-if); repeatable",
    )
    parser.add_argument(
        "--drain-sweep",
        action="append",
        type=drain_set,
        default=[],
        metavar="SET",
        help="sweep: one run per SET of clusters drained together (comma-separated, or none); "
        "repeatable",
    )
    parser.add_argument(
        "--seed",
        type=seed_list,
        default=None,
        metavar="N",
        help="solver seed, and the seed of trace/generator specs that have none (default 42); "
        "several (N,N... or N-M): a sweep",
    )
    parser.add_argument(
        "--load",
        type=load_list,
        default=None,
        metavar="X[,X...]",
        help="set the load of every trace/generator spec (1.3: 130 %% of the fleet's GPUs); "
        "several: a sweep",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="a sweep's runs in N processes at once (default: the cores; 1: one after another)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run a sweep's runs on this Ray cluster (ray.init address; local: start one here)",
    )
    parser.add_argument(
        "--time-limit",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds per decision (default 1)",
    )
    parser.add_argument(
        "--interval",
        type=seconds_or_zero,
        default=0.0,
        metavar="SECONDS",
        help="stream: decide every SECONDS seconds of simulated time (default: at every event)",
    )
    add_catalog_option(parser)
    add_output_option(parser)
    parser.add_argument(
        "--report", metavar="DIR", help="also write JSON, Markdown and PNG plots to DIR"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress lines on stderr: each solver's start and end, and every "
        f"{PROGRESS_EVERY:.0f} s how far it is (stream: events, simulated time, running and "
        "queued workloads); default: when stderr is a terminal. stdout gets only the result",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    solvers = _solvers(args.solver)
    if not args.time_limit > 0:
        raise UsageError(f"--time-limit must be positive, got {args.time_limit}")
    if args.interval < 0:
        raise UsageError(f"--interval must be 0 or positive, got {args.interval}")
    seeds: list[int] = [42] if args.seed is None else args.seed
    loads: list[float | None] = [None] if args.load is None else list(args.load)
    drain_sets: list[tuple[str, ...]] = args.drain_sweep or [()]
    if len(seeds) * len(loads) * len(drain_sets) > 1 or args.ray:
        return _sweep(args, solvers, seeds, loads, drain_sets)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be 1 or more, got {args.jobs}")
    seed = seeds[0]
    from placer.simulate import Run, Settings, simulate  # the solver: only when simulating
    from placer.simulate.export import document

    fleet = load_snapshot(args.snapshot)
    simulated = drain(fleet, [*args.drain, *drain_sets[0]], source=args.snapshot)
    policies = tuple(p for path in args.policy for p in load_policies(path))
    warn_unknown_clusters(policies, fleet.names)
    queues = _queues(args)
    from placer.traces.specs import is_workload_spec

    sources = sources_at_load(args.workloads, loads[0], is_workload_spec)
    spec_seed = None if args.seed is None else seed
    items = load_workloads(sources, fleet, spec_seed, catalog_dirs=args.catalog)
    warnings = resource_warnings(items, fleet, args.snapshot)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    runs: list[Run] = []
    shown = sys.stderr.isatty() if args.progress is None else args.progress
    progress = _Progress(sys.stderr) if shown else None
    for solver in solvers:
        settings = Settings(
            solver=solver,
            mode=args.mode,
            policies=policies,
            time_limit=args.time_limit,
            seed=seed,
            interval=args.interval,
            queues=queues,
            preemption=args.allow_preemption,
            reservations=_reservations_policy(args, fleet.names),
            runtime_noise=args.runtime_noise,
            fair_share_reclaim=args.fair_share_reclaim,
            rebalance=_rebalance_policy(args),
        )
        runs.append(simulate(items, simulated, settings, progress=progress))
    doc = document(
        runs,
        items,
        inputs={
            "snapshot": args.snapshot,
            "workloads": list(args.workloads),
            "count": len(items),
            "clusters": list(fleet.names),
            "drained": list(dict.fromkeys([*args.drain, *drain_sets[0]])),
            "mode": args.mode,
            "solvers": solvers,
            "seed": seed,
            "time_limit_s": args.time_limit,
            "interval_s": args.interval,
            "policies": [p.name for p in policies],
            "queues": args.queues,
            "reserve_after_s": args.reserve_after,
        },
        warnings=warnings,
        drained=[*args.drain, *drain_sets[0]],
    )
    if args.report:
        from placer.simulate.report import write_report

        written = write_report(doc, Path(args.report))
        print(f"report: {', '.join(str(p) for p in written)}", file=sys.stderr)
    if args.output != "text":
        print_data(doc, args.output)
    else:
        render_text(doc, sys.stdout)
    # unplaced workloads are what a simulation finds out, not a failure; a decision the
    # independent verifier rejects is one
    problems = sum(row["verifier_problems"] for row in doc["comparison"])
    return EXIT_ERROR if problems else EXIT_OK


def _sweep(
    args: argparse.Namespace,
    solvers: list[str],
    seeds: list[int],
    loads: list[float | None],
    drain_sets: list[tuple[str, ...]],
) -> int:
    """Several seeds, loads or drained sets: every point with every solver (:mod:`._sweep`)."""
    if args.report:
        raise UsageError(
            "--report writes one simulation; a sweep prints its table (-o json for all figures)",
            hint="drop --report, or give one --seed, --load and --drain-sweep",
        )
    from placer.simulate import Settings
    from placer.traces.specs import is_workload_spec

    fleet = load_snapshot(args.snapshot)
    policies = tuple(p for path in args.policy for p in load_policies(path))
    queues = _queues(args)
    for names in drain_sets:  # every name known before anything runs
        drain(fleet, [*args.drain, *names], source=args.snapshot)
    settings = [
        Settings(
            solver=solver,
            mode=args.mode,
            policies=policies,
            time_limit=args.time_limit,
            interval=args.interval,
            queues=queues,
            preemption=args.allow_preemption,
            reservations=_reservations_policy(args, fleet.names),
            runtime_noise=args.runtime_noise,
            fair_share_reclaim=args.fair_share_reclaim,
            rebalance=_rebalance_policy(args),
        )
        for solver in solvers
    ]
    sweep = run_sweep(
        points(seeds, loads, drain_sets),
        sources=args.workloads,
        is_spec=is_workload_spec,
        load_items=lambda sources, seed: load_workloads(
            sources, fleet, seed, catalog_dirs=args.catalog
        ),
        fleet=fleet,
        drain=lambda whole, names: drain(whole, [*args.drain, *names], source=args.snapshot),
        settings=settings,
        jobs=args.jobs,
        ray_address=args.ray,
        inputs={
            "snapshot": args.snapshot,
            "workloads": list(args.workloads),
            "clusters": list(fleet.names),
            "drained": list(args.drain),
            "mode": args.mode,
            "solvers": solvers,
            "seeds": seeds,
            "loads": loads,
            "drain_sets": [list(s) for s in drain_sets],
            "time_limit_s": args.time_limit,
            "interval_s": args.interval,
            "policies": [p.name for p in policies],
            "queues": args.queues,
        },
    )
    if args.output != "text":
        print_data(sweep, args.output)
    else:
        render_sweep(sweep, sys.stdout)
    problems = sum(row["verifier_problems"] for p in sweep["points"] for row in p["comparison"])
    return EXIT_ERROR if problems else EXIT_OK


def _reservations_policy(
    args: argparse.Namespace, clusters: Sequence[str] = ()
) -> ReservationPolicy | None:
    """The ``--reserve-*`` options as a ReservationPolicy (``None`` without --reserve-after);
    ``clusters``: the snapshot's, which --reserve-horizon-cluster must name."""
    if args.reserve_after is None:
        for option, value in (
            ("--reserve-preempt-after", args.reserve_preempt_after),
            ("--reserve-preempt-slack", args.reserve_preempt_slack),
            ("--reserve-horizon", args.reserve_horizon),
            ("--reserve-horizon-cluster", args.reserve_horizon_cluster),
        ):
            if value is not None:
                raise UsageError(f"{option} goes with --reserve-after (reservations)")
        return None
    policy = shared_reservation_policy(
        args, min_gpus=args.reserve_min_gpus, max_reservations=args.max_reservations
    )
    if args.reserve_horizon_cluster is not None:
        if clusters and args.reserve_horizon_cluster not in clusters:
            raise UsageError(
                f"--reserve-horizon-cluster {args.reserve_horizon_cluster}: no such cluster in "
                f"{args.snapshot}",
                hint=f"name one of: {', '.join(clusters)}",
            )
    if args.mode != "stream":
        raise UsageError("--reserve-after needs --mode stream")
    if args.allow_preemption:
        raise UsageError("--reserve-after and --allow-preemption do not go together yet")
    if not 0 <= args.runtime_noise < 1:
        raise UsageError(f"--runtime-noise must be from 0 to below 1, got {args.runtime_noise:g}")
    return policy


def _queues(args: argparse.Namespace) -> QueueSet | None:
    """The ``--queues`` of ``args``, with ``--allow-preemption`` checked against them."""
    queues = decision_queues(args)
    if args.allow_preemption and (queues is None or args.mode != "stream"):
        raise UsageError("--allow-preemption needs --queues FILE and --mode stream")
    if args.fair_share_reclaim and not args.allow_preemption:
        raise UsageError("--fair-share-reclaim goes with --allow-preemption")
    _rebalance_policy(args)
    return queues


def _rebalance_policy(args: argparse.Namespace) -> RebalancePolicy | None:
    """``--rebalance`` and ``--rebalance-max-age`` as a policy (``None``: no rebalancing)."""
    return rebalance_policy(args, args.allow_preemption, "with --allow-preemption")


# --------------------------------------------------------------------------------------------
# input


def _solvers(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(SOLVERS)
    unknown = [n for n in names if n not in SOLVERS]
    if unknown or not names:
        raise UsageError(
            f"unknown solver {', '.join(unknown) or repr(text)}; "
            f"choose from {', '.join(SOLVERS)} (comma-separated) or all"
        )
    return list(dict.fromkeys(names))


def drain(fleet: Fleet, names: Sequence[str], *, source: str) -> Fleet:
    """The fleet with ``names`` taken out (unreachable, with the drain as the reason)."""
    unknown = [n for n in names if n not in fleet.names]
    if unknown:
        raise InputError(
            f"--drain {', '.join(unknown)}: no such cluster in the snapshot",
            source=source,
            hint=f"its clusters are: {', '.join(fleet.names) or 'none'}",
        )
    if not names:
        return fleet
    clusters = tuple(
        replace(c, reachable=False, reason=DRAIN_REASON) if c.name in names else c
        for c in fleet.clusters
    )
    return replace(fleet, clusters=clusters)


def load_workloads(
    sources: Sequence[str],
    fleet: Fleet,
    seed: int | None,
    *,
    catalog_dirs: Sequence[str] = (),
) -> list[Timed]:
    """Timed workloads from specs and manifests (files, directories, ``-``), in the order given.

    Manifests arrive one second apart in file and document order and run for their expected
    run time — the annotation ``placer.dev/expected-runtime``, else ``spec.activeDeadlineSeconds``
    — or, without one, never depart (a stream of them is a queue that drains); specs carry
    their own times.

    Raises:
        InputError: a bad spec or manifest, or no workload at all.
        PlacerError: a manifest no definition covers or that does not fit its definition (the
            first; the others are printed on stderr first, as ``placer plan`` does).
    """
    from placer.traces.specs import is_workload_spec, resolve_workloads

    items: list[Timed] = []
    catalog: Any = None
    for source in sources:
        if is_workload_spec(source):
            found: Sequence[Timed] = resolve_workloads(source, fleet=fleet, seed=seed)
        else:
            if catalog is None:
                from placer.definitions import Catalog

                catalog = Catalog.load(list(catalog_dirs), cache=catalog_cache())
                if fleet.accelerators:  # the table the snapshot was gathered with
                    from placer.accelerators import accelerators_from_dict

                    table = accelerators_from_dict(
                        fleet.accelerators, source="snapshot", field="accelerators"
                    )
                    catalog = catalog.with_accelerators(table)
                if fleet.topologies:  # the topologies the snapshot was gathered with
                    from placer.topology import topologies_from_list

                    catalog = catalog.with_topologies(topologies_from_list(fleet.topologies))
            found = _manifests(source, catalog, offset=len(items))
        if not found:
            raise InputError("holds no workload", source=source)
        items.extend(found)
    if not items:
        raise InputError("no workloads to simulate", hint="give --workloads PATH or a spec")
    seen: set[str] = set()
    for item in items:
        ref = str(item.workload.ref)
        if ref in seen:
            raise InputError(
                f"workload {ref} is given twice",
                hint="each workload (kind/namespace/name) may appear once across --workloads",
            )
        seen.add(ref)
    return items


def _manifests(source: str, catalog: Any, *, offset: int) -> list[Timed]:
    from placer.cli.describe import decompose_all
    from placer.definitions.documents import read_input
    from placer.solver.reservations import expected_runtime
    from placer.traces.workloads import TimedWorkload

    found, problems = decompose_all(read_input(source), catalog)
    if problems:
        for problem in problems[1:]:
            print(f"error: {problem}", file=sys.stderr)
        raise problems[0]
    items: list[Timed] = []
    for i, (document, decomposition) in enumerate(found):
        workload = decomposition.workload
        spec = document.data.get("spec")
        try:
            runtime = expected_runtime(
                workload.annotations, spec if isinstance(spec, dict) else None
            )
        except ValueError as error:
            raise InputError(f"{workload.ref}: {error}", source=document.source) from None
        items.append(TimedWorkload(workload, float(offset + i), runtime))
    return items


def resource_warnings(items: Sequence[Timed], fleet: Fleet, source: str) -> list[str]:
    """A warning per requested resource that no node of the snapshot offers."""
    offered: set[str] = {PODS}
    for cluster in fleet.clusters:
        for node in cluster.nodes:
            offered.update(n for n, v in node.allocatable.items() if v > 0)
    if GPU in offered:
        offered.add(GPU_SHARE)
    askers: dict[str, list[str]] = {}
    for item in items:
        for component in item.workload.components:
            for name, amount in component.pod.requests.items():
                if amount > 0 and name not in offered:
                    names = askers.setdefault(name, [])
                    ref = str(item.workload.ref)
                    if ref not in names:
                        names.append(ref)
    warnings = []
    for name, refs in sorted(askers.items()):
        shown = ", ".join(refs[:3]) + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
        close = difflib.get_close_matches(name, sorted(offered), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.append(
            f"{len(refs)} workload(s) request {name}, which no node of {source} offers "
            f"({shown}); they cannot be placed. The snapshot's resources are: "
            f"{', '.join(sorted(offered))}{hint}"
        )
    return warnings


class _Progress:
    """Progress lines (``simulate: SOLVER: DONE/TOTAL (ELAPSED s) DETAIL``): a solver's first
    report and its first with ``DONE == TOTAL``, and in between one every ``every`` seconds."""

    def __init__(self, out: TextIO, every: float = PROGRESS_EVERY) -> None:
        self.out = out
        self.every = every
        self.started = time.monotonic()
        self.last = self.started
        self.solver = ""
        self.ended = False

    def __call__(self, solver: str, done: int, total: int, detail: str) -> None:
        now = time.monotonic()
        first = solver != self.solver
        if not first and (self.ended or (done < total and now - self.last < self.every)):
            return
        if first:
            self.solver, self.started = solver, now
        self.last, self.ended = now, done >= total
        self.out.write(
            f"simulate: {solver}: {done}/{total} ({now - self.started:.0f} s) {detail}\n"
        )
        self.out.flush()


# --------------------------------------------------------------------------------------------
# text


def _n(value: float | int | None) -> str:
    """A number as the JSON document has it, without trailing zeros."""
    if value is None:
        return "-"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{_n(value)}s"


def render_text(doc: dict[str, Any], out: TextIO) -> None:
    """The document as text (every figure is the JSON document's, formatted)."""
    inputs = doc["input"]
    runs = doc["runs"]
    first = runs[0]["summary"] if runs else {}
    drained = f"; drained: {', '.join(inputs['drained'])}" if inputs["drained"] else ""
    out.write(
        f"Simulation: {_plural(inputs['count'], 'workload')} asking "
        f"{_n(first.get('gpus_demand'))} GPUs "
        f"on {inputs['snapshot']} ({len(inputs['clusters'])} clusters, "
        f"{_n(first.get('gpus_capacity'))} GPUs available{drained}); mode {inputs['mode']}, "
        f"seed {inputs['seed']}, time limit {_n(inputs['time_limit_s'])}s\n"
    )
    for warning in doc["warnings"]:
        out.write(f"warning: {warning}\n")
    out.write("\n")
    _comparison_table(doc, out)
    out.write("\n")
    _workload_table(runs, out)
    for run in runs:
        out.write(f"\n== {run['solver']} ({run['mode']}) ==\n")
        _reasons(run, out)
        _reservations(run, out)
        _clusters(run, out)
        _summary(run["summary"], out)


def _reservations(run: dict[str, Any], out: TextIO) -> None:
    """The stream's reservations (with --reserve-after): who, where, planned start, outcome."""
    made = run.get("reservations") or []
    if not made:
        return
    out.write(f"Reservations: {len(made)}\n")
    rows: list[list[object]] = [
        ["  WORKLOAD", "GPUS", "CLUSTER", "NODES", "PLANNED AT", "START", "STARTED", "OUTCOME"]
    ]
    for r in made[:TEXT_RESERVATIONS]:
        rows.append(
            [
                f"  {r['workload']}",
                _n(r["gpus"]),
                r["cluster"],
                r["nodes"],
                _s(r["planned_s"]),
                _s(r["start_s"]),
                _s(r["started_s"]) if r["started_s"] is not None else "-",
                r["outcome"],
            ]
        )
    print_table(rows, out)
    if len(made) > TEXT_RESERVATIONS:
        out.write(f"  ... {len(made) - TEXT_RESERVATIONS} more (-o json lists all)\n")
    evictions = run.get("preemptions") or []
    if evictions:
        victims = sum(len(p["victims"]) for p in evictions)
        lost = sum(p["lost_gpu_hours"] for p in evictions)
        out.write(
            f"Evictions for reservations: {len(evictions)} ({victims} gangs evicted, "
            f"{lost:.4g} GPU-hours of their work lost; -o json lists them)\n"
        )


def _comparison_table(doc: dict[str, Any], out: TextIO) -> None:
    stream = doc["input"]["mode"] == "stream"
    header: list[object] = [
        "SOLVER",
        "PLACED",
        "GPUS PLACED",
        "% OF BOUND",
        "ALLOC %",
        "DECISION P50",
        "P99",
    ]
    if stream:
        header += ["WAIT P50", "WAIT P99", "TIME-AVG ALLOC", "GPU-TIME % OF BOUND"]
    header.append("VERIFIER")
    rows: list[list[object]] = [header]
    for row in doc["comparison"]:
        cells: list[object] = [
            row["solver"],
            f"{row['placed']}/{row['workloads']}",
            _n(row["gpus_placed"]),
            _p(row["placed_of_bound_pct"]),
            _p(row["alloc_pct"]),
            _s(row["decision_p50_s"]),
            _s(row["decision_p99_s"]),
        ]
        if stream:
            cells += [
                _s(row["wait_p50_s"]),
                _s(row["wait_p99_s"]),
                _p(row["time_avg_alloc_pct"]),
                _p(row["gpu_time_of_bound_pct"]),
            ]
        problems = row["verifier_problems"]
        cells.append("ok" if not problems else f"{problems} PROBLEMS")
        rows.append(cells)
    print_table(rows, out)


def _workload_table(runs: list[dict[str, Any]], out: TextIO) -> None:
    if not runs:
        return
    count = len(runs[0]["workloads"])
    rows: list[list[object]] = [["WORKLOAD", "GPUS", *(r["solver"].upper() for r in runs)]]
    for i in range(min(count, TEXT_WORKLOADS)):
        entry = runs[0]["workloads"][i]
        ref = entry["workload"]
        cells: list[object] = [f"{ref['kind']}/{ref['namespace']}/{ref['name']}", _asked(entry)]
        cells += [_where(r["workloads"][i]) for r in runs]
        rows.append(cells)
    print_table(rows, out)
    if count > TEXT_WORKLOADS:
        out.write(f"... {count - TEXT_WORKLOADS} more (-o json or --report DIR lists all)\n")


def _asked(entry: dict[str, Any]) -> str:
    """A workload's GPUs: an elastic one as its range (``8-32``)."""
    if "gpus_max" in entry:
        return f"{_n(entry['gpus_min'])}-{_n(entry['gpus_max'])}"
    return _n(entry["gpus"])


def _where(entry: dict[str, Any]) -> str:
    """Where a run placed a workload; an elastic one placed below its most with its size."""
    cluster = entry["cluster"]
    if cluster is None:
        return "-"
    if "gpus_max" in entry and entry["gpus"] != entry["gpus_max"]:
        return f"{cluster} ({_n(entry['gpus'])} GPUs)"
    return str(cluster)


def _reasons(run: dict[str, Any], out: TextIO) -> None:
    unplaced = [w for w in run["workloads"] if w["cluster"] is None]
    if not unplaced:
        out.write("Every workload placed.\n")
        return
    more = len(unplaced) - TEXT_REASONS
    shown = f"; reasons for the first {TEXT_REASONS}" if more > 0 else ""
    out.write(f"Not placed: {len(unplaced)}{shown}\n")
    for entry in unplaced[:TEXT_REASONS]:
        ref = entry["workload"]
        out.write(f"  {ref['kind']}/{ref['namespace']}/{ref['name']} ({_asked(entry)} GPUs)\n")
        for cluster, reason in entry.get("reasons", {}).items():
            out.write(f"    {cluster}: {reason}\n")


def _clusters(run: dict[str, Any], out: TextIO) -> None:
    after = "AT LAST ARRIVAL" if run["mode"] == "stream" else "AFTER"
    header: list[object] = [
        "CLUSTER",
        "STATE",
        "NODES",
        "GPUS",
        f"GPU% BEFORE -> {after}",
        "CPU%",
        "MEMORY%",
    ]
    rows: list[list[object]] = [[*header, "FREE 8-GPU NODES"]]
    for c in run["clusters"]:
        b, a = c["before"], c["after"]
        rows.append(
            [
                c["name"],
                c["state"],
                c["nodes"],
                _n(c["gpus"]),
                f"{_p(b['gpu_pct'])} -> {_p(a['gpu_pct'])}",
                f"{_p(b['cpu_pct'])} -> {_p(a['cpu_pct'])}",
                f"{_p(b['memory_pct'])} -> {_p(a['memory_pct'])}",
                f"{b['whole_free_8gpu_nodes']} -> {a['whole_free_8gpu_nodes']}",
            ]
        )
    out.write("Clusters:\n")
    print_table(rows, out)


def _bound_text(s: dict[str, Any]) -> str:
    from placer.solver.report import BOUND_NAMES, bound_gap_text

    pct, gpus = _p(s["placed_of_bound_pct"]), _n(s["gpus_bound"])
    if s.get("stream"):
        return (
            f"{pct} of the stream's bound ({gpus} GPUs: the workloads that could run on the "
            "fleet on their own, each counted once)"
        )
    text = f"{pct} of the tightest bound ({gpus} GPUs)"
    (status,) = s["statuses"] or {"trivial": 1}
    gap = (
        bound_gap_text(
            status=status,
            placed_gpus=s["gpus_placed"],
            bound_gpus=s["gpus_bound"],
            demand_gpus=s["gpus_demand"],
            bound_key=s["bound_basis"],
        )
        if len(s["statuses"]) <= 1 and s["bound_basis"] in BOUND_NAMES
        else None
    )
    return f"{pct} of the tightest bound; {gap}" if gap else text


def _summary(s: dict[str, Any], out: TextIO) -> None:
    lines = [
        (
            "placed",
            f"{s['placed']} of {s['workloads']} workloads; {_n(s['gpus_placed'])} of "
            f"{_n(s['gpus_demand'])} GPUs asked",
        ),
        ("of bound", _bound_text(s)),
        ("allocation", f"{_p(s['alloc_pct'])} of {_n(s['gpus_capacity'])} GPUs at the end"),
        ("statuses", ", ".join(f"{k} {v}" for k, v in s["statuses"].items()) or "-"),
    ]
    frag = s["fragmentation"]
    lines.append(
        (
            "fragmentation",
            f"stranded {_n(frag['stranded_gpus'])} GPUs on {frag['stranded_nodes']} nodes "
            f"(vs {frag['against']} pods); {frag['whole_free_8gpu_nodes']} whole free 8-GPU "
            f"nodes; FGD measure {_n(frag['fgd_fragmented_gpus'])} GPUs",
        )
    )
    t = s["decision_time"]
    if t["p50_s"] is None:
        timing = (
            f"{t['decisions']} call deciding one workload at a time in {_s(t['total_s'])} "
            f"(mean {_s(t['per_workload_s'])} per workload)"
        )
    else:
        timing = (
            f"{t['decisions']} decision(s): p50 {_s(t['p50_s'])}, p99 {_s(t['p99_s'])}, "
            f"max {_s(t['max_s'])}"
        )
    lines.append(("decision time", timing))
    stream = s.get("stream")
    if stream:
        lines.append(
            (
                "stream",
                f"wait p50 {_s(stream['wait_p50_s'])}, p99 {_s(stream['wait_p99_s'])}, max "
                f"{_s(stream['wait_max_s'])}; never started {stream['never_started']}; "
                f"time-avg allocation {_p(stream['time_avg_alloc_pct'])} (offered "
                f"{_p(stream['offered_load_pct'])}); peak queue {stream['peak_queue']}; "
                f"makespan {_s(stream['makespan_s'])}",
            )
        )
        lines.append(
            (
                "GPU-time",
                f"{_n(stream['gpu_hours_in_window'])} GPU-hours held in the arrival window, "
                f"{_p(stream['gpu_time_of_bound_pct'])} of the most any policy could "
                f"({_n(stream['gpu_hours_bound'])}: the fluid bound, see simulations/README.md)",
            )
        )
    problems = s["verifier"]["problems"]
    verdict = "no problem" if not problems else f"{len(problems)} PROBLEM(S): {problems[0]}"
    lines.append(("verifier", f"{s['verifier']['decisions']} decision(s) checked: {verdict}"))
    out.write("Summary:\n")
    for name, text in lines:
        out.write(f"  {name:<14} {text}\n")
    out.write("  admission by gang size:\n")
    rows: list[list[object]] = [["    BUCKET", "ADMITTED", "GPUS ADMITTED"]]
    for b in s["admission"]:
        rows.append(
            [
                f"    {b['bucket']}",
                f"{b['admitted']}/{b['workloads']} ({_p(b['admitted_pct'])})",
                f"{_n(b['gpus_admitted'])}/{_n(b['gpus'])} ({_p(b['gpus_admitted_pct'])})",
            ]
        )
    print_table(rows, out)
