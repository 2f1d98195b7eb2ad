"""``placer simulate --report DIR``: the simulation document as files a person can read.

Writes into ``DIR`` (created if needed):

* ``simulation.json`` — the document itself (what ``-o json`` prints);
* ``summary.md`` — the same figures as Markdown tables, with the plots embedded;
* ``placed.png`` — placed GPUs as % of the tightest bound, per solver;
* ``admission.png`` — gang admission rate by gang-size bucket, per solver;
* ``utilisation.png`` — stream: allocated GPUs and queue length over time, per solver;
  batch/online: GPU use per cluster before and after, per solver.

matplotlib is imported only here and only when a report is asked for (it is in the ``report``
and ``dev`` extras); without it the error says how to install it. Plots use the non-interactive
Agg backend, so no display is needed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placer.errors import PlacerError

__all__ = ["write_report"]

#: unplaced workloads listed with reasons per solver in the Markdown.
MARKDOWN_REASONS = 50


def write_report(doc: dict[str, Any], directory: Path) -> list[Path]:
    """Write the report files (see the module docstring); returns their paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlacerError(
            "--report needs matplotlib, which is not installed",
            hint="pip install 'placer[report]' (or leave out --report)",
        ) from None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlacerError(f"cannot create {directory}: {exc.strerror}") from None
    written = [directory / "simulation.json"]
    written[0].write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plots = [
        _placed_plot(plt, doc, directory / "placed.png"),
        _admission_plot(plt, doc, directory / "admission.png"),
        _utilisation_plot(plt, doc, directory / "utilisation.png"),
    ]
    markdown = directory / "summary.md"
    markdown.write_text(_markdown(doc, [p.name for p in plots]), encoding="utf-8")
    return [*written, markdown, *plots]


# --------------------------------------------------------------------------------------------
# plots


def _placed_plot(plt: Any, doc: dict[str, Any], path: Path) -> Path:
    rows = doc["comparison"]
    names = [r["solver"] for r in rows]
    values = [r["placed_of_bound_pct"] or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 3.5))
    bars = ax.bar(names, values, color="#4c72b0")
    for bar, row in zip(bars, rows, strict=True):
        ax.annotate(
            f"{bar.get_height():.1f}%\n{row['gpus_placed']:g} GPUs",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel("placed GPUs, % of tightest bound")
    ax.set_ylim(0, 115)
    ax.set_title(f"Placed GPUs per solver ({doc['input']['mode']})")
    return _save(plt, fig, path)


def _admission_plot(plt: Any, doc: dict[str, Any], path: Path) -> Path:
    runs = doc["runs"]
    buckets: list[str] = []
    for run in runs:
        for row in run["summary"]["admission"]:
            if row["bucket"] not in buckets:
                buckets.append(row["bucket"])
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(buckets) + 2), 3.5))
    width = 0.8 / max(1, len(runs))
    for k, run in enumerate(runs):
        rates = {r["bucket"]: r["admitted_pct"] for r in run["summary"]["admission"]}
        xs = [i + k * width for i in range(len(buckets))]
        ax.bar(xs, [rates.get(b, 0.0) or 0.0 for b in buckets], width, label=run["solver"])
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(buckets))], buckets)
    ax.set_ylabel("workloads admitted, %")
    ax.set_ylim(0, 105)
    ax.set_title("Gang admission by size (GPUs per workload)")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _utilisation_plot(plt: Any, doc: dict[str, Any], path: Path) -> Path:
    runs = doc["runs"]
    if doc["input"]["mode"] == "stream":
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
        capacity = runs[0]["summary"]["gpus_capacity"] if runs else 0
        for run in runs:
            hours = [p["t"] / 3600 for p in run["timeline"]]
            top.step(hours, [p["allocated_gpus"] for p in run["timeline"]], where="post")
            bottom.step(
                hours, [p["queued"] for p in run["timeline"]], where="post", label=run["solver"]
            )
        if capacity:
            top.axhline(capacity, color="gray", linestyle="--", linewidth=1)
        top.set_ylabel("allocated GPUs")
        top.set_title("Utilisation over time (dashed: capacity)")
        bottom.set_ylabel("queued workloads")
        bottom.set_xlabel("simulated time, hours")
        bottom.legend(fontsize=8)
        return _save(plt, fig, path)
    clusters = [c["name"] for c in runs[0]["clusters"]] if runs else []
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(clusters) + 3), 3.5))
    width = 0.8 / (len(runs) + 1)
    before = [c["before"]["gpu_pct"] or 0.0 for c in runs[0]["clusters"]] if runs else []
    ax.bar(range(len(clusters)), before, width, label="before", color="lightgray")
    for k, run in enumerate(runs, start=1):
        xs = [i + k * width for i in range(len(clusters))]
        after = [c["after"]["gpu_pct"] or 0.0 for c in run["clusters"]]
        ax.bar(xs, after, width, label=run["solver"])
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(clusters))], clusters, rotation=30)
    ax.set_ylabel("GPUs in use, %")
    ax.set_ylim(0, 105)
    ax.set_title("GPU use per cluster, before and after")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------
