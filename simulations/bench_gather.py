"""Benchmark: gathering a fleet of 16 loopback clusters × 500 nodes × 5,000 pods.

Targets (issue 3): gathering all clusters takes no more than 2× gathering the slowest one alone,
measured side by side in the same run; the snapshot of the whole fleet builds in under 10 s on
this machine's 2 cores; peak memory reported.

Setup: every cluster is a :class:`placer.testing.ApiServerProcess` — a loopback HTTPS API server
in its own process (so the client does not share a GIL with the servers), seeded with
``placer.testing.synthetic_cluster(500, 5000, seed=i)`` (GPU nodes, pods in every phase). The
client is placer's real path: kubeconfig file -> :func:`placer.fleet.gather_fleet` (one thread
per cluster, paginated lists of nodes and non-terminal pods, raw JSON) -> FleetSnapshot YAML.

Per variant (``--latency`` values; 0 = raw local servers, > 0 = a modelled per-request server
latency, i.e. the round trip and processing time of a remote API server, added as a sleep on
the server side — not CPU):

1. warm-up: gather everything once;
2. each cluster gathered alone ``--alone-runs`` times; the one with the largest median is "the
   slowest one";
3. ``--repeats`` rounds, interleaved: gather all, then the slowest alone; ratio of medians;
4. snapshot build (gather all + YAML + write) ``--repeats`` times;
5. CPU accounting of one gather-all: client process CPU and the sum of server processes' CPU —
   with purely CPU-bound servers, (client + servers CPU) / cores bounds the wall time from below;
6. peak memory: tracemalloc peak of one gather-all + snapshot (untimed) and the process' peak RSS;
7. (raw variant) a cProfile of one cluster gathered in the main thread: where client CPU goes.

Run: ``python -m simulations.bench_gather`` (defaults as above; ~2 minutes), results in
``simulations/results/bench_gather.{json,md}``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from placer.fleet import FleetConfig, fleet_from_kubeconfigs, gather_cluster, gather_fleet
from placer.model import Fleet
from placer.snapshot import dump_snapshot
from placer.testing import ApiServerProcess, synthetic_cluster, write_kubeconfig

RESULTS = Path(__file__).resolve().parent / "results"
_TICKS = os.sysconf("SC_CLK_TCK")


def content(args: argparse.Namespace, index: int, workdir: Path) -> dict[str, Any]:
    """What server ``index`` serves: synthetic content, padded in a seed file if asked.

    ``--pod-padding N`` gives every pod an N-byte annotation and 30 environment variables, the
    size of real pods (last-applied-configuration, env, status) rather than the synthetic ones'.
    """
    if not args.pod_padding:
        return {"synthetic": (args.nodes, args.pods), "synthetic_seed": index}
    path = workdir / f"seed-{index}.jsonl"
    if not path.exists():
        padding = {"kubectl.kubernetes.io/last-applied-configuration": "x" * args.pod_padding}
        env = [{"name": f"VAR_{j}", "value": "v" * 40} for j in range(30)]
        with path.open("w", encoding="utf-8") as out:
            for obj in synthetic_cluster(args.nodes, args.pods, seed=index):
                if obj["kind"] == "Pod":
                    obj["metadata"]["annotations"] = padding
                    obj["spec"]["containers"][0]["env"] = env
                out.write(json.dumps(obj) + "\n")
    return {"seed": [path]}


def server_cpu(servers: list[ApiServerProcess]) -> float:
    """CPU seconds (user + system) used so far by the server processes."""
    total = 0
    for server in servers:
        fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def timed(function: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def check(fleet: Fleet, nodes: int) -> None:
    for cluster in fleet.clusters:
        if not cluster.reachable or len(cluster.nodes) != nodes:
            raise SystemExit(f"cluster {cluster.name} not gathered: {cluster.reason}")


def run_variant(args: argparse.Namespace, latency: float, workdir: Path) -> dict[str, Any]:
    print(f"\n== latency {latency * 1000:g} ms per request ==", flush=True)
    servers = [
        ApiServerProcess(
            **content(args, index, workdir),
            latency=latency,
            name=f"c{index:02d}",
        )
        for index in range(args.clusters)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda s: s.start(), servers))
    print(f"{len(servers)} servers up in {time.perf_counter() - started:.1f}s", flush=True)
    try:
        kubeconfig = write_kubeconfig(
            workdir / f"fleet-{latency}.kubeconfig", {s.name: s for s in servers}
        )
        config = fleet_from_kubeconfigs([kubeconfig], timeout=120)
        check(gather_fleet(config), args.nodes)  # warm-up

        alone: dict[str, float] = {}
        for source in config.clusters:
            runs = []
            for _ in range(args.alone_runs):
                seconds, cluster = timed(gather_fleet, FleetConfig((source,)))
                check(cluster, args.nodes)
                runs.append(seconds)
            alone[source.name] = statistics.median(runs)
        slowest = max(alone, key=lambda name: alone[name])
        slowest_config = FleetConfig(tuple(c for c in config.clusters if c.name == slowest))
        print(f"alone: min {min(alone.values()):.3f}s, slowest {slowest} {alone[slowest]:.3f}s")

        all_times, slow_times = [], []
        for round_ in range(args.repeats):
            seconds_all, fleet = timed(gather_fleet, config)
            check(fleet, args.nodes)
            seconds_slow, _ = timed(gather_fleet, slowest_config)
            all_times.append(seconds_all)
            slow_times.append(seconds_slow)
            print(
                f"round {round_ + 1}: all {seconds_all:.3f}s, slowest alone {seconds_slow:.3f}s",
                flush=True,
            )
        ratio = statistics.median(all_times) / statistics.median(slow_times)

        snapshot_times = []
        target = workdir / "snapshot.yaml"
        for _ in range(args.repeats):
            start = time.perf_counter()
            fleet = gather_fleet(config)
            dump_snapshot(fleet, target)
            snapshot_times.append(time.perf_counter() - start)
        snapshot_bytes = target.stat().st_size
        print(f"snapshot build: median {statistics.median(snapshot_times):.3f}s")

        cpu_client, cpu_servers = time.process_time(), server_cpu(servers)
        seconds_cpu, _ = timed(gather_fleet, config)
        cpu_client = time.process_time() - cpu_client
        cpu_servers = server_cpu(servers) - cpu_servers
        cpu_alone_client, cpu_alone_servers = time.process_time(), server_cpu(servers)
        timed(gather_fleet, slowest_config)
        cpu_alone_client = time.process_time() - cpu_alone_client
        cpu_alone_servers = server_cpu(servers) - cpu_alone_servers

        cli_seconds, cli_rss_mib = snapshot_cli(kubeconfig, workdir / "cli-snapshot.yaml")
        print(f"`placer snapshot` process: {cli_seconds:.2f}s, peak RSS {cli_rss_mib:.0f} MiB")

        tracemalloc.start()
        dump_snapshot(gather_fleet(config), target)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

        profile_top: list[str] = []
        if latency == 0 and args.profile:
            profiler = cProfile.Profile()
            source = slowest_config.clusters[0]
            profiler.enable()
            gather_cluster(source)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(12)
            profile_top = [line.strip() for line in text.getvalue().splitlines() if line.strip()][
                -13:
            ]

        typed_vs_raw: dict[str, float] = {}
        if latency == 0 and args.profile:
            typed_vs_raw = compare_typed_client(kubeconfig, slowest)

        pods_per_cluster = (
            sum(n.requested.get("pods", 0) for n in fleet.clusters[0].nodes)
            + fleet.clusters[0].pending.count
        )
        return {
            "latency_ms": latency * 1000,
            "label": "raw local servers (CPU-bound)"
            if latency == 0
            else (f"modelled server latency {latency * 1000:g} ms per request"),
            "alone_each_median_s": {k: round(v, 4) for k, v in alone.items()},
            "slowest": slowest,
            "gather_all_s": [round(t, 4) for t in all_times],
            "slowest_alone_s": [round(t, 4) for t in slow_times],
            "median_all_s": round(statistics.median(all_times), 4),
            "median_slowest_alone_s": round(statistics.median(slow_times), 4),
            "ratio_all_over_slowest": round(ratio, 2),
            "target_ratio_met": ratio <= 2.0,
            "snapshot_build_s": [round(t, 4) for t in snapshot_times],
            "median_snapshot_build_s": round(statistics.median(snapshot_times), 4),
            "snapshot_target_met": statistics.median(snapshot_times) < 10.0,
            "snapshot_bytes": snapshot_bytes,
            "cpu_gather_all": {
                "wall_s": round(seconds_cpu, 3),
                "client_cpu_s": round(cpu_client, 3),
                "servers_cpu_s": round(cpu_servers, 3),
                "lower_bound_wall_s_on_cores": round(
                    (cpu_client + cpu_servers) / (os.cpu_count() or 1), 3
                ),
            },
            "cpu_slowest_alone": {
                "client_cpu_s": round(cpu_alone_client, 3),
                "servers_cpu_s": round(cpu_alone_servers, 3),
            },
            "tracemalloc_peak_mib_gather_and_snapshot": round(traced_peak / 2**20, 1),
            "placer_snapshot_process": {
                "wall_s_with_startup": round(cli_seconds, 3),
                "peak_rss_mib": round(cli_rss_mib, 1),
            },
            "non_terminal_pods_first_cluster": pods_per_cluster,
            "profile_one_cluster_tottime": profile_top,
            "typed_vs_raw_pod_list_one_request": typed_vs_raw,
        }
    finally:
        for server in servers:
            server.stop()


# NB: VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forked parent, so a
# large benchmark process would show as the child's peak
_CLI = """
import sys
from placer.cli import main
code = main(["snapshot", "--kubeconfig", sys.argv[1], "-o", sys.argv[2]])
status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print(status, flush=True)
sys.exit(code)
"""


def snapshot_cli(kubeconfig: Path, output: Path) -> tuple[float, float]:
    """``placer snapshot`` in a fresh process: wall time (with interpreter start and imports)
    and the process' peak RSS (VmHWM) in MiB."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CLI, str(kubeconfig), str(output)],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    return seconds, int(done.stdout.split()[-1]) / 1024


