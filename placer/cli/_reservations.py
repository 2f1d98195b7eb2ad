"""``placer get reservations``: the reservations the placement controller holds on its hub.

    placer get reservations [-n NAMESPACE] [--hub-context NAME] [--kubeconfig PATH]...
                            [--catalog DIR]... [-o text|json|yaml]

Reads the hub's ConfigMap ``placer-reservations`` (in ``placer-system``, the controller's
namespace: :mod:`placer.controller.reservationstore`) and each gang's hub object. One row per
reservation (of every namespace; ``-n`` keeps one), in the order they were planned: NAMESPACE,
NAME, KIND, GPU (what the gang asks, ``-`` when its object cannot be read), CLUSTER, NODES (how
many), START (when it may start: the running work there is expected to be gone; ``in 42m`` or
``3m ago``), AGE (since planned) and REASON (why it got one). JSON: ``{"reservations":
[...]}``, each item as the ConfigMap keeps it plus ``gpus``. No reservation: ``No
reservations.`` on stderr, exit 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from placer.cli._output import print_data, print_table
from placer.errors import KubeError, NotFoundError, PlacerError

__all__ = ["HEADER", "get_reservations", "relative"]

#: where the controller keeps them (its Lease's namespace, by default).
NAMESPACE = "placer-system"
HEADER = ["NAMESPACE", "NAME", "KIND", "GPU", "CLUSTER", "NODES", "START", "AGE", "REASON"]


def get_reservations(args: argparse.Namespace, context: str) -> int:
    """``placer get reservations`` against the hub ``context`` (module docstring)."""
    from placer.cli.definitions import load_catalog
    from placer.controller.reservationstore import CONFIGMAP, DATA_KEY, decode, entry_of
    from placer.definitions import decompose
    from placer.kube import load_kubeconfigs, open_client
    from placer.solver.state import gpu_milli

    catalog = load_catalog(args)
    client = open_client(load_kubeconfigs(args.kubeconfig), context, name=context)
    items: list[dict[str, Any]] = []
    try:
        try:
            obj = client.get("v1", "ConfigMap", CONFIGMAP, namespace=NAMESPACE)
            text = (obj.get("data") or {}).get(DATA_KEY) or "[]"
        except NotFoundError:
            text = "[]"
        booked, problems = decode(text)
        for problem in problems:
            print(f"warning: ConfigMap {CONFIGMAP}: {problem}", file=sys.stderr)
        for one in booked:
            ref = one.ref
            if args.namespace and ref.namespace != args.namespace:
                continue
            gpus: float | None = None
            try:
                gang = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
                workload = decompose(gang, catalog, source="hub").workload
                gpus = gpu_milli(workload.total_requests()) / 1000
            except (KubeError, PlacerError):
                pass  # deleted meanwhile, or a kind this catalog lacks: shown without
            items.append({**entry_of(one), "gpus": gpus})
    finally:
        client.close()
    if args.output != "text":
        print_data({"reservations": items}, args.output)
        return 0
    if not items:
        print("No reservations.", file=sys.stderr)
        return 0
    from placer.inventory import age
    from placer.timestamps import parse_rfc3339

    now = time.time()
    rows = [HEADER]
    for item in items:
        start = parse_rfc3339(item["start"]) or now
        rows.append(
            [
                item["namespace"] or "<none>",
                item["name"],
                item["kind"],
                "-" if item["gpus"] is None else f"{item['gpus']:g}",
                item["cluster"],
                str(len(item["nodes"])),
                relative(start - now),
                age(item["planned"]),
                item["reason"],
            ]
        )
    print_table(rows)
    return 0


def relative(seconds: float) -> str:
    """``in 42m`` (future) or ``3m ago`` (past), kubectl's age units (s, m, h, d)."""
    span = abs(int(seconds))
    if span < 120:
        text = f"{span}s"
    elif span < 7200:
        text = f"{span // 60}m"
    elif span < 172800:
        text = f"{span // 3600}h"
    else:
        text = f"{span // 86400}d"
    return f"in {text}" if seconds > 0 else f"{text} ago"
