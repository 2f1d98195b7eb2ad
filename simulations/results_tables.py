"""The figures of the docs, written from the committed result files (``make results``).

README.md, simulations/README.md and the pages of docs/ quote benchmark figures. Each quoted
table sits between two markers::

    <!-- results:NAME -->
    | ... the table, written by this script ... |
    <!-- /results:NAME -->

and :data:`REGIONS` says how table ``NAME`` is made from ``simulations/results/*.json``.
``python -m simulations.results_tables`` (``make results``) rewrites every marked table in
place; ``--check`` only reports the tables that differ from what would be written (exit 1), as
tests/simulations/test_results_tables.py does, so a figure edited by hand or left behind by a
new result file fails ``make test``. Run a benchmark, then ``make results``, commit both.

Only the tables are written. Prose next to them that quotes a figure is the author's to keep
true; the tables are what a reader compares.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "simulations" / "results"
#: the files whose marked tables this script writes
DOCUMENTS = ("README.md", "simulations/README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
))  # fmt: skip

_REGION = re.compile(
    r"(?P<open><!-- results:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.DOTALL,
)


class ResultError(Exception):
    """A result file lacks what a table needs."""


@cache
def result(name: str) -> Mapping[str, Any]:
    """``simulations/results/<name>.json``."""
    path = RESULTS / f"{name}.json"
    try:
        data: Mapping[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResultError(f"{path}: {exc}") from None
    return data


def get(name: str, *keys: str | int) -> Any:
    """``result(name)[k1][k2]...``, or a :class:`ResultError` naming the file and the path."""
    value: Any = result(name)
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            path = "".join(f"[{k!r}]" for k in keys)
            raise ResultError(f"simulations/results/{name}.json has no {path}") from None
    return value


# --------------------------------------------------------------------------------------------
# formatting


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def num(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals and thousands separators (6,212; 95.38)."""
    return f"{value:,.{digits}f}"


def signed(value: float) -> str:
    text = f"{abs(value):.2f}"
    return f"+{text}" if value > 0 else f"−{text}" if value < 0 else text


def wait(seconds: float) -> str:
    """A wait as the stream table writes it: s below 100 s, min below 100 min, else h."""
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        minutes = seconds / 60
        return f"{minutes:.1f} min" if minutes < 20 else f"{minutes:.0f} min"
    return f"{seconds / 3600:.1f} h"


def span(values: Sequence[float], digits: int = 1, unit: str = "") -> str:
    low, high = min(values), max(values)
    if round(low, digits) == round(high, digits):
        return f"{num(low, digits)}{unit}"
    return f"{num(low, digits)}–{num(high, digits)}{unit}"


def load_range(name: str) -> str:
    """The 1-minute load averages a result file recorded at start and end, as a range (the
    start in ``meta`` when :func:`simulations.benchmarking.measure` wrote it)."""
    data = result(name)
    start = data["meta"] if "load_average_at_start" in data.get("meta", {}) else data
    loads = [float(get(name, "load_average_at_end")[0]), float(start["load_average_at_start"][0])]
    return span(sorted(loads))


# --------------------------------------------------------------------------------------------
# the tables

SOLVER_NAMES = {
    "cpsat": "CP-SAT",
    "greedy": "greedy",
    "karmada": "Karmada",
    "first-fit": "first-fit (Nova)",
    "best-fit": "best-fit",
    "worst-fit": "worst-fit",
}


def _solver_label(entry: Mapping[str, Any]) -> str:
    name = SOLVER_NAMES.get(entry["solver"], entry["solver"])
    label = f"{name} {entry['time_limit']:g} s" if entry["solver"] == "cpsat" else str(name)
    if entry.get("reservations"):
        label += " + reservations"
        if entry.get("runtime_noise"):
            label += f" (±{entry['runtime_noise'] * 100:g} % estimates)"
    return label


def fgd_table() -> str:
    """simulations/README.md §1: FGD's replay, placer against the published policies."""
    published = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
    rows = []
    for variant in get("bench_fgd", "config", "variants"):
        v = get("bench_fgd", "variants", variant)
        gap = v["points_vs_fgd"]
        level = " (level)" if abs(gap) < 0.05 else ""
        rows.append(
            [
                variant,
                f"**{v['alloc_pct_mean']:.2f}** ± {v['alloc_pct_std']:.2f}",
                *(f"{v['published_at_130'][p]['alloc_pct']:.2f}" for p in published),
                f"{signed(gap)}{level}",
            ]
        )
    return table(["task list", "placer online", *published, "placer − FGD"], rows)


