"""A simulation as one JSON-ready document: what ``-o json`` prints, text and report draw from.

One builder, :func:`document`, so the text output, the JSON output and the ``--report``
Markdown can never disagree: the CLI renders text from this document, and the report reads it.

Units in the document: GPUs as numbers of GPUs (thousandths become decimals), percentages in
percent, times in seconds; every number rounded for reading (GPUs to 3 decimals, percentages to
2, seconds to 4). Shape::

    {"input": {...}, "warnings": [...],
     "comparison": [{"solver", "placed", "gpus_placed", "placed_of_bound_pct", ...}],
     "runs": [{"solver", "mode", "summary": {...}, "clusters": [...],
               "workloads": [...], "timeline": [...], "preemptions": [...],
               "reservations": [...]}]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placer.model import Fleet, Workload
from placer.simulate.capacity import gpu_milli
from placer.simulate.engine import Outcome, Run, Sample, Timed
from placer.simulate.metrics import ClusterUsage, Summary, cluster_usage, summarize
from placer.simulate.streambound import stream_bounds

__all__ = ["TIMELINE_POINTS", "document", "gpus", "run_document"]

#: the timeline of a stream is thinned to at most this many points in the document.
TIMELINE_POINTS = 1000


def gpus(milli: float) -> float:
    """GPU thousandths as GPUs, rounded to 3 decimals."""
    return round(milli / 1000.0, 3)


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _sec(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def document(
    runs: Sequence[Run],
    items: Sequence[Timed],
    *,
    inputs: Mapping[str, Any],
    warnings: Sequence[str] = (),
    drained: Sequence[str] = (),
) -> dict[str, Any]:
    """The whole simulation (several solvers on one input) as a JSON-ready dict."""
    bounds = (
        stream_bounds(items, runs[0].before)
        if runs and all(r.settings.mode == "stream" and r.before is runs[0].before for r in runs)
        else None
    )
    summaries = [summarize(run, items, bounds=bounds) for run in runs]
    return {
        "input": dict(inputs),
        "warnings": list(warnings),
        "comparison": [_comparison(s) for s in summaries],
        "runs": [
            run_document(run, items, summary=summary, drained=drained)
            for run, summary in zip(runs, summaries, strict=True)
        ],
    }


def _comparison(summary: Summary) -> dict[str, Any]:
    stream = summary.stream
    return {
        "solver": summary.solver,
        "placed": summary.placed,
        "workloads": summary.workloads,
        "gpus_placed": gpus(summary.gpu_placed_milli),
        "gpus_bound": gpus(summary.bound_gpu_milli),
        "placed_of_bound_pct": _pct(summary.placed_of_bound_pct),
        "alloc_pct": _pct(summary.alloc_pct),
        "decision_p50_s": _sec(summary.time.p50_s),
        "decision_p99_s": _sec(summary.time.p99_s),
        "wait_p50_s": _sec(stream.wait_p50_s) if stream else None,
        "wait_p99_s": _sec(stream.wait_p99_s) if stream else None,
        "time_avg_alloc_pct": _pct(stream.time_avg_alloc_pct) if stream else None,
        "gpu_time_of_bound_pct": _pct(stream.gpu_time_of_bound_pct) if stream else None,
        "verifier_problems": len(summary.problems),
        "seconds": _sec(summary.wall_s),
    }


def run_document(
    run: Run,
    items: Sequence[Timed],
    *,
    summary: Summary | None = None,
    drained: Sequence[str] = (),
) -> dict[str, Any]:
    """One solver's run: summary, clusters before/after, every workload, timeline."""
    summary = summary or summarize(run, items)
    before = {u.name: u for u in cluster_usage(run.before, drained)}
    after = {u.name: u for u in cluster_usage(_final(run), drained)}
    return {
        "solver": summary.solver,
        "mode": summary.mode,
        "summary": _summary(summary),
        "clusters": [
            {
                "name": name,
                "state": usage.state,
                "nodes": usage.nodes,
                "gpus": gpus(usage.gpu_milli),
                "before": _usage(usage),
                "after": _usage(after[name]),
            }
            for name, usage in before.items()
        ],
        "workloads": [
            _workload(item, outcome, stream=summary.mode == "stream")
            for item, outcome in zip(items, run.outcomes, strict=True)
        ],
        "timeline": [_sample(s) for s in _thin(run.timeline, TIMELINE_POINTS)],
        "preemptions": [
            {
                "time_s": p.time_s,
                "preemptor": str(items[p.preemptor].workload.ref),
                "cluster": p.cluster,
                "victims": [
                    {"workload": str(items[i].workload.ref), "reason": reason}
                    for i, reason in p.victims
                ],
                "gpus": gpus(p.gpu_milli),
                "lost_gpu_hours": round(p.lost_gpu_seconds / 3600, 4),
            }
            for p in run.preemptions
        ],
        "reservations": [
            {
                "workload": str(items[r.workload].workload.ref),
                "gpus": gpus(gpu_milli(items[r.workload].workload.total_requests())),
                "cluster": r.cluster,
                "nodes": len(r.nodes),
                "reason": r.reason,
                "planned_s": _sec(r.planned_s),
                "start_s": _sec(r.start_s),
                "ended_s": _sec(r.ended_s),
                "outcome": r.outcome,
                "started_s": _sec(run.outcomes[r.workload].start_s),
            }
            for r in run.reservations
        ],
    }


def _final(run: Run) -> Fleet:
    """The "after" state: the end of a batch/online run; a stream at its last arrival."""
    return run.loaded if run.settings.mode == "stream" else run.after


