"""Where the controller keeps its reservations: one ConfigMap on the hub.

The reservations the controller holds (:mod:`placer.controller.reserving`) must outlive the
process: a restarted controller, or the replica taking over the Lease, goes on with the same
reservations (same cluster, nodes and start) instead of planning new ones. They are kept in the
ConfigMap ``placer-reservations`` in the controller's namespace on the hub (the Lease's,
``placer-system`` by default), under the key ``reservations.json``: a JSON list, in the order
they were planned, each item

.. code-block:: json

    {"apiVersion": "batch/v1", "kind": "Job", "namespace": "team-a", "name": "pretrain",
     "uid": "…", "cluster": "m1", "nodes": ["m1-n0", "…"],
     "start": "2026-12-02T04:00:00.000Z", "planned": "2026-12-02T03:00:00.000Z",
     "reason": "waited 1.0 h >= 1.0 h", "runtimeSeconds": 7200}

(``runtimeSeconds`` is ``null`` when the gang gives no expected run time). The hub object's
uid is kept so that an object deleted and created again under the same name does not inherit
the reservation. ``placer get reservations`` reads the same ConfigMap.

:func:`encode` and :func:`decode` are pure; :class:`ReservationStore` reads and writes the
ConfigMap (server-side apply, the controller's field manager). An entry that cannot be read
(edited by hand) is dropped with a warning, never the whole list.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.errors import NotFoundError
from placer.kube import KubeClient
from placer.model import WorkloadRef
from placer.solver.reservations import Reservation
from placer.timestamps import parse_rfc3339, rfc3339

__all__ = [
    "CONFIGMAP",
    "DATA_KEY",
    "Booked",
    "ReservationStore",
    "decode",
    "encode",
    "entry_of",
]

log = logging.getLogger(__name__)

#: the ConfigMap's name (in the controller's namespace on the hub).
CONFIGMAP = "placer-reservations"
#: its data key.
DATA_KEY = "reservations.json"
_FIELD_MANAGER = "placer-controller"


@dataclass(frozen=True)
class Booked:
    """A reservation the controller holds, with the uid of the hub object it is for."""

    reservation: Reservation
    uid: str

    @property
    def ref(self) -> WorkloadRef:
        return self.reservation.workload


def entry_of(booked: Booked) -> dict[str, Any]:
    """One reservation as a JSON item (module docstring); ``/v1/placements`` and ``placer get
    reservations -o json`` show the same."""
    reservation = booked.reservation
    ref = reservation.workload
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
        "uid": booked.uid,
        "cluster": reservation.cluster,
        "nodes": list(reservation.nodes),
        "start": rfc3339(reservation.start_s, digits=3),
        "planned": rfc3339(reservation.planned_s, digits=3),
        "reason": reservation.reason,
        "runtimeSeconds": reservation.runtime_s,
    }


def encode(booked: Sequence[Booked]) -> str:
    """The ConfigMap's data value for ``booked`` (in the order given)."""
    return json.dumps([entry_of(b) for b in booked], separators=(",", ":"))


def decode(text: str) -> tuple[list[Booked], list[str]]:
    """The reservations of a ConfigMap's data value, and what could not be read (one message
    per bad item; a value that is not a JSON list is one problem and no reservation)."""
    try:
        items = json.loads(text)
    except ValueError as err:
        return [], [f"{DATA_KEY} is not JSON: {err}"]
    if not isinstance(items, list):
        return [], [f"{DATA_KEY} is not a JSON list"]
    found: list[Booked] = []
    problems: list[str] = []
    for position, item in enumerate(items):
        try:
            found.append(_booked(item))
        except (KeyError, TypeError, ValueError) as err:
            problems.append(f"{DATA_KEY}[{position}] is left out: {err}")
    return found, problems


def _booked(item: Any) -> Booked:
    if not isinstance(item, Mapping):
        raise TypeError("not an object")
    start = parse_rfc3339(item["start"])
    planned = parse_rfc3339(item["planned"])
    if start is None or planned is None:
        raise ValueError("start and planned must be RFC 3339 times")
    nodes = item["nodes"]
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
        raise ValueError("nodes must be a list of node names")
    runtime = item.get("runtimeSeconds")
    if runtime is not None and (isinstance(runtime, bool) or not isinstance(runtime, int | float)):
        raise ValueError("runtimeSeconds must be a number or null")
    ref = WorkloadRef(
        api_version=_text(item, "apiVersion"),
        kind=_text(item, "kind"),
        namespace=str(item.get("namespace") or ""),
        name=_text(item, "name"),
    )
    reservation = Reservation(
        workload=ref,
        cluster=_text(item, "cluster"),
        nodes=tuple(nodes),
        start_s=start,
        planned_s=planned,
        reason=str(item.get("reason") or ""),
        runtime_s=None if runtime is None else float(runtime),
    )
    return Booked(reservation, str(item.get("uid") or ""))


def _text(item: Mapping[str, Any], key: str) -> str:
    value = item[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


class ReservationStore:
    """The ConfigMap holding the reservations (module docstring).

    Args:
        client: a client for the hub.
        namespace: the controller's namespace there (the Lease's).
    """

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def load(self) -> list[Booked]:
        """The reservations kept (none when the ConfigMap does not exist).

        Raises:
            KubeError: the ConfigMap cannot be read (the caller tries again later).
        """
        try:
            obj = self.client.get("v1", "ConfigMap", CONFIGMAP, namespace=self.namespace)
        except NotFoundError:
            return []
        text = (obj.get("data") or {}).get(DATA_KEY) or "[]"
        found, problems = decode(text)
        for problem in problems:
            log.warning(
                "ConfigMap %s/%s: %s",
                self.namespace,
                CONFIGMAP,
                problem,
                extra={"event": "reservation-unreadable"},
            )
        return found

    def save(self, booked: Sequence[Booked]) -> None:
        """Keep ``booked`` (the whole list, replacing what was kept).

        Raises:
            KubeError: the hub refused the write.
        """
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CONFIGMAP,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "placer"},
            },
            "data": {DATA_KEY: encode(booked)},
        }
        self.client.apply(body, field_manager=_FIELD_MANAGER, namespace=self.namespace, force=True)