def multicluster_table() -> str:
    """simulations/README.md §2: % of the tightest bound per fleet and solver."""
    entries = get("bench_multicluster", "config", "entries")
    rows = []
    for fleet in get("bench_multicluster", "config", "fleets"):
        data = get("bench_multicluster", "fleets", fleet)
        summary = data["summary"]
        best = max(summary[e["label"]]["pct_of_bound_mean"] for e in entries)
        cells: list[object] = [fleet]
        for entry in entries:
            label = entry["label"]
            mean = summary[label]["pct_of_bound_mean"]
            text = f"{mean:.2f}"
            if entry["solver"] == "cpsat":
                values = [i["entries"][label]["pct_of_bound"] for i in data["instances"]]
                text += f" ({min(values):.2f}–{max(values):.2f})"
            cells.append(f"**{text}**" if mean == best else text)
        rows.append(cells)
    return table(["fleet", *(_solver_label(e) for e in entries)], rows)


def stream_table() -> str:
    """simulations/README.md §4: the stream's waits, allocation and decisions per solver."""
    header = [
        "solver",
        "wait p50",
        "wait p99",
        "gangs 65–512 GPUs: wait p50 / p99",
        "time-avg allocation",
        "GPU-time, % of bound",
        "peak queue",
        "decisions: p50 / p99 wall (CPU p99)",
        "never started",
    ]
    entries = get("bench_stream", "config", "entries")
    solvers = get("bench_stream", "solvers")
    best_alloc = max(solvers[e["label"]]["time_avg_alloc_pct"] for e in entries)
    best_time = max(solvers[e["label"]]["gpu_time_of_bound_pct"] for e in entries)
    rows = []
    for entry in entries:
        s = solvers[entry["label"]]
        big = s["by_size"]["65-512 GPUs"]
        alloc = f"{s['time_avg_alloc_pct']:.1f} %"
        share = f"{s['gpu_time_of_bound_pct']:.1f} %"
        rows.append(
            [
                _solver_label(entry),
                wait(s["wait_p50_s"]),
                wait(s["wait_p99_s"]),
                f"{wait(big['wait_p50_s'])} / {wait(big['wait_p99_s'])}",
                f"**{alloc}**" if s["time_avg_alloc_pct"] == best_alloc else alloc,
                f"**{share}**" if s["gpu_time_of_bound_pct"] == best_time else share,
                s["peak_queue"],
                f"{s['decision_p50_s']:.2f} / {s['decision_p99_s']:.2f} s "
                f"({s['decision_cpu_p99_s']:.2f} s)",
                s["never_started"],
            ]
        )
    return table(header, rows)


# -- one line per benchmark: what it measures, its figures --------------------------------------


def decompose_line() -> str:
    trusted = get("bench_decompose", "decompose", "manifests_per_cpu_s")
    untrusted = get("bench_decompose", "untrusted", "manifests_per_cpu_s")
    target = get("bench_decompose", "target_manifests_per_s")
    met = "met" if min(trusted, untrusted) >= target else "**not met**"
    return (
        f"**{trusted:,} manifests/s** per CPU second, untrusted definitions {untrusted:,}/s "
        f"(the worker's CPU included; target {target:,.0f}/s: {met})"
    )


def gather_line() -> str:
    variants = get("bench_gather", "variants")
    parts = []
    for v in variants:
        met = "met" if v["target_ratio_met"] else "not met"
        parts.append(f"{v['label']}: {v['ratio_all_over_slowest']:.2f}× ({met})")
    snapshot = [v["median_snapshot_build_s"] for v in variants]
    rss = max(v["placer_snapshot_process"]["peak_rss_mib"] for v in variants)
    return (
        f"all/slowest (target ≤ 2×): {'; '.join(parts)} (`bench_gather-analysis.md`); "
        f"snapshot {span(snapshot, 1, ' s')} (target < 10 s), peak RSS of `placer snapshot` "
        f"{rss:.0f} MiB"
    )


def submit_line() -> str:
    batch = get("bench_submit", "modes", "batch")
    sequential = get("bench_submit", "modes", "sequential")
    side = get("bench_submit", "side_by_side")
    medians = side["median_workloads_per_s"]
    return (
        f"**{batch['workloads_per_s']:.1f}/s** in one batch of {batch['workloads']} (target "
        f"50/s), {batch['overcommitted_nodes']} nodes overcommitted; one command per workload "
        f"{sequential['workloads_per_s']:.2f}/s; side by side with {side['baseline']}: "
        f"{medians['current']:.1f} vs {medians['baseline']:.1f}/s (medians of {side['repeat']} "
        f"alternating runs, {side['ratio']:.2f}x)"
    )


def controller_line() -> str:
    side = get("bench_controller", "side_by_side")
    rate = side["median_dispatched_per_s"]["current"]
    cpu = side["median_controller_cpu_ms_per_workload"]["current"]
    rates = [r["dispatched_per_s"] for r in get("bench_controller", "runs")]
    return (
        f"**{rate:.0f}/s** median of {side['repeat']} runs ({min(rates):.0f}–{max(rates):.0f}; "
        f"target 100/s), {cpu:.1f} ms controller CPU per workload; side by side with "
        f"{side['baseline']}: {side['rate_ratio']:.2f}x the rate, {side['cpu_ratio']:.2f}x "
        "the CPU"
    )