def _usage(usage: ClusterUsage) -> dict[str, Any]:
    return {
        "gpus_used": gpus(usage.gpu_used_milli),
        "gpu_pct": _pct(usage.gpu_pct),
        "cpu_pct": _pct(usage.cpu_pct),
        "memory_pct": _pct(usage.memory_pct),
        "whole_free_8gpu_nodes": usage.whole_free_big_nodes,
    }


def _summary(summary: Summary) -> dict[str, Any]:
    frag = summary.fragmentation
    time = summary.time
    data: dict[str, Any] = {
        "workloads": summary.workloads,
        "placed": summary.placed,
        "gpus_demand": gpus(summary.gpu_demand_milli),
        "gpus_placed": gpus(summary.gpu_placed_milli),
        "gpus_capacity": gpus(summary.gpu_capacity_milli),
        "gpus_bound": gpus(summary.bound_gpu_milli),
        "placed_of_bound_pct": _pct(summary.placed_of_bound_pct),
        "bound_basis": summary.bound_basis,
        "alloc_pct": _pct(summary.alloc_pct),
        "statuses": dict(summary.statuses),
        "admission": [
            {
                "bucket": b.label,
                "workloads": b.workloads,
                "admitted": b.admitted,
                "admitted_pct": _pct(100.0 * b.admitted / b.workloads),
                "gpus": gpus(b.gpu_milli),
                "gpus_admitted": gpus(b.admitted_gpu_milli),
                "gpus_admitted_pct": _pct(100.0 * b.admitted_gpu_milli / b.gpu_milli)
                if b.gpu_milli
                else None,
            }
            for b in summary.buckets
        ],
        "fragmentation": {
            "stranded_gpus": gpus(frag.stranded_gpu_milli),
            "stranded_nodes": frag.stranded_nodes,
            "whole_free_8gpu_nodes": frag.whole_free_big_nodes,
            "fgd_fragmented_gpus": gpus(frag.fgd_gpu_milli),
            "against": frag.against,
        },
        "decision_time": {
            "decisions": time.decisions,
            "total_s": _sec(time.total_s),
            "p50_s": _sec(time.p50_s),
            "p99_s": _sec(time.p99_s),
            "max_s": _sec(time.max_s),
            "per_workload_s": _sec(time.per_workload_s),
            "cpu_p50_s": _sec(time.cpu_p50_s),
            "cpu_p99_s": _sec(time.cpu_p99_s),
            "cpu_total_s": _sec(time.cpu_total_s),
        },
        "verifier": {"decisions": summary.verified, "problems": list(summary.problems)},
        "seconds": _sec(summary.wall_s),
    }
    stream = summary.stream
    if stream is not None:
        data["stream"] = {
            "wait_p50_s": _sec(stream.wait_p50_s),
            "wait_p99_s": _sec(stream.wait_p99_s),
            "wait_max_s": _sec(stream.wait_max_s),
            "never_started": stream.never_started,
            "time_avg_alloc_pct": _pct(stream.time_avg_alloc_pct),
            "offered_load_pct": _pct(stream.offered_load_pct),
            "peak_queue": stream.peak_queue,
            "window_s": _sec(stream.window_s),
            "makespan_s": _sec(stream.makespan_s),
            "gpu_hours_in_window": round(stream.gpu_time_milli_s / 3.6e6, 3),
            "gpu_hours_bound": round(stream.gpu_time_bound_milli_s / 3.6e6, 3),
            "gpu_time_of_bound_pct": _pct(stream.gpu_time_of_bound_pct),
        }
    return data


def _workload(item: Timed, outcome: Outcome, *, stream: bool) -> dict[str, Any]:
    workload = item.workload
    ref = workload.ref
    data: dict[str, Any] = {
        "workload": {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name},
        "gpus": gpus(gpu_milli(_gpus_asked(workload, outcome))),
        "cluster": outcome.cluster,
    }
    if workload.elastic:  # placed at any size in [min, max]: "gpus" is the size it ran at
        data["gpus_min"] = gpus(gpu_milli(workload.total_requests()))
        data["gpus_max"] = gpus(gpu_milli(workload.largest_requests()))
    if outcome.cluster is None:
        data["reasons"] = dict(outcome.reasons)
    if stream:
        start = outcome.start_s
        data["arrival_s"] = _sec(item.arrival_s)
        data["start_s"] = _sec(start)
        data["wait_s"] = _sec(start - item.arrival_s) if start is not None else None
        data["end_s"] = _sec(outcome.end_s)
    return data


def _gpus_asked(workload: Workload, outcome: Outcome) -> Mapping[str, int]:
    """What a workload holds where it was placed (an elastic one at its chosen size), else what
    it asked: an elastic one at its most."""
    if outcome.placement is not None:
        return outcome.placement.requests
    return workload.largest_requests() if workload.elastic else workload.total_requests()


def _sample(sample: Sample) -> dict[str, Any]:
    return {
        "t": _sec(sample.time_s),
        "allocated_gpus": gpus(sample.allocated_gpu_milli),
        "running": sample.running,
        "queued": sample.queued,
        "queued_gpus": gpus(sample.queued_gpu_milli),
    }


def _thin(timeline: Sequence[Sample], points: int) -> list[Sample]:
    """At most ``points`` samples, evenly spaced by index, first and last kept."""
    if len(timeline) <= points:
        return list(timeline)
    step = (len(timeline) - 1) / (points - 1)
    return [timeline[round(k * step)] for k in range(points)]
