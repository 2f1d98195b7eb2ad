"""Quality at the default time limit: CP-SAT's 1-s batch decision on the nine openb
multi-cluster instances, over several search seeds, optionally side by side with other code.

Command (about 2 minutes per 27 decisions on 2 cores)::

    python -m simulations.bench_quality                         # 9 instances x seeds 1-3
    python -m simulations.bench_quality --baseline DIR          # and DIR's code, alternately
    python -m simulations.bench_quality --fleets openb-8 --search-seeds 1,2,3,4,5
    python -m simulations.bench_quality --baseline DIR --wall-safety 20   # a loaded machine
    python -m simulations.bench_quality --one-queue 1000 --baseline DIR   # under a queue

Why another benchmark next to ``bench_multicluster``: at a fixed time limit the search ends
where its random draws got it, so one decision per instance (search seed = instance seed)
says little about an instance; here each instance is decided with several search seeds and
reported by its mean and its worst. The instances are ``bench_multicluster``'s (openb split
into 4, 8 and 16 clusters, synthetic gangs at 120 % of the GPUs, seeds 1-3); every baseline
decides each instance once (they draw nothing). ``--baseline DIR`` runs a checkout of other
code (e.g. ``git worktree add /tmp/base main``) in a second process, the two processes taking
turns decision by decision, so both see the same machine load. Each decision records its
process CPU and wall seconds, against the limit (issue 18: both within 1.05 x the limit; the
limit counts CPU time, so wall time on a loaded machine says more about the load than about
the solver: the load average is recorded).

``--one-queue GPUS`` decides under queues (:func:`placer.solver.fairshare.solve_fair`): one
queue ``default`` that every gang falls in, deserving ``GPUS`` GPUs, so the decision has an
in-quota and an over-quota tier and every gang is of one queue and priority — the most work
for the queue's order (:mod:`placer.solver.order_repair`); its results go to
``bench_quality_queues``.

Results: ``simulations/results/bench_quality.{json,md}`` (``bench_quality_queues`` with
``--one-queue``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulations.benchmarking import ROOT, commit_of, heading, mean, measure, table

__all__ = ["BASELINES", "ROOT", "WORKER", "main", "run"]

#: the baselines every instance is decided by once (their best is the "best baseline").
BASELINES = ("greedy", "karmada", "first-fit", "best-fit", "worst-fit")

#: the decision loop of one code checkout (run with ``PYTHONPATH`` at it): reads
#: ``fleet seed solver search_seed limit`` lines, writes one JSON line per decision. Only
#: interfaces older code has too (simulate, summarize, the synthetic gangs).
WORKER = """
import json, os, sys
import placer.solver.clock
from placer.simulate import Settings, simulate, summarize
from placer.traces.specs import resolve_workloads
from simulations.benchmarking import fleet_file
if os.environ.get("PLACER_BENCH_WALL_SAFETY"):
    placer.solver.clock.WALL_SAFETY = float(os.environ["PLACER_BENCH_WALL_SAFETY"])
queues = None
if os.environ.get("PLACER_BENCH_QUEUES"):
    from placer.queues import queues_from_yaml
    queues = queues_from_yaml(os.environ["PLACER_BENCH_QUEUES"], source="--one-queue")
cache = {}
for line in sys.stdin:
    name, seed, solver, search_seed, limit = line.split()
    if (name, seed) not in cache:
        fleet = fleet_file(name)
        spec = f"synthetic:gangs?seed={seed}&load=1.2"
        cache[(name, seed)] = (fleet, resolve_workloads(spec, fleet=fleet))
    fleet, items = cache[(name, seed)]
    settings = Settings(
        solver=solver, mode="batch", time_limit=float(limit), seed=int(search_seed), queues=queues
    )
    run = simulate(items, fleet, settings)
    summary = summarize(run, items)
    record = run.decisions[0]
    print(json.dumps({
        "pct_of_bound": round(summary.placed_of_bound_pct or 0.0, 3),
        "gpus_placed": round(summary.gpu_placed_milli / 1000, 3),
        "bound_gpus": round(record.bound_gpu_milli / 1000, 3),
        "cpu_s": round(record.cpu_seconds, 3),
        "wall_s": round(record.seconds, 3),
        "verifier_problems": len(summary.problems),
    }), flush=True)