def churn_line() -> str:
    census, end = get("bench_churn", "census"), get("bench_churn", "end")
    controller, checks = get("bench_churn", "controller"), get("bench_churn", "checks")
    rss = controller["rss_calm"]
    failed = [name.replace("_", " ") for name, ok in checks.items() if not ok]
    verdict = "all checks met" if not failed else f"**not met**: {', '.join(failed)}"
    return (
        f"{verdict}: {census['hub_workloads_on_two_members']} workloads on two members, "
        f"{census['overcommitted_nodes']} overcommitted nodes, "
        f"{end['without_final_state']} hub objects without a final state, "
        f"{end['in_flight_entries']} in-flight entries and {end['stale_copies']} stale copies "
        f"at the end; controller RSS {rss['growth_pct']:+.1f} % over the last "
        f"{rss['seconds'] / 60:.0f} minutes ({rss['first_mib']:.0f} → {rss['last_mib']:.0f} MiB); "
        f"{controller['cpu_ms_per_event']:.1f} ms CPU and {controller['log_lines_per_event']:.2f} "
        f"log lines per event over {get('bench_churn', 'churn', 'events'):,} events"
    )


def topology_line() -> str:
    solvers = get("bench_topology", "solvers")
    parts = []
    for name in ("cpsat", "greedy"):
        if name not in solvers:
            continue
        s = solvers[name]
        with_, without = s["topology"], s["oblivious"]
        parts.append(
            f"{SOLVER_NAMES.get(name, name)}: {with_['one_rack_pct']:.1f} % of placed gangs in "
            f"one rack with topology ({without['one_rack_pct']:.1f} % oblivious), "
            f"{with_['gpus_placed']:,} GPUs placed ({s['topology_vs_oblivious_pct']:.1f} % of the "
            f"oblivious decision's {without['gpus_placed']:,}), "
            f"{with_['nvlink_domains_per_gang']:.2f} NVLink domains per gang vs "
            f"{without['nvlink_domains_per_gang']:.1f}, CPU {with_['decision_cpu_s']:.2f} s vs "
            f"{without['decision_cpu_s']:.2f} s"
        )
    return "; ".join(parts)


def cli_line() -> str:
    summary = get("bench_cli", "summary")
    parts = []
    for command in ("submit", "get", "plan"):
        row = summary[command]
        met = "met" if row["met"] else "**not met**"
        parts.append(
            f"`{command}` {row['warm_median_s']:.2f} s ({row['warm_median_cpu_s']:.2f} s CPU; "
            f"target {row['target_s']} s, {met})"
        )
    base = get("bench_cli", "baseline")
    text = "; ".join(parts)
    if base:  # a run side by side with other code (--baseline)
        ratios = ", ".join(
            f"{c} {summary[c]['ratio_warm']:.2f}x" for c in ("submit", "get", "plan")
        )
        text += f"; against {base} in the same run: {ratios}"
    return f"{text} (medians of {get('bench_cli', 'repeat')}, load {load_range('bench_cli')})"


def sweep_line() -> str:
    jobs = get("bench_sweep", "jobs")
    medians = get("bench_sweep", "medians_by_jobs")
    identical = "identical" if get("bench_sweep", "identical_to_serial") else "**NOT identical**"
    return (
        f"{get('bench_sweep', 'sweep', 'runs')} runs: {medians['1']['median_wall_s']:.0f} s "
        f"serially, {medians[str(jobs)]['median_wall_s']:.0f} s with `--jobs {jobs}` "
        f"(**{get('bench_sweep', 'speedup_wall'):.2f}x**), figures {identical} to the serial "
        f"run's (load {load_range('bench_sweep')})"
    )


def fgd_line() -> str:
    default = get("bench_fgd", "variants", "default")
    published = default["published_at_130"]
    seeds = get("bench_fgd", "config", "seeds")
    others = [
        f"`{name}` {v['alloc_pct_mean']:.2f} % vs FGD "
        f"{v['published_at_130']['FGD']['alloc_pct']:.2f} %"
        for name, v in get("bench_fgd", "variants").items()
        if name != "default"
    ]
    return (
        f"**{default['alloc_pct_mean']:.2f} %** of {get('bench_fgd', 'capacity_gpus'):,.0f} GPUs "
        f"allocated on the default list (mean of seeds {seeds[0]}–{seeds[-1]}); best-fit "
        f"{published['BestFit']['alloc_pct']:.2f} %, FGD {published['FGD']['alloc_pct']:.2f} %; "
        + "; ".join(others)
    )


def multicluster_line() -> str:
    entries = get("bench_multicluster", "config", "entries")
    fleets = get("bench_multicluster", "config", "fleets")
    parts = []
    for entry in entries:
        if entry["solver"] != "cpsat":
            continue
        label = entry["label"]
        means, values, ahead, count = [], [], 0, 0
        for fleet in fleets:
            data = get("bench_multicluster", "fleets", fleet)
            means.append(f"{data['summary'][label]['pct_of_bound_mean']:.2f}")
            values += [i["entries"][label]["pct_of_bound"] for i in data["instances"]]
            ahead += data["summary"][label]["ahead_of_every_baseline"]
            count += len(data["instances"])
        at99 = sum(v >= 99 for v in values)
        at97 = sum(v >= 97 for v in values)
        parts.append(
            f"CP-SAT at {entry['time_limit']:g} s: {' / '.join(means)} % of the tightest bound "
            f"(means per fleet; lowest {min(values):.2f} %; ≥ 99 % in {at99} of {count}, "
            f"≥ 97 % in {at97} of {count}), ahead of every baseline in {ahead} of {count}"
        )
    return "; ".join(parts)


