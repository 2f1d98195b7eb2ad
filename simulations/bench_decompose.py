"""Benchmark: decomposing workload manifests of mixed kinds with the built-in catalog.

Run it with ``python -m simulations.bench_decompose`` (options: ``--count``, ``--seed``,
``--repeat``, ``--out``). It generates ``--count`` manifests (default 10,000) spread evenly over
every kind of the built-in catalog, each with its own random shape (replicas, groups, resources,
init containers and sidecars, tolerations), and measures on ONE core (one process, one thread):

* ``decompose``: manifests per second from parsed objects to :class:`Decomposition` (instances,
  pod demands via ``placer.podspec``, gangs, status, the solver's ``Workload``);
* ``parse+decompose``: the same from YAML text (libyaml when available), as the CLI does;
* ``untrusted``: the same manifests decomposed with the catalog's expressions treated as
  untrusted (as a hub Karta or ``--catalog`` copy of them would be): each runs in-process only
  on inputs within its static cost bound (``placer.definitions.jqcost``), in the capped worker
  otherwise; per CPU second of this process and the worker together;
* jq overheads, side by side in the same run: the fused batch against one libjq call per path
  for the same definition and object; an in-process evaluation against the worker process
  (the price of an expression that is not proven to terminate); and the one-off static
  analysis (parse + termination check) per expression next to libjq's own compile time (both
  are paid once per distinct expression: programs are cached).

Each figure is the best of ``--repeat`` runs (the machine is shared and noisy). Rates are given
per CPU second of this process (what one core does, robust to other load on the machine) and
per wall-clock second (what was seen). Results go to ``simulations/results/bench_decompose.json``
with the machine, versions, seed, load average and date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import jq
import yaml

from placer.definitions import Catalog, decompose
from placer.definitions import jq as jq_runtime
from placer.definitions.documents import parse_documents
from placer.definitions.jq import compile_batch, compile_jq, normalize, to_json_text
from placer.definitions.jqcost import cost_of
from placer.definitions.jqsyntax import parse, termination_risk
from placer.definitions.validate import jq_fields

RESULTS = Path(__file__).parent / "results" / "bench_decompose.json"
TARGET = 2000.0


# --------------------------------------------------------------------------------------------
# Manifest generation


def _container(rng: random.Random, name: str, gpus: int) -> dict[str, Any]:
    requests: dict[str, Any] = {
        "cpu": rng.choice(["250m", "500m", "1", "2", "4", "8", "16", "32"]),
        "memory": rng.choice(["256Mi", "1Gi", "4Gi", "16Gi", "64Gi", "128Gi"]),
    }
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    return {
        "name": name,
        "image": f"registry.example.com/{name}:{rng.randint(1, 9)}",
        "resources": resources,
    }


def _pod_spec(rng: random.Random, gpus: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(rng, "main", gpus)]}
    if rng.random() < 0.3:
        spec["initContainers"] = [_container(rng, "init", 0)]
    if rng.random() < 0.3:
        sidecar = _container(rng, "sidecar", 0)
        sidecar["restartPolicy"] = "Always"
        spec.setdefault("initContainers", []).append(sidecar)
    if gpus:
        spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        spec["nodeSelector"] = {"nvidia.com/gpu.product": rng.choice(["H100", "A100", "L40S"])}
    return spec


def _template(rng: random.Random, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": rng.choice(["a", "b", "c"])}},
        "spec": _pod_spec(rng, gpus),
    }


def _gpus(rng: random.Random) -> int:
    return rng.choice([0, 0, 1, 2, 4, 8])


def _meta(rng: random.Random, index: int) -> dict[str, Any]:
    return {"name": f"w{index}", "namespace": rng.choice(["default", "research", "serving"])}


def _groups(rng: random.Random, make: Callable[[int], dict[str, Any]]) -> list[dict[str, Any]]:
    return [make(i) for i in range(rng.randint(1, 3))]


def _jobset(rng: random.Random, i: int) -> dict[str, Any]:
    def job(n: int) -> dict[str, Any]:
        parallelism = rng.randint(1, 4)
        return {
            "name": f"rj{n}",
            "replicas": rng.randint(1, 4),
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "template": _template(rng, _gpus(rng)),
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta(rng, i),
        "spec": {"replicatedJobs": _groups(rng, job)},
    }


def _pytorch(rng: random.Random, i: int) -> dict[str, Any]:
    gpus = _gpus(rng)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _meta(rng, i),
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": _template(rng, gpus)},
                "Worker": {"replicas": rng.randint(1, 16), "template": _template(rng, gpus)},
            }
        },
    }


def _mpijob(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _meta(rng, i),
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template(rng, 0)},
                "Worker": {"replicas": rng.randint(1, 8), "template": _template(rng, _gpus(rng))},
            }
        },
    }


def _ray_cluster_spec(rng: random.Random) -> dict[str, Any]:
    def group(n: int) -> dict[str, Any]:
        return {
            "groupName": f"g{n}",
            "replicas": rng.randint(0, 6),
            "minReplicas": 0,
            "maxReplicas": 10,
            "rayStartParams": {},
            "template": _template(rng, _gpus(rng)),
        }

    return {
        "headGroupSpec": {"rayStartParams": {}, "template": _template(rng, 0)},
        "workerGroupSpecs": _groups(rng, group),
    }


def _raycluster(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": _meta(rng, i),
        "spec": _ray_cluster_spec(rng),
    }


def _rayjob(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": _meta(rng, i),
        "spec": {"entrypoint": "python main.py", "rayClusterSpec": _ray_cluster_spec(rng)},
    }


def _rayservice(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": _meta(rng, i),
        "spec": {"rayClusterConfig": _ray_cluster_spec(rng)},
    }


def _lws(rng: random.Random, i: int) -> dict[str, Any]:
    gpus = _gpus(rng)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(rng, i),
        "spec": {
            "replicas": rng.randint(1, 4),
            "leaderWorkerTemplate": {
                "size": rng.randint(2, 8),
                "leaderTemplate": _template(rng, gpus),
                "workerTemplate": _template(rng, gpus),
            },
        },
    }


def _simple(api_version: str, kind: str) -> Callable[[random.Random, int], dict[str, Any]]:
    def make(rng: random.Random, i: int) -> dict[str, Any]:
        template = _template(rng, _gpus(rng))
        spec: dict[str, Any]
        if kind == "Pod":
            return {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": _meta(rng, i),
                "spec": template["spec"],
            }
        if kind == "Job":
            spec = {"parallelism": rng.randint(1, 8), "template": template}
        elif kind == "CronJob":
            spec = {
                "schedule": "0 * * * *",
                "jobTemplate": {"spec": {"parallelism": rng.randint(1, 4), "template": template}},
            }
        else:
            spec = {"replicas": rng.randint(1, 8), "template": template}
        return {"apiVersion": api_version, "kind": kind, "metadata": _meta(rng, i), "spec": spec}

    return make


def _isvc(rng: random.Random, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "predictor": {
            "minReplicas": rng.randint(1, 4),
            "model": {
                "modelFormat": {"name": "pytorch"},
                "storageUri": "s3://models/m",
                "resources": _container(rng, "m", _gpus(rng))["resources"],
            },
        }
    }
    if rng.random() < 0.5:
        spec["transformer"] = {"containers": [_container(rng, "kserve-container", 0)]}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": _meta(rng, i),
        "spec": spec,
    }


def _llmisvc(rng: random.Random, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"uri": "hf://m"},
        "replicas": rng.randint(1, 4),
        "template": _pod_spec(rng, _gpus(rng)),
    }
    if rng.random() < 0.5:
        spec["prefill"] = {"replicas": rng.randint(1, 2), "template": _pod_spec(rng, _gpus(rng))}
    return {
        "apiVersion": f"serving.kserve.io/{rng.choice(['v1alpha1', 'v1alpha2'])}",
        "kind": "LLMInferenceService",
        "metadata": _meta(rng, i),
        "spec": spec,
    }


def _knative(rng: random.Random, i: int) -> dict[str, Any]:
    template = _template(rng, _gpus(rng))
    template["metadata"]["annotations"] = {
        "autoscaling.knative.dev/min-scale": str(rng.randint(0, 3))
    }
    return {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": _meta(rng, i),
        "spec": {"template": template},
    }


def _nimservice(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": _meta(rng, i),
        "spec": {
            "image": {"repository": "nvcr.io/nim/m", "tag": "1"},
            "replicas": rng.randint(1, 4),
            "resources": _container(rng, "nim", _gpus(rng))["resources"],
        },
    }


def _nimcache(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMCache",
        "metadata": _meta(rng, i),
        "spec": {"resources": {"cpu": "500m", "memory": f"{rng.randint(1, 8)}Gi"}},
    }


def _dynamo_v1alpha1(rng: random.Random, i: int) -> dict[str, Any]:
    services = {
        f"Svc{n}": {
            "replicas": rng.randint(1, 3),
            "resources": {
                "requests": {"cpu": str(rng.randint(1, 8)), "memory": "8Gi", "gpu": str(_gpus(rng))}
            },
            "extraPodSpec": {"mainContainer": {"image": "dynamo:1"}},
        }
        for n in range(rng.randint(1, 3))
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": _meta(rng, i),
        "spec": {"services": services},
    }


def _dynamo_v1beta1(rng: random.Random, i: int) -> dict[str, Any]:
    def component(n: int) -> dict[str, Any]:
        return {
            "name": f"c{n}",
            "replicas": rng.randint(1, 3),
            "podTemplate": _template(rng, _gpus(rng)),
        }

    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": _meta(rng, i),
        "spec": {"components": _groups(rng, component)},
    }


def _grove(rng: random.Random, i: int) -> dict[str, Any]:
    def clique(n: int) -> dict[str, Any]:
        return {
            "name": f"q{n}",
            "spec": {
                "roleName": f"q{n}",
                "replicas": rng.randint(1, 4),
                "podSpec": _pod_spec(rng, _gpus(rng)),
            },
        }

    return {
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": _meta(rng, i),
        "spec": {"replicas": 1, "template": {"cliques": _groups(rng, clique)}},
    }


def _milvus(rng: random.Random, i: int) -> dict[str, Any]:
    components = {
        name: {
            "replicas": rng.randint(1, 3),
            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
        }
        for name in ("proxy", "queryNode", "dataNode", "indexNode", "mixCoord")
    }
    return {
        "apiVersion": "milvus.io/v1beta1",
        "kind": "Milvus",
        "metadata": _meta(rng, i),
        "spec": {"mode": "cluster", "components": components},
    }


def _sandbox(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": _meta(rng, i),
        "spec": {"podTemplate": _template(rng, _gpus(rng))},
    }


GENERATORS: list[Callable[[random.Random, int], dict[str, Any]]] = [
    _jobset,
    _pytorch,
    _mpijob,
    _raycluster,
    _rayjob,
    _rayservice,
    _lws,
    _simple("v1", "Pod"),
    _simple("batch/v1", "Job"),
    _simple("batch/v1", "CronJob"),
    _simple("apps/v1", "Deployment"),
    _simple("apps/v1", "StatefulSet"),
    _isvc,
    _llmisvc,
    _knative,
    _nimservice,
    _nimcache,
    _dynamo_v1alpha1,
    _dynamo_v1beta1,
    _grove,
    _milvus,
    _sandbox,
]


def generate(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` manifests, kinds in round-robin order, shapes drawn from ``seed``."""
    rng = random.Random(seed)
    return [GENERATORS[i % len(GENERATORS)](rng, i) for i in range(count)]