"""


class _Worker:
    """One code checkout's decision loop in its own process."""

    def __init__(
        self, label: str, tree: Path, wall_safety: float | None, queues: str | None = None
    ) -> None:
        self.label = label
        self.tree = tree
        env = {**os.environ, "PYTHONPATH": str(tree)}
        if wall_safety is not None:
            env["PLACER_BENCH_WALL_SAFETY"] = str(wall_safety)
        if queues is not None:
            env["PLACER_BENCH_QUEUES"] = queues
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def decide(self, fleet: str, seed: int, solver: str, search_seed: int, limit: float) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{fleet} {seed} {solver} {search_seed} {limit}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} worker ({self.tree}) stopped")
        return json.loads(line)

    def commit(self) -> str:
        return commit_of(self.tree)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def run(
    fleets: tuple[str, ...],
    seeds: tuple[int, ...],
    search_seeds: tuple[int, ...],
    limit: float,
    baseline: Path | None,
    wall_safety: float | None = None,
    one_queue: int | None = None,
) -> dict[str, Any]:
    queues = one_queue_yaml(one_queue) if one_queue is not None else None
    workers = [_Worker("this", ROOT, wall_safety, queues)]
    if baseline is not None:
        workers.append(_Worker("baseline", baseline, wall_safety, queues))
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    instances = []
    turn = 0
    try:
        for fleet in fleets:
            for seed in seeds:
                codes: dict[str, list[dict[str, Any]]] = {w.label: [] for w in workers}
                for search_seed in search_seeds:
                    # the two checkouts take turns, each going first every other time
                    for worker in workers if turn % 2 == 0 else workers[::-1]:
                        row = worker.decide(fleet, seed, "cpsat", search_seed, limit)
                        codes[worker.label].append({"search_seed": search_seed, **row})
                    turn += 1
                rules = {b: workers[0].decide(fleet, seed, b, seed, limit) for b in BASELINES}
                instances.append({"fleet": fleet, "seed": seed, "cpsat": codes, "baselines": rules})
        commits = {w.label: w.commit() for w in workers}
    finally:
        for worker in workers:
            worker.close()
    return {
        "config": {
            "fleets": list(fleets),
            "seeds": list(seeds),
            "search_seeds": list(search_seeds),
            "time_limit": limit,
            "baseline": str(baseline) if baseline is not None else None,
            "wall_safety": wall_safety,
            "one_queue_gpus": one_queue,
        },
        "commits": commits,
        "load_average_at_start": load_at_start,
        "instances": instances,
        "summary": {w.label: _summary(instances, w.label, limit) for w in workers},
    }


def one_queue_yaml(gpus: int) -> str:
    """The queues of ``--one-queue``: ``default`` (every unlabelled gang's) deserving
    ``gpus`` GPUs, no limit."""
    return (
        "apiVersion: placer.dev/v1alpha1\nkind: Queue\nmetadata: {name: default}\n"
        f"spec:\n  resources:\n    nvidia.com/gpu: {{quota: {gpus}}}\n"
    )