#: bench_kalos's documented default (``bench_kalos.DRAIN``), for results written before the
#: result named it.
KALOS_DEFAULT = "cpsat 0.5s + horizon 6h, evict after 12h"


def kalos_line() -> str:
    batch = get("bench_kalos", "batch")
    fleet = get("bench_kalos", "fleet")
    fills = [entry["pct_of_bound"] for entry in batch.values()]
    admitted = "; ".join(
        f"{label} {entry['admission']['>512 GPUs']}" for label, entry in batch.items()
    )
    line = (
        f"{get('bench_kalos', 'gangs')} Kalos gangs on {fleet['nodes']} 8-GPU nodes in "
        f"{len(fleet['clusters'])} clusters, one batch: every solver fills "
        f"{span(fills, 1, ' %')} of the GPUs; gangs above 512 GPUs admitted: {admitted}"
    )
    stream = get("bench_kalos", "stream")
    result = get("bench_kalos")
    if "cpsat 0.5s" not in stream:
        return line
    mid = stream["cpsat 0.5s"]["by_size"]["65-512 GPUs"]["wait_p50_s"]

    def big(row: Mapping[str, Any]) -> str:
        return f"{row['by_size']['>512 GPUs']['wait_p50_s'] / 3600:.1f} h"

    def cost(row: Mapping[str, Any]) -> str:
        ratio = row["by_size"]["65-512 GPUs"]["wait_p50_s"] / mid if mid else 0.0
        return (
            f" (65–512-GPU gangs {ratio:.2f}×, {row['time_avg_alloc_pct']:.2f} % allocated, "
            f"{row.get('lost_gpu_hours', 0.0):,.0f} GPU-h lost)"
        )

    shown = ["cpsat 0.5s + reservations", result.get("default") or KALOS_DEFAULT]
    named = [(label, stream[label]) for label in shown if label in stream]
    line += f"; in the stream they wait {big(stream['cpsat 0.5s'])} at the median with CP-SAT, " + (
        ", ".join(
            f"{big(row)} with {label.removeprefix('cpsat 0.5s + ')}{cost(row)}"
            for label, row in named
        )
    )
    met = result.get("targets_met") or {}
    reserving = [label for label in met if label.startswith(("cpsat 0.5s + ", "greedy + "))]
    if reserving:
        line += (
            f"; {sum(1 for label in reserving if met[label])} of {len(reserving)} reservation "
            "runs meet issue 16's targets (`bench_kalos.md`)"
        )
    return line


def solver_quality_line() -> str:
    quality = get("bench_solver", "quality")
    limit = get("bench_solver", "time_limit")
    pct = [q["solvers"]["cpsat"]["pct_tightest"] for q in quality]
    ahead = sum(
        q["solvers"]["cpsat"]["placed_gpus"]
        >= max(v["placed_gpus"] for k, v in q["solvers"].items() if k != "cpsat")
        for q in quality
    )
    reduced = get("bench_solver", "reduced")
    exact = [r for r in reduced if r["node_level"]["exact"]]
    reached = sum(r["solvers"]["cpsat"]["pct_node_level"] >= 100 for r in reduced)
    return (
        f"CP-SAT at {limit:g} s ahead of (or level with) every baseline in {ahead} of "
        f"{len(quality)}, {span(pct, 1, ' %')} of the tightest bound; on {len(reduced)} "
        f"80-node versions the exact node-level optimum is proven in {len(exact)} and CP-SAT "
        f"reaches it in {reached}"
    )


def decision_line() -> str:
    batch = get("bench_solver", "speed_batch")
    (online,) = get("bench_solver", "online")[:1]
    return (
        f"batch of {batch['workloads']} workloads × {batch['clusters']} clusters: "
        f"{batch['p50_s']:.2f} s p50, {batch['p99_s']:.2f} s p99 (target ≤ 1 s p99); online "
        f"decision on the 1,213-node cluster: {online['p50_ms']:.1f} ms p50, "
        f"{online['p99_ms']:.1f} ms p99 (target ≤ 50 ms p50)"
    )