# markdown


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _markdown(doc: dict[str, Any], plots: Sequence[str]) -> str:
    inputs = doc["input"]
    lines = [
        "# placer simulate",
        "",
        f"Snapshot `{inputs['snapshot']}` ({len(inputs['clusters'])} clusters"
        + (f", drained: {', '.join(inputs['drained'])}" if inputs["drained"] else "")
        + f"); workloads {', '.join(f'`{w}`' for w in inputs['workloads'])} "
        f"({inputs['count']}); mode `{inputs['mode']}`; seed {inputs['seed']}; "
        f"time limit {inputs['time_limit_s']:g} s per decision.",
        "",
    ]
    lines += [f"> warning: {w}" for w in doc["warnings"]]
    lines += ["## Solvers side by side", ""]
    lines += _table(
        [
            "solver",
            "placed",
            "GPUs placed",
            "% of bound",
            "alloc %",
            "decision p50 s",
            "p99 s",
            "wait p50 s",
            "wait p99 s",
            "time-avg alloc %",
            "GPU-time % of bound",
            "verifier problems",
        ],
        [
            [
                r["solver"],
                f"{r['placed']}/{r['workloads']}",
                r["gpus_placed"],
                r["placed_of_bound_pct"],
                r["alloc_pct"],
                r["decision_p50_s"],
                r["decision_p99_s"],
                r["wait_p50_s"],
                r["wait_p99_s"],
                r["time_avg_alloc_pct"],
                r["gpu_time_of_bound_pct"],
                r["verifier_problems"],
            ]
            for r in doc["comparison"]
        ],
    )
    lines += [""] + [f"![{p}]({p})" for p in plots] + [""]
    for run in doc["runs"]:
        lines += _run_markdown(run)
    return "\n".join(lines) + "\n"


def _run_markdown(run: dict[str, Any]) -> list[str]:
    s = run["summary"]
    frag = s["fragmentation"]
    t = s["decision_time"]
    lines = [
        f"## {run['solver']} ({run['mode']})",
        "",
        f"- placed {s['placed']} of {s['workloads']} workloads, {s['gpus_placed']:g} of "
        f"{s['gpus_demand']:g} GPUs asked; {_cell(s['placed_of_bound_pct'])} % of the "
        f"{'stream' if s.get('stream') else 'tightest'} bound ({s['gpus_bound']:g} GPUs); "
        f"allocation {_cell(s['alloc_pct'])} % of "
        f"{s['gpus_capacity']:g} GPUs",
        f"- fragmentation: {frag['stranded_gpus']:g} GPUs stranded on {frag['stranded_nodes']} "
        f"nodes (vs {frag['against']} pods), {frag['whole_free_8gpu_nodes']} whole free 8-GPU "
        f"nodes, FGD measure {frag['fgd_fragmented_gpus']:g} GPUs",
        f"- decision time: {t['decisions']} decision(s), p50 {_cell(t['p50_s'])} s, p99 "
        f"{_cell(t['p99_s'])} s, total {_cell(t['total_s'])} s, per workload "
        f"{_cell(t['per_workload_s'])} s",
        f"- verifier: {s['verifier']['decisions']} decision(s) checked, "
        f"{len(s['verifier']['problems'])} problem(s)",
    ]
    stream = s.get("stream")
    if stream:
        lines.append(
            f"- stream: wait p50 {_cell(stream['wait_p50_s'])} s, p99 "
            f"{_cell(stream['wait_p99_s'])} s; never started {stream['never_started']}; "
            f"time-averaged allocation {_cell(stream['time_avg_alloc_pct'])} % (offered load "
            f"{_cell(stream['offered_load_pct'])} %); peak queue {stream['peak_queue']}; "
            f"GPU-time in the arrival window {stream['gpu_hours_in_window']:g} GPU-hours, "
            f"{_cell(stream['gpu_time_of_bound_pct'])} % of the bound "
            f"({stream['gpu_hours_bound']:g})"
        )
    lines += ["", "Gang admission by size:", ""]
    lines += _table(
        ["GPUs per workload", "admitted", "admitted %", "GPUs admitted", "GPU %"],
        [
            [
                b["bucket"],
                f"{b['admitted']}/{b['workloads']}",
                b["admitted_pct"],
                f"{b['gpus_admitted']:g}/{b['gpus']:g}",
                b["gpus_admitted_pct"],
            ]
            for b in s["admission"]
        ],
    )
    lines += ["", "Clusters:", ""]
    lines += _table(
        ["cluster", "state", "nodes", "GPUs", "GPU % before", "after", "free 8-GPU nodes"],
        [
            [
                c["name"],
                c["state"],
                c["nodes"],
                c["gpus"],
                c["before"]["gpu_pct"],
                c["after"]["gpu_pct"],
                f"{c['before']['whole_free_8gpu_nodes']} → {c['after']['whole_free_8gpu_nodes']}",
            ]
            for c in run["clusters"]
        ],
    )
    reservations = run.get("reservations") or []
    if reservations:
        lines += ["", f"Reservations ({len(reservations)}, docs/reservations.md):", ""]
        lines += _table(
            [
                "workload",
                "GPUs",
                "cluster",
                "nodes",
                "planned at s",
                "start s",
                "started s",
                "outcome",
            ],
            [
                [
                    f"`{r['workload']}`",
                    r["gpus"],
                    r["cluster"],
                    r["nodes"],
                    r["planned_s"],
                    r["start_s"],
                    r["started_s"],
                    r["outcome"],
                ]
                for r in reservations
            ],
        )
    unplaced = [w for w in run["workloads"] if w["cluster"] is None]
    if unplaced:
        lines += ["", f"Not placed ({len(unplaced)}):", ""]
        for entry in unplaced[:MARKDOWN_REASONS]:
            ref = entry["workload"]
            reasons = "; ".join(f"{c}: {r}" for c, r in entry.get("reasons", {}).items())
            lines.append(
                f"- `{ref['kind']}/{ref['namespace']}/{ref['name']}` ({entry['gpus']:g} GPUs): "
                + _cell(reasons or "no decision reached it")
            )
        if len(unplaced) > MARKDOWN_REASONS:
            lines.append(f"- … {len(unplaced) - MARKDOWN_REASONS} more in simulation.json")
    lines.append("")
    return lines