def _summary(instances: list[dict[str, Any]], label: str, limit: float) -> dict[str, Any]:
    rows = [r for i in instances for r in i["cpsat"][label]]
    means = [mean([r["pct_of_bound"] for r in i["cpsat"][label]]) for i in instances]
    best_rule = [max(b["gpus_placed"] for b in i["baselines"].values()) for i in instances]
    return {
        "decisions": len(rows),
        "pct_of_bound_mean": mean([r["pct_of_bound"] for r in rows]),
        "pct_of_bound_min": min(r["pct_of_bound"] for r in rows),
        "instances_mean_at_least_99": sum(1 for m in means if m is not None and m >= 99.0),
        "decisions_at_least_99": sum(1 for r in rows if r["pct_of_bound"] >= 99.0),
        "decisions_below_best_baseline": sum(
            1
            for i, best in zip(instances, best_rule, strict=True)
            for r in i["cpsat"][label]
            if r["gpus_placed"] < best
        ),
        "cpu_s_max": max(r["cpu_s"] for r in rows),
        "wall_s_max": max(r["wall_s"] for r in rows),
        "decisions_within_limit": sum(
            1 for r in rows if r["cpu_s"] <= 1.05 * limit and r["wall_s"] <= 1.05 * limit
        ),
        # not "verifier_problems": the decisions' own counts are what the tables add up
        "verifier_problems_in_decisions": sum(r["verifier_problems"] for r in rows),
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    config = result["config"]
    labels = list(result["summary"])
    commits = result["commits"]
    lines = heading(
        "Quality at the default time limit: CP-SAT on the openb instances, several search seeds",
        meta,
        f"CP-SAT at {config['time_limit']:g} s on {', '.join(config['fleets'])} x instance seeds "
        f"{', '.join(map(str, config['seeds']))} (synthetic gangs at 120 %), search seeds "
        f"{', '.join(map(str, config['search_seeds']))}; "
        + (
            f"side by side with the code of `{config['baseline']}` (at {commits['baseline']}; "
            f"this code at {commits['this']}), decision by decision in turns. "
            if "baseline" in commits
            else ""
        )
        + (
            f"Under one queue `default` deserving {config['one_queue_gpus']} GPUs "
            "(`--one-queue`): fair share's tiers and the queue's order. "
            if config.get("one_queue_gpus") is not None
            else ""
        )
        + (
            f"The wall-clock safety net was {config['wall_safety']:g} x the limit instead of "
            "the solver's 3 x (`--wall-safety`): the decisions got their CPU second however "
            "loaded the machine was, so their wall times say nothing about the solver. "
            if config.get("wall_safety")
            else ""
        ),
    )
    lines += ["## Summary", ""]
    lines.append(
        table(
            [
                "code",
                "decisions",
                "% of bound (mean)",
                "min",
                "instances with mean >= 99 %",
                "decisions >= 99 %",
                "decisions below the best baseline",
                "max CPU s",
                "max wall s",
                "decisions within 1.05 x limit (CPU and wall)",
                "verifier problems",
            ],
            [
                [
                    f"{label} ({commits[label]})",
                    s["decisions"],
                    s["pct_of_bound_mean"],
                    s["pct_of_bound_min"],
                    f"{s['instances_mean_at_least_99']}/{len(result['instances'])}",
                    f"{s['decisions_at_least_99']}/{s['decisions']}",
                    s["decisions_below_best_baseline"],
                    s["cpu_s_max"],
                    s["wall_s_max"],
                    f"{s['decisions_within_limit']}/{s['decisions']}",
                    s["verifier_problems_in_decisions"],
                ]
                for label, s in result["summary"].items()
            ],
        )
    )
    lines += ["", "## Per instance (% of the bound: mean, min-max over the search seeds)", ""]
    rows = []
    for instance in result["instances"]:
        best = max(instance["baselines"].items(), key=lambda item: item[1]["gpus_placed"])
        row: list[Any] = [instance["fleet"], instance["seed"]]
        for label in labels:
            pcts = [r["pct_of_bound"] for r in instance["cpsat"][label]]
            row.append(f"{mean(pcts):.2f} ({min(pcts):.2f}-{max(pcts):.2f})")
        row.append(f"{best[1]['pct_of_bound']:.2f} ({best[0]})")
        rows.append(row)
    lines.append(
        table(
            ["fleet", "seed", *(f"CP-SAT, {label} code" for label in labels), "best baseline"],
            rows,
        )
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fleets", default="openb-4,openb-8,openb-16")
    parser.add_argument("--seeds", default="1,2,3", help="instance seeds")
    parser.add_argument("--search-seeds", default="1,2,3", help="CP-SAT search seeds")
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument(
        "--baseline", type=Path, help="also run the code of this checkout, in turns"
    )
    parser.add_argument(
        "--wall-safety",
        type=float,
        help="the wall-clock safety net, x the limit (placer.solver.clock.WALL_SAFETY; "
        "default: the solver's); raise it to measure the search's quality per CPU second on "
        "a loaded machine, where the net would cut decisions short",
    )
    parser.add_argument(
        "--one-queue",
        type=int,
        metavar="GPUS",
        help="decide under one queue deserving GPUS GPUs (results: bench_quality_queues)",
    )
    args = parser.parse_args(argv)

    def ints(text: str) -> tuple[int, ...]:
        return tuple(int(x) for x in text.split(","))

    measure(
        "bench_quality" if args.one_queue is None else "bench_quality_queues",
        lambda: run(
            tuple(args.fleets.split(",")),
            ints(args.seeds),
            ints(args.search_seeds),
            args.time_limit,
            args.baseline.resolve() if args.baseline is not None else None,
            args.wall_safety,
            args.one_queue,
        ),
        markdown,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