def stream_line() -> str:
    solvers = get("bench_stream", "solvers")
    entries = get("bench_stream", "config", "entries")
    first = solvers[entries[0]["label"]]
    others = ", ".join(
        f"{_solver_label(e)} {solvers[e['label']]['gpu_time_of_bound_pct']:.1f} %"
        for e in entries[1:]
    )
    return (
        f"{_solver_label(entries[0])}: {first['time_avg_alloc_pct']:.1f} % of the GPUs allocated "
        f"on average, **{first['gpu_time_of_bound_pct']:.1f} %** of the GPU-time any policy "
        f"could hold in the arrival window ({others}); gangs of 65–512 GPUs wait "
        + ", ".join(
            f"{wait(solvers[e['label']]['by_size']['65-512 GPUs']['wait_p50_s'])} "
            f"({_solver_label(e)})"
            for e in entries
        )
        + " at the median"
    )


def verifier_line() -> str:
    """Verifier problems summed over every decision the result files record."""
    total = 0
    for path in sorted(RESULTS.glob("*.json")):
        total += _count(json.loads(path.read_text()), "verifier_problems")
    return f"**{total} verifier problems** in the decisions of every result file"


def _count(value: Any, key: str) -> int:
    if isinstance(value, Mapping):
        found = value.get(key)
        own = found if isinstance(found, int) and not isinstance(found, bool) else 0
        return own + sum(_count(v, key) for k, v in value.items() if k != key)
    if isinstance(value, list):
        return sum(_count(v, key) for v in value)
    return 0


#: question -> (its line, the target)
QUESTIONS: dict[str, tuple[Callable[[], str], str]] = {
    "One cluster, one pod at a time: FGD's replay of Alibaba's openb cluster at 130 % load "
    "(`bench_fgd`)": (fgd_line, "≥ best-fit's 93.1 %"),
    "Multi-cluster batches of gangs: openb split into 4/8/16 clusters, 120 % load, 9 "
    "instances (`bench_multicluster`)": (
        multicluster_line,
        "≥ 99 % at 1 s, ahead of every baseline",
    ),
    "The same at 130 % load on 4 and 8 clusters, and the exact optimum on 80-node versions "
    "(`bench_solver`)": (solver_quality_line, "≥ 97 %, ahead of every baseline"),
    "Big gangs: real Kalos jobs (up to 1,024 GPUs) (`bench_kalos`)": (kalos_line, "—"),
    "Stream with arrivals, run times and departures (`bench_stream`)": (stream_line, "—"),
    "Decision time (`bench_solver`)": (decision_line, "≤ 1 s p99; ≤ 50 ms p50"),
    "Placements realisable pod by pod": (verifier_line, "0"),
}


def summary_table() -> str:
    """simulations/README.md: the questions a platform engineer asks, one line each."""
    rows = [[question, line(), target] for question, (line, target) in QUESTIONS.items()]
    return table(["question", "measured", "target"], rows)


def measured_table() -> str:
    """README.md: every benchmark's headline."""
    rows = [[question, line()] for question, (line, _) in QUESTIONS.items()]
    rows += [
        [what, f"{line()} (`{name}.md`)"] for name, (what, line) in LINES.items() if _has(name)
    ]
    return table(["what", "measured"], rows)


def fairshare_line() -> str:
    contenders = get("bench_fairshare", "contenders")
    placer = contenders["placer"]
    none = contenders["no queues"]
    minimality = get("bench_fairshare", "victim_minimality")
    paid = placer.get("owed_all_paid_pct")
    gap = placer["over_quota_split_gap_pp_mean"]
    if paid is None:  # a result file from before the reading at each decision
        paid = placer["reclaim_within_interval_pct"]
        moments = placer["reclaim_events"]
    else:
        moments = placer["owed_all_moments"]
    reclaim = (
        f"a queue owed in-quota GPUs at a decision held ≥ 95 % of them once it was taken in "
        f"{paid:.1f} % of {moments} such moments (target: always)"
    )
    seeded = _over_seeds("placer", "owed_paid_pct")
    if seeded is not None:
        reclaim = reclaim[: -len(" (target: always)")] + (
            f" on the first seed, {seeded['mean']:.1f} % [{seeded['min']:.1f}–"
            f"{seeded['max']:.1f}] over all (target: always)"
        )
        paid = min(paid, float(seeded["min"]))
    split = f"over-quota split {gap:.1f} pp off the weights on average (target ±5)"
    demand = placer.get("over_quota_split_demand_gap_pp_mean")
    oracle = placer.get("oracle", {}).get("asking")
    if demand is not None and oracle is not None:
        summed = placer["over_quota_split_summed_gap_pp"]
        split = (
            f"over-quota split {gap:.1f} pp off the weights on average (target ±5; "
            f"{demand:.1f} pp in KAI's demand-capped reading, {summed['asking']:.1f} / "
            f"{summed['demand']:.1f} pp time-summed; on {oracle['moments']} of its decisions "
            f"{oracle['contender_pp_mean']:.1f} pp, the best one decision starting gangs "
            f"could reach there {oracle['upper_pp_mean']:.1f} pp found, no better than "
            f"{oracle['lower_pp_mean']:.1f} pp proven)"
        )
    met = [text for text, ok in ((reclaim, paid == 100.0), (split, gap <= 5.0)) if ok]
    missed = [text for text, ok in ((reclaim, paid == 100.0), (split, gap <= 5.0)) if not ok]
    text = (
        f"Jain's index of allocation / fair share {placer['jain_alloc_of_fair']:.3f} "
        f"(no queues {none['jain_alloc_of_fair']:.3f}, "
        f"Kueue-like {contenders['kueue-like']['jain_alloc_of_fair']:.3f}, "
        f"FIFO {contenders['fifo per queue']['jain_alloc_of_fair']:.3f}); victims' GPUs "
        f"{minimality['worst_ratio_to_fewest_gpus']:.1f}× the fewest any packing eviction needs "
        f"on {minimality['cases']} small fleets (target ≤ 1.1)"
    )
    if met:
        text += "; met: " + ", ".join(met)
    if missed:
        text += "; **not met**: " + ", ".join(missed)
    text += (
        f"; {placer['suspected_priority_inversions']} suspected priority inversions "
        f"(no queues: {none['suspected_priority_inversions']})"
    )
    fair = contenders.get("placer + fair-share reclaim")
    if fair is not None:
        fair_paid = fair.get("owed_all_paid_pct", fair["reclaim_within_interval_pct"])
        fair_moments = fair.get("owed_all_moments", fair["reclaim_events"])
        text += (
            f"; with fair-share reclaim: {fair_paid:.1f} % of {fair_moments} moments, split "
            f"{fair['over_quota_split_gap_pp_mean']:.1f} pp"
            + (
                f" ({fair['over_quota_split_summed_gap_pp']['asking']:.1f} pp time-summed)"
                if "over_quota_split_summed_gap_pp" in fair
                else ""
            )
            + ", "
            f"{fair['suspected_priority_inversions']} suspected inversions, "
            f"{fair['preemptions']} preemptions ({placer['preemptions']} without), "
            f"{fair['gpu_hours_lost']:.0f} GPU-h lost ({placer['gpu_hours_lost']:.0f})"
        )
    text += _rebalancing_text()
    return text


