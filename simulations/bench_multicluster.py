"""Multi-cluster gangs: every solver on the same batch, against the node-aware bound.

Command (about 5–10 minutes on 2 cores)::

    python -m simulations.bench_multicluster                  # openb-4/8/16, seeds 1-3
    python -m simulations.bench_multicluster --fleets openb-8 --seeds 1

Setup (benchmark-design C.1/C.2 "W2"): the openb GPU nodes split by GPU model into 4, 8 and 16
clusters (``clusters/openb-{4,8,16}.yaml``); synthetic gangs — 1–3 components of openb pods,
the Kalos gang-size tail, each workload capped at 15 % of the largest cluster's GPUs, whole
workload in one cluster — drawn until their GPU demand is 120 % of the fleet's GPUs
(``synthetic:gangs?seed=S&load=1.2``). One ``batch`` decision per solver on identical input
(``placer simulate --mode batch --solver all``), CP-SAT at two time limits. Scored by placed GPUs
(node-realised, checked by the verifier) as % of the tightest bound the decision proved: the
node-aware LP with slot cuts (B3), unless capacity or demand is tighter.

Results: ``simulations/results/bench_multicluster.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.model import Fleet
from placer.simulate import Settings, simulate, summarize
from placer.simulate.capacity import gpu_milli
from placer.traces.specs import resolve_workloads
from simulations.benchmarking import (
    BATCH_ENTRIES,
    Entry,
    fleet_file,
    heading,
    mean,
    measure,
    pyplot,
    save,
    table,
)

__all__ = ["ENTRIES", "Config", "main", "run", "run_instance"]


#: CP-SAT at the default limit, at 3 s (how quality grows with the limit) and at a generous
#: one, and every baseline.
ENTRIES = (BATCH_ENTRIES[0], Entry("cpsat 3s", "cpsat", 3.0), *BATCH_ENTRIES[1:])


@dataclass(frozen=True)
class Config:
    fleets: tuple[str, ...] = ("openb-4", "openb-8", "openb-16")
    seeds: tuple[int, ...] = (1, 2, 3)
    load: float = 1.2
    entries: tuple[Entry, ...] = ENTRIES
    #: fleets given as objects (tests: a small split); names then label them.
    fleet_objects: dict[str, Fleet] = field(default_factory=dict)


def run_instance(fleet: Fleet, seed: int, config: Config) -> dict[str, Any]:
    """Every entry on one (fleet, seed) batch."""
    items = resolve_workloads(f"synthetic:gangs?seed={seed}&load={config.load}", fleet=fleet)
    rows = {}
    for entry in config.entries:
        settings = Settings(
            solver=entry.solver, mode="batch", time_limit=entry.time_limit, seed=seed
        )
        run_ = simulate(items, fleet, settings)
        summary = summarize(run_, items)
        record = run_.decisions[0]
        node_lp = record.solver_bounds.get("node_lp_gpu")
        big = [b for b in summary.buckets if b.label in ("65-512 GPUs", ">512 GPUs")]
        rows[entry.label] = {
            "gpus_placed": round(summary.gpu_placed_milli / 1000, 3),
            "placed": summary.placed,
            "pct_of_bound": round(summary.placed_of_bound_pct or 0.0, 3),
            "pct_of_node_lp": round(100 * summary.gpu_placed_milli / 1000 / node_lp, 3)
            if node_lp
            else None,
            "big_gangs_admitted": sum(b.admitted for b in big),
            "big_gangs": sum(b.workloads for b in big),
            "status": record.status,
            "decision_s": round(record.seconds, 3),
            "decision_cpu_s": round(record.cpu_seconds, 3),
            "verifier_problems": len(summary.problems),
        }
    # every entry decided the same input, so the LP bounds are the same: keep the last ones
    return {
        "seed": seed,
        "workloads": len(items),
        "gpus_demand": round(sum(gpu_milli(i.workload.total_requests()) for i in items) / 1000, 3),
        "bounds": dict(record.solver_bounds),
        "bound_gpus": round(record.bound_gpu_milli / 1000, 3),
        "entries": rows,
    }


def run(config: Config) -> dict[str, Any]:
    fleets: dict[str, Any] = {}
    for name in config.fleets:
        fleet = config.fleet_objects.get(name) or fleet_file(name)
        instances = [run_instance(fleet, seed, config) for seed in config.seeds]
        labels = [e.label for e in config.entries]
        baselines = [e.label for e in config.entries if e.solver != "cpsat"]
        summary = {}
        for label in labels:
            mine = [i["entries"][label] for i in instances]
            summary[label] = {
                "pct_of_bound_mean": mean([m["pct_of_bound"] for m in mine]),
                "pct_of_bound_min": min(m["pct_of_bound"] for m in mine),
                "gpus_placed_mean": mean([m["gpus_placed"] for m in mine]),
                "big_gangs_admitted": sum(m["big_gangs_admitted"] for m in mine),
                "decision_s_mean": mean([m["decision_s"] for m in mine]),
                "decision_s_max": max(m["decision_s"] for m in mine),
                "decision_cpu_s_max": max(m["decision_cpu_s"] for m in mine),
                "statuses": ", ".join(sorted({m["status"] for m in mine})),
                "verifier_problems": sum(m["verifier_problems"] for m in mine),
                "ahead_of_every_baseline": sum(
                    1
                    for i in instances
                    if all(
                        i["entries"][label]["gpus_placed"] > i["entries"][b]["gpus_placed"]
                        for b in baselines
                        if b != label
                    )
                ),
                "not_below_any_baseline": sum(
                    1
                    for i in instances
                    if all(
                        i["entries"][label]["gpus_placed"] >= i["entries"][b]["gpus_placed"]
                        for b in baselines
                        if b != label
                    )
                ),
                "at_least_99": sum(1 for m in mine if m["pct_of_bound"] >= 99.0),
            }
        fleets[name] = {
            "clusters": len(fleet.clusters),
            "big_gangs": instances[0]["entries"][labels[0]]["big_gangs"] if instances else 0,
            "instances": instances,
            "summary": summary,
        }
    return {
        "config": {
            "fleets": list(config.fleets),
            "seeds": list(config.seeds),
            "load": config.load,
            "entries": [e.__dict__ for e in config.entries],
        },
        "fleets": fleets,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = heading(
        "Multi-cluster gangs: batch placement, every solver on identical input",
        meta,
        f"Synthetic gangs at {result['config']['load']:g}× the fleet's GPUs; seeds "
        f"{', '.join(map(str, result['config']['seeds']))}.",
    )
    for name, fleet in result["fleets"].items():
        instances = fleet["instances"]
        lines += [
            f"## {name} ({fleet['clusters']} clusters)",
            "",
            "Per seed: "
            + "; ".join(
                f"seed {i['seed']}: {i['workloads']} workloads, {i['gpus_demand']:g} GPUs asked, "
                f"bound {i['bound_gpus']:g} GPUs (node LP {i['bounds'].get('node_lp_gpu')}, "
                f"cluster LP {i['bounds'].get('cluster_lp_gpu')})"
                for i in instances
            ),
            "",
        ]
        rows = [
            [
                label,
                s["pct_of_bound_mean"],
                s["pct_of_bound_min"],
                s["gpus_placed_mean"],
                f"{s['big_gangs_admitted']}",
                s["decision_s_mean"],
                s["decision_s_max"],
                s["decision_cpu_s_max"],
                s["statuses"],
                f"{s.get('at_least_99', 0)}/{len(instances)}",
                f"{s['ahead_of_every_baseline']}/{len(instances)}",
                f"{s.get('not_below_any_baseline', 0)}/{len(instances)}",
                s["verifier_problems"],
            ]
            for label, s in fleet["summary"].items()
        ]
        lines += [
            table(
                [
                    "solver",
                    "% of bound (mean)",
                    "min",
                    "GPUs placed (mean)",
                    "gangs > 64 GPUs admitted (all seeds)",
                    "decision s (mean)",
                    "max",
                    "max CPU s",
                    "status",
                    ">= 99 % of bound",
                    "ahead of every baseline",
                    "not below any baseline",
                    "verifier problems",
                ],
                rows,
            ),
            "",
        ]
    lines += ["![placed % of bound](bench_multicluster.png)", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    plt = pyplot()
    fleets = result["fleets"]
    labels = [e["label"] for e in result["config"]["entries"]]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        values = [f["summary"][label]["pct_of_bound_mean"] or 0 for f in fleets.values()]
        ax.bar([i + k * width for i in range(len(fleets))], values, width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(fleets))], list(fleets))
    ax.axhline(99, color="gray", linestyle="--", linewidth=1)
    ax.set_ylim(0, 105)
    ax.set_ylabel("placed GPUs, % of tightest bound")
    ax.set_title("Batch placement of synthetic gangs at 120 % load (dashed: 99 %)")
    ax.legend(fontsize=7, ncol=4, loc="lower center")
    save(fig, "bench_multicluster")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulations.bench_multicluster", description=__doc__
    )
    parser.add_argument("--fleets", default="openb-4,openb-8,openb-16")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--load", type=float, default=1.2)
    args = parser.parse_args(argv)
    config = Config(
        fleets=tuple(args.fleets.split(",")),
        seeds=tuple(int(s) for s in args.seeds.split(",")),
        load=args.load,
    )
    result, paths = measure("bench_multicluster", lambda: run(config), markdown, plot)
    for name, fleet in result["fleets"].items():
        for label, s in fleet["summary"].items():
            print(f"{name} {label:10s} {s['pct_of_bound_mean']:7.2f}% of bound")
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