# --------------------------------------------------------------------------------------------
# Measurements


def _best(repeat: int, work: Callable[[], object]) -> float:
    """Best wall-clock seconds of ``repeat`` runs."""
    return _best_both(repeat, work)[0]


def _best_both(repeat: int, work: Callable[[], object]) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds (this process) of ``repeat`` runs."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        work()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    return wall, cpu


def _worker_cpu_seconds() -> float:
    """CPU seconds the jq worker process has used (0 when it is not running; Linux /proc)."""
    proc = jq_runtime._WORKER._proc
    if proc is None or proc.poll() is not None:
        return 0.0
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(count: int, seed: int, repeat: int) -> dict[str, Any]:
    catalog = Catalog.builtin()
    manifests = generate(count, seed)
    texts = [yaml.safe_dump(m, sort_keys=False) for m in manifests]
    # warm-up: compile every definition's fused program once (a cost paid once per process)
    warm = time.perf_counter()
    for manifest in manifests[: len(GENERATORS)]:
        decompose(manifest, catalog)
    warm_up = time.perf_counter() - warm
    pods = sum(decompose(m, catalog).workload.pod_count for m in manifests)

    def decompose_all() -> None:
        for manifest in manifests:
            decompose(manifest, catalog)

    def parse_and_decompose_all() -> None:
        for text in texts:
            for document in parse_documents(text, "bench"):
                decompose(document.data, catalog)

    seconds, cpu_seconds = _best_both(repeat, decompose_all)
    parse_seconds, parse_cpu_seconds = _best_both(repeat, parse_and_decompose_all)

    # the same expressions, untrusted: in-process only within their static bound
    trusted = set(jq_runtime._TRUSTED)
    jq_runtime._TRUSTED.clear()
    try:
        decompose_all()  # warm-up (starts the worker if any input needs it)
        worker_before = _worker_cpu_seconds()
        untrusted_seconds, untrusted_cpu_seconds = _best_both(repeat, decompose_all)
        worker_cpu = (_worker_cpu_seconds() - worker_before) / repeat  # per run, on average
        sizes = [len(to_json_text(normalize(m))) for m in manifests]
        beyond = sum(
            1
            for manifest, size in zip(manifests, sizes, strict=True)
            for _, expression in jq_fields(catalog.find(manifest["apiVersion"], manifest["kind"]))
            if compile_jq(expression).in_process and size > compile_jq(expression).max_input
        )
    finally:
        jq_runtime._TRUSTED.update(trusted)

    # jq: fused batch vs one call per path, same definition and object (a JobSet)
    jobset = manifests[0]
    definition = catalog.find(jobset["apiVersion"], jobset["kind"])
    expressions = tuple(text for _, text in jq_fields(definition))
    text = to_json_text(normalize(jobset))
    batch = compile_batch(expressions)
    programs = [compile_jq(e) for e in expressions]
    rounds = 2000
    fused = _best(repeat, lambda: [batch.run(text) for _ in range(rounds)]) / rounds
    separate = (
        _best(repeat, lambda: [[p.run(text) for p in programs] for _ in range(rounds)]) / rounds
    )

    # jq: in-process vs worker for the same small expression
    in_process = compile_jq(".spec.replicatedJobs[].name")
    in_worker = compile_jq("def names: .spec.replicatedJobs[].name; names | until(true; .)")
    assert in_process.risk is None and in_worker.risk is not None
    in_worker.run(text)  # start the worker
    local = _best(repeat, lambda: [in_process.run(text) for _ in range(rounds)]) / rounds
    remote = _best(repeat, lambda: [in_worker.run(text) for _ in range(200)]) / 200

    # static analysis (parse + termination check + cost bound), paid once per distinct expression
    catalog_expressions = sorted({e for d in catalog.definitions for _, e in jq_fields(d)})
    analysis = _best(
        repeat,
        lambda: [
            (termination_risk(tree), cost_of(tree))
            for tree in (parse(e) for e in catalog_expressions)
        ],
    ) / len(catalog_expressions)
    bounds = [cost_of(parse(e)).cost for e in catalog_expressions]
    libjq_compile = _best(1, lambda: [jq.compile(e) for e in catalog_expressions]) / len(
        catalog_expressions
    )

    return {
        "manifests": count,
        "kinds": len(GENERATORS),
        "pods": pods,
        "decompose": {
            "cpu_seconds": round(cpu_seconds, 4),
            "manifests_per_cpu_s": round(count / cpu_seconds),
            "wall_seconds": round(seconds, 4),
            "manifests_per_wall_s": round(count / seconds),
        },
        "parse_and_decompose": {
            "cpu_seconds": round(parse_cpu_seconds, 4),
            "manifests_per_cpu_s": round(count / parse_cpu_seconds),
            "wall_seconds": round(parse_seconds, 4),
            "manifests_per_wall_s": round(count / parse_seconds),
        },
        "untrusted": {
            "cpu_seconds_this_process": round(untrusted_cpu_seconds, 4),
            "cpu_seconds_worker": round(worker_cpu, 4),
            "manifests_per_cpu_s": round(count / (untrusted_cpu_seconds + worker_cpu)),
            "wall_seconds": round(untrusted_seconds, 4),
            "manifests_per_wall_s": round(count / untrusted_seconds),
            "evaluations_beyond_bound_in_worker": beyond,
        },
        "warm_up_seconds": round(warm_up, 4),
        "target_manifests_per_s": TARGET,
        "jq": {
            "jobset_expressions": len(expressions),
            "fused_batch_us": round(fused * 1e6, 1),
            "one_call_per_path_us": round(separate * 1e6, 1),
            "fused_speedup": round(separate / fused, 2),
            "in_process_eval_us": round(local * 1e6, 1),
            "worker_eval_us": round(remote * 1e6, 1),
            "worker_over_in_process": round(remote / local, 1),
            "static_analysis_us_per_expression": round(analysis * 1e6, 1),
            "libjq_compile_us_per_expression": round(libjq_compile * 1e6, 1),
            "catalog_expressions": len(catalog_expressions),
            "catalog_expressions_in_worker": sum(
                1 for e in catalog_expressions if compile_jq(e).risk is not None
            ),
            "catalog_largest_growth": round(max(b.growth() for b in bounds if b is not None)),
            "catalog_largest_work_growth": round(
                max(b.work_growth() for b in bounds if b is not None)
            ),
            "catalog_largest_degree": max(b.degree() for b in bounds if b is not None),
        },
    }


def environment(seed: int, repeat: int) -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "absent"

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "placer": version("placer"),
        "jq": version("jq"),
        "PyYAML": version("PyYAML"),
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "seed": seed,
        "repeat": repeat,
        "command": "python -m simulations.bench_decompose",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = {
        "environment": environment(args.seed, args.repeat),
        **measure(args.count, args.seed, args.repeat),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    rate = result["decompose"]["manifests_per_cpu_s"]
    wall = result["decompose"]["manifests_per_wall_s"]
    print(json.dumps(result, indent=2))
    untrusted = result["untrusted"]["manifests_per_cpu_s"]
    print(
        f"\ndecompose: {rate} manifests per CPU second on one core ({wall} per wall-clock second; "
        f"target {TARGET:.0f}); untrusted definitions: {untrusted} per CPU second (with the "
        f"worker's) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
