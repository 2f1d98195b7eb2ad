"""``python -m placer.testing bench``: how fast a loopback server answers the official client.

Measures, against one server seeded with synthetic content (in this process, or in a child
process with ``--process`` so the client has its own GIL): server start time, seed time, the
latency of single GETs through ``CoreV1Api`` over one keep-alive HTTPS connection, and listing
every pod in pages (raw JSON and typed models, best of ``--repeat``). Numbers depend on the
machine; compare runs made side by side.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from typing import Any

from placer.testing._kubeconfig import Endpoint, write_kubeconfig
from placer.testing._process import ApiServerProcess
from placer.testing._server import ApiServer
from placer.testing._synthetic import synthetic_cluster


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _measure_client(server: Endpoint, *, requests: int, page: int, repeat: int) -> dict[str, Any]:
    from kubernetes import client, config  # the client is only needed here

    with tempfile.TemporaryDirectory() as tmp:
        path = write_kubeconfig(os.path.join(tmp, "kubeconfig"), {"bench": server})
        load: Any = config.new_client_from_config  # the client's stubs are partial
        api = load(str(path), context="bench", persist_config=False)
    try:
        core: Any = client.CoreV1Api(api)
        core.read_namespace("default", _preload_content=False).read()  # connect
        latencies = []
        for _ in range(requests):
            start = time.perf_counter()
            core.read_namespace("default", _preload_content=False).read()
            latencies.append((time.perf_counter() - start) * 1e3)
        result: dict[str, Any] = {
            "get_ms": {
                "p50": round(statistics.median(latencies), 3),
                "p95": round(_percentile(latencies, 0.95), 3),
                "p99": round(_percentile(latencies, 0.99), 3),
            }
        }
        for mode in ("raw", "typed"):
            runs = []
            count = 0
            for _ in range(repeat):
                start = time.perf_counter()
                token: str | None = None
                count = pages = 0
                while True:
                    pages += 1
                    if mode == "typed":
                        typed = core.list_pod_for_all_namespaces(limit=page, _continue=token)
                        count += len(typed.items)
                        token = typed.metadata._continue
                    else:
                        raw = core.list_pod_for_all_namespaces(
                            limit=page, _continue=token, _preload_content=False
                        )
                        body = json.loads(raw.data)
                        count += len(body["items"])
                        token = body["metadata"].get("continue")
                    if not token:
                        break
                runs.append((time.perf_counter() - start) * 1e3)
            result[f"list_{mode}_ms"] = {
                "best": round(min(runs), 1),
                "median": round(statistics.median(runs), 1),
                "pods": count,
                "pages": pages,
            }
        return result
    finally:
        api.close()


def run_bench(
    *, nodes: int, pods: int, page: int, requests: int, repeat: int, process: bool
) -> dict[str, Any]:
    """Run the measurements; returns a JSON-ready report."""
    report: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "setup": {
            "nodes": nodes,
            "pods": pods,
            "page": page,
            "requests": requests,
            "repeat": repeat,
            "server": "child process" if process else "in process",
        },
    }
    if process:
        start = time.perf_counter()
        with ApiServerProcess(synthetic=(nodes, pods)) as child:
            report["start_and_seed_ms"] = round((time.perf_counter() - start) * 1e3, 1)
            report.update(_measure_client(child, requests=requests, page=page, repeat=repeat))
        return report
    start = time.perf_counter()
    server = ApiServer(name="bench").start()
    report["start_ms"] = round((time.perf_counter() - start) * 1e3, 1)
    try:
        objects = list(synthetic_cluster(nodes, pods))
        start = time.perf_counter()
        server.store.seed(objects)
        report["seed_ms"] = round((time.perf_counter() - start) * 1e3, 1)
        report.update(_measure_client(server, requests=requests, page=page, repeat=repeat))
    finally:
        server.stop()
    return report