def compare_typed_client(kubeconfig: Path, context: str) -> dict[str, float]:
    """One unpaginated list of the non-terminal pods of one cluster: the official typed client
    (pydantic models) against placer's raw-JSON client, best of 3 each."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from placer.fleet.capacity import NON_TERMINAL_PODS
    from placer.kube import load_kubeconfigs, open_client

    api = k8s_config.new_client_from_config(
        config_file=str(kubeconfig), context=context, persist_config=False
    )
    typed, raw = [], []
    with open_client(load_kubeconfigs([kubeconfig]), context) as kube:
        for _ in range(3):
            seconds, _ = timed(
                lambda: k8s.CoreV1Api(api).list_pod_for_all_namespaces(
                    field_selector=NON_TERMINAL_PODS
                )
            )
            typed.append(seconds)
            seconds, _ = timed(
                lambda: kube.list("v1", "Pod", field_selector=NON_TERMINAL_PODS, page_size=10**6)
            )
            raw.append(seconds)
    api.close()
    return {"typed_client_s": round(min(typed), 3), "raw_json_client_s": round(min(raw), 3)}


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "kubernetes": version("kubernetes"),
        "urllib3": version("urllib3"),
        "pyyaml": version("PyYAML"),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Gathering benchmark (`python -m simulations.bench_gather`)",
        "",
        f"Date: {report['date']}. Command: `{report['command']}`.",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores, "
        f"{report['machine']['memory']}; Python {report['machine']['python']}, "
        f"kubernetes {report['machine']['kubernetes']}, urllib3 {report['machine']['urllib3']}.",
        f"Fleet: {report['clusters']} loopback clusters (one server process each) × "
        f"{report['nodes']} nodes × {report['pods']} pods, "
        f"synthetic seeds 0..{report['clusters'] - 1}"
        + (
            f", pods padded by {report['pod_padding_bytes']} bytes."
            if report["pod_padding_bytes"]
            else "."
        ),
        "",
        "| variant | all (median) | slowest alone (median) | ratio (target ≤ 2) | snapshot build "
        "(target < 10 s) | client CPU / servers CPU per gather-all | peak memory: traced / "
        "`placer snapshot` process RSS |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in report["variants"]:
        cpu = v["cpu_gather_all"]
        lines.append(
            f"| {v['label']} | {v['median_all_s']:.3f} s | {v['median_slowest_alone_s']:.3f} s | "
            f"**{v['ratio_all_over_slowest']:.2f}×** {_met(v['target_ratio_met'])} | "
            f"{v['median_snapshot_build_s']:.2f} s {_met(v['snapshot_target_met'])} | "
            f"{cpu['client_cpu_s']:.2f} s / {cpu['servers_cpu_s']:.2f} s | "
            f"{v['tracemalloc_peak_mib_gather_and_snapshot']:.0f} MiB / "
            f"{v['placer_snapshot_process']['peak_rss_mib']:.0f} MiB |"
        )
    before, after = report["load_average_before_after"]
    lines += [
        "",
        f"Peak RSS of the benchmark process: {report['peak_rss_mib']:.0f} MiB. "
        f"1-minute load average before/after: {before} / {after} (other jobs share the machine).",
        "",
    ]
    return "\n".join(lines)


def _met(flag: bool) -> str:
    return "met" if flag else "not met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--alone-runs", type=int, default=3, help="runs per cluster alone (median picks slowest)"
    )
    parser.add_argument(
        "--latency",
        type=float,
        action="append",
        help="per-request server latency in seconds (repeatable; default: 0, 0.05, 0.1)",
    )
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument(
        "--pod-padding", type=int, default=0, help="bytes of annotation added to every pod"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_gather.json")
    args = parser.parse_args(argv)
    latencies = args.latency or [0.0, 0.05, 0.1]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        variants = [run_variant(args, latency, Path(tmp)) for latency in latencies]
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python -m simulations.bench_gather " + " ".join(argv or sys.argv[1:]),
        "machine": machine(),
        "clusters": args.clusters,
        "nodes": args.nodes,
        "pods": args.pods,
        "pod_padding_bytes": args.pod_padding,
        "repeats": args.repeats,
        "variants": variants,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