def _over_seeds(contender: str, measure: str) -> dict[str, Any] | None:
    """bench_fairshare's mean, least and most of one measure over the seeds, if recorded."""
    try:
        cell = get("bench_fairshare", "across_seeds", contender, measure)
    except ResultError:  # a result file from before the seeds
        return None
    return cell if isinstance(cell, dict) else None


def _rebalancing_text() -> str:
    """bench_fairshare's fair-share rebalancing over the seeds (mean, with placer's)."""
    try:
        across = get("bench_fairshare", "across_seeds")
        config = get("bench_fairshare", "config")
    except ResultError:  # a result file from before the seeds
        return ""
    rebalancing = across.get("placer + rebalancing")
    placer = across.get("placer")
    if not rebalancing or not placer:
        return ""

    def mean(row: dict[str, Any], key: str) -> float:
        cell = row.get(key)
        return float(cell["mean"]) if cell else float("nan")

    readings = ("asking", "demand", "summed_asking", "summed_demand")
    gaps = " / ".join(f"{mean(rebalancing, k):.1f}" for k in readings)
    before = " / ".join(f"{mean(placer, k):.1f}" for k in readings)
    within = [k for k in readings if mean(rebalancing, k) <= 5.0]
    verdict = (
        "within ±5 in the time-summed readings only"
        if within == ["summed_asking", "summed_demand"]
        else "within ±5 in every reading"
        if len(within) == len(readings)
        else "within ±5 in " + (", ".join(within) if within else "no reading")
    )
    seeds = ", ".join(str(x) for x in config.get("seeds") or [config["seed"]])
    return (
        f"; fair-share rebalancing (τ {config['rebalance_tolerance']:g}, means over seeds "
        f"{seeds}): split {gaps} pp asking / demand / time-summed asking / time-summed demand "
        f"(placer {before}; {verdict}), "
        f"{mean(rebalancing, 'confirmed_inversions'):.1f} inversions confirmed node by node, "
        f"{mean(rebalancing, 'preemptions'):.0f} preemptions "
        f"({mean(placer, 'preemptions'):.0f}), {mean(rebalancing, 'gpu_hours_lost'):.0f} GPU-h "
        f"lost ({mean(placer, 'gpu_hours_lost'):.0f}), owed paid "
        f"{mean(rebalancing, 'owed_paid_pct'):.1f} % ({mean(placer, 'owed_paid_pct'):.1f} %)"
    )


def capacity_line() -> str:
    ends = [get("bench_capacity", "load_start")[0], get("bench_capacity", "load_end")[0]]
    load = span(sorted(ends))
    summary = get("bench_capacity", "summary")
    watch, listing = summary["watch"], summary["list"]
    met = "met" if summary["target_cpu_met"] and summary["target_no_list_met"] else "**not met**"
    cycles = get("bench_capacity", "args", "cycles")
    return (
        f"from watches: **{watch['cpu_ms_median']:.1f} ms CPU median, {watch['cpu_ms_max']:.1f} ms "
        f"max** per capacity step over {cycles} cycles, {watch['lists_total']} LISTs (target "
        f"≤ 20 ms and no LIST: {met}); listing every member, side by side: "
        f"{listing['cpu_ms_median']:,.0f} ms and {listing['lists_per_cycle_max']} LISTs per cycle "
        f"({summary['cpu_ratio_list_over_watch']:.0f}×); the cached fleet equal node by node to "
        f"the listed one in {summary['equal_node_by_node']} of {cycles} cycles; first listing "
        f"{get('bench_capacity', 'first_sync_s'):.1f} s, peak RSS "
        f"{get('bench_capacity', 'peak_rss_mib'):.0f} MiB (load {load})"
    )


def scaling_line() -> str:
    meta = get("bench_scaling", "meta")
    load = span(sorted([meta["load_average_at_start"][0], meta["load_average_at_end"][0]]))
    parts = []
    for row in get("bench_scaling", "scale"):
        cpsat = row["cpsat"]
        seeds = len(cpsat["pct_of_bound"])
        parts.append(
            f"{row['gangs']:,} × {row['clusters']}: CP-SAT p99 {cpsat['p99_s']:.3f} s "
            f"(CPU ≤ {cpsat['cpu_max_s']:.3f} s), {cpsat['pct_mean']:.2f} % of the bound "
            f"(lowest {cpsat['pct_min']:.2f} %), ≥ the best baseline in "
            f"{cpsat['at_least_best_baseline']} of {seeds}, {cpsat['memory_mib']:.1f} MiB"
        )
    return "; ".join(parts) + f" (load {load})"


def quality_line() -> str:
    data = result("bench_quality")
    config, commits = data["config"], data["commits"]
    instances = len(data["instances"])
    parts = []
    for label, s in data["summary"].items():
        every = s["decisions_at_least_99"] == s["decisions"]
        parts.append(
            f"{'this code' if label == 'this' else 'side by side'} ({commits[label]}): "
            f"{s['pct_of_bound_mean']:.2f} % of the bound on average, lowest "
            f"{s['pct_of_bound_min']:.2f} %; ≥ 99 % in {s['decisions_at_least_99']} of "
            f"{s['decisions']} decisions ({'met' if every else '**not met**'}), "
            f"{s['instances_mean_at_least_99']} of {instances} instances on average; "
            f"{s['decisions_below_best_baseline']} below the best baseline; CPU ≤ "
            f"{s['cpu_s_max']:.3f} s"
        )
    net = (
        f", wall-clock net {config['wall_safety']:g}× the limit"
        if config.get("wall_safety")
        else ""
    )
    seeds = len(config["search_seeds"])
    meta = data["meta"]
    load = span(sorted([meta["load_average_at_start"][0], meta["load_average_at_end"][0]]))
    return "; ".join(parts) + f" ({seeds} search seeds{net}, load {load})"


def quality_queues_line() -> str:
    """``bench_quality --one-queue``: the decision under one queue, this code and another."""
    data = result("bench_quality_queues")
    config, commits = data["config"], data["commits"]
    parts = []
    for label, s in data["summary"].items():
        parts.append(
            f"{'this code' if label == 'this' else 'side by side'} ({commits[label]}): "
            f"{s['pct_of_bound_mean']:.2f} % of the bound on average, lowest "
            f"{s['pct_of_bound_min']:.2f} %; CPU ≤ {s['cpu_s_max']:.3f} s; "
            f"{s['verifier_problems_in_decisions']} verifier findings"
        )
    meta = data["meta"]
    load = span(sorted([meta["load_average_at_start"][0], meta["load_average_at_end"][0]]))
    return "; ".join(parts) + (
        f" ({config['one_queue_gpus']:,} GPUs deserved, {len(config['search_seeds'])} search "
        f"seeds, load {load})"
    )


#: benchmark -> (what it measures, its line)
LINES: dict[str, tuple[str, Callable[[], str]]] = {
    "bench_decompose": (
        "10,000 manifests of every catalog kind through their definitions, trusted and untrusted",
        decompose_line,
    ),
    "bench_gather": (
        "16 loopback clusters × 500 nodes × 5,000 pods gathered concurrently, snapshot written",
        gather_line,
    ),
    "bench_submit": (
        "500 JobSets to 8 loopback clusters, one batch vs one command each; `--baseline DIR` "
        "side by side with other code",
        submit_line,
    ),
    "bench_controller": (
        "1,000 JobSets created on a loopback hub, placed on 8 members",
        controller_line,
    ),
    "bench_topology": (
        "300 gangs of 2–16 pods requiring one rack and preferring one NVLink domain, on "
        "openb's 617 8-GPU nodes (4 clusters) in synthetic racks; each solver with and "
        "without the constraints, side by side",
        topology_line,
    ),
    "bench_scaling": (
        "the 1 s decision at fleet scale: openb replicated with distinct seeds, 250 gangs × 8 "
        "clusters up to 2,000 × 64, CP-SAT side by side with greedy and Karmada (issue 18: "
        "≤ 1.05 s p99, ≥ 99 % of the bound at 1,000 × 32, ≥ the best baseline)",
        scaling_line,
    ),
    "bench_quality": (
        "CP-SAT's 1-s decision on the 9 openb multi-cluster instances, several search seeds "
        "each (issue 18: ≥ 99 % of the bound in every instance, never below the best "
        "baseline); `--baseline DIR`: side by side with other code, in turns",
        quality_line,
    ),
    "bench_quality_queues": (
        "`bench_quality --one-queue GPUS`: the same 1-s decisions under one queue every gang "
        "falls in (fair share's tiers and the queue's first-in-first-out order), side by side "
        "with other code",
        quality_queues_line,
    ),
    "bench_capacity": (
        "the controller's capacity step on 16 loopback members × 500 nodes × 5,000 pods, 10 new "
        "workloads per cycle, from watches side by side with listing every member",
        capacity_line,
    ),
    "bench_churn": (
        "10 minutes of JobSets created, edited and deleted on the hub at 20 events/s, 8 "
        "members, racing `placer submit`s, a member answering 401, one stopped, two SIGKILLs",
        churn_line,
    ),
    "bench_cli": (
        "`placer submit`, `get -A`, `plan --snapshot` from the shell on the demo fleet, warm "
        "(median of 5; `--baseline DIR`: side by side with other code)",
        cli_line,
    ),
    "bench_sweep": (
        "a `placer simulate` sweep (seeds × loads × drained clusters × solvers) in parallel "
        "processes against the same sweep run serially",
        sweep_line,
    ),
    "bench_fairshare": (
        "queues sized from the Helios Venus VCs on a multi-tenant stream (360 gangs, first 2 "
        "clusters of openb-8, offered load 1.2×, several seeds), placer's queues with "
        "preemption (and with fair-share reclaim, and with fair-share rebalancing) side by side "
        "with no queues, Kueue-like borrowing and strict FIFO per queue (`docs/queues.md`)",
        fairshare_line,
    ),
}


def other_benchmarks_table() -> str:
    rows = [[f"`{name}`", what, line()] for name, (what, line) in LINES.items() if _has(name)]
    return table(["script", "what", "latest result"], rows)


def _has(name: str) -> bool:
    return (RESULTS / f"{name}.json").exists()


def decompose_table() -> str:
    """docs/definitions.md: decomposition speed per CPU and per wall-clock second."""
    env = get("bench_decompose", "environment")
    rows = []
    for key, label, note in (
        ("decompose", "decompose (parsed objects)", ""),
        (
            "untrusted",
            "the same, the catalog's expressions untrusted (as hub Kartas)",
            " (with the worker's CPU)",
        ),
        ("parse_and_decompose", "parse YAML + decompose", ""),
    ):
        data = get("bench_decompose", key)
        cpu = f"{data['manifests_per_cpu_s']:,} manifests/s"
        rows.append(
            [
                label,
                f"**{cpu}**" if key == "decompose" else f"{cpu}{note}",
                f"{data['manifests_per_wall_s']:,} manifests/s",
            ]
        )
    measure = (
        f"measure ({get('bench_decompose', 'manifests'):,} manifests, "
        f"{get('bench_decompose', 'pods'):,} pods, seed {env['seed']}, best of {env['repeat']})"
    )
    return table([measure, "per CPU second", "per wall-clock second"], rows)


#: table name -> how it is written
REGIONS: dict[str, Callable[[], str]] = {
    "decompose": decompose_table,
    "fgd": fgd_table,
    "multicluster": multicluster_table,
    "stream": stream_table,
    "other-benchmarks": other_benchmarks_table,
    "summary": summary_table,
    "measured": measured_table,
}


# --------------------------------------------------------------------------------------------
# rewriting


def rewrite(text: str, source: str) -> str:
    """``text`` with every marked table written afresh; an unknown name is an error."""

    def body(found: re.Match[str]) -> str:
        name = found["name"]
        if name not in REGIONS:
            raise ResultError(
                f"{source}: unknown results table {name!r} (known: {', '.join(REGIONS)})"
            )
        return f"{found['open']}{REGIONS[name]()}{found['close']}"

    return _REGION.sub(body, text)


def regions(text: str) -> list[str]:
    return [m["name"] for m in _REGION.finditer(text)]


def stale(root: Path = ROOT) -> list[str]:
    """The documents (relative paths) whose marked tables differ from what would be written."""
    return [
        name
        for name in DOCUMENTS
        if (root / name).exists()
        and rewrite((root / name).read_text(), name) != (root / name).read_text()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a table is out of date"
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            outdated = stale()
            for name in outdated:
                print(f"{name}: tables differ from simulations/results (run: make results)")
            return 1 if outdated else 0
        for name in DOCUMENTS:
            path = ROOT / name
            if not path.exists():
                continue
            before = path.read_text()
            after = rewrite(before, name)
            if after != before:
                path.write_text(after)
                print(f"wrote {name} ({', '.join(regions(after))})")
    except ResultError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
