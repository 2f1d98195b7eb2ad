"""Ledger entries: one in-flight placement, and how it is stored in a ConfigMap (pure).

An entry (:class:`InFlight`) is a placement with its decision id, creation and expiry time and
whether it was written under the workload's claim. On a member it is one data key of a ledger
ConfigMap in :data:`LEDGER_NAMESPACE`, labelled :data:`LABEL_IN_FLIGHT`: the key is
:func:`entry_name` of the workload, the value the JSON of :func:`encode_entry` (workload,
cluster, decision, times, every pod with its node, requests and GPU devices; whether it was
written under a claim, and whether it is an update of a running copy). The package
docstring (:mod:`placer.dispatch.ledger`) says why the ledger exists and when entries stop
counting.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.dispatch.storage import NAMESPACE
from placer.model import Placement, PodAssignment, WorkloadRef
from placer.objects import name_of
from placer.timestamps import parse_rfc3339, rfc3339

__all__ = [
    "DEFAULT_TTL",
    "LABEL_IN_FLIGHT",
    "LEDGER_NAMESPACE",
    "InFlight",
    "decode_entry",
    "encode_entry",
    "entries_configmap",
    "entries_from_configmap",
    "entry_from_configmap",
    "entry_name",
    "entry_to_configmap",
]

LEDGER_NAMESPACE = NAMESPACE
LABEL_IN_FLIGHT = "placer.dev/in-flight"
#: seconds an entry counts at most.
DEFAULT_TTL = 600.0


@dataclass(frozen=True)
class InFlight:
    """One placement in flight: charged to its cluster's nodes until observed or expired."""

    placement: Placement
    decision: str
    #: epoch seconds.
    created: float
    expires: float
    #: the ledger ConfigMap holding it on its member (empty: not stored, or not known).
    store: str = field(default="", compare=False)
    #: written while its decider held the workload's claim on this member
    #: (:mod:`placer.dispatch.claims`): it is still to be applied only while that claim lives.
    claimed: bool = False
    #: the placement of a changed workload applied over its running copy
    #: (:mod:`placer.dispatch.update`): the copy's pods already hold part of it, so an
    #: observed pod retires only what its requests cover of the planned pod it matches
    #: (:func:`~placer.dispatch.ledger.sync.observe`) — the entry charges the difference.
    update: bool = False

    @property
    def cluster(self) -> str:
        return self.placement.cluster

    @property
    def workload(self) -> WorkloadRef:
        return self.placement.workload

    def expired(self, now: float) -> bool:
        return now >= self.expires

    @classmethod
    def new(
        cls,
        placement: Placement,
        decision: str,
        *,
        now: float | None = None,
        ttl: float = DEFAULT_TTL,
        claimed: bool = False,
        update: bool = False,
    ) -> InFlight:
        created = time.time() if now is None else now
        return cls(placement, decision, created, created + ttl, claimed=claimed, update=update)


def entry_name(ref: WorkloadRef) -> str:
    """The key of ``ref``'s entry: its data key in a ledger ConfigMap, and the name of the
    ConfigMap :func:`write_entry` stores it in alone (one entry per workload and cluster)."""
    key = f"{ref.api_version}/{ref.kind}/{ref.namespace}/{ref.name}"
    return "inflight-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def encode_entry(entry: InFlight) -> str:
    """The JSON text of an entry (as stored in a ConfigMap's data)."""
    p = entry.placement
    ref = p.workload
    pods = [
        [pod.component, pod.instance, pod.index, pod.node, dict(pod.requests), list(pod.devices)]
        for pod in p.pods
    ]
    data: dict[str, Any] = {
        "workload": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
        },
        "cluster": p.cluster,
        "decision": entry.decision,
        "created": rfc3339(entry.created, digits=6),
        "expires": rfc3339(entry.expires, digits=6),
        "requests": dict(p.requests),
        "pods": pods,
    }
    if entry.claimed:
        data["claimed"] = True
    if entry.update:
        data["update"] = True
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def decode_entry(text: str, *, store: str = "") -> InFlight | None:
    """The entry of :func:`encode_entry`'s text, or ``None`` when it is unreadable."""
    try:
        data = json.loads(text)
        w = data["workload"]
        ref = WorkloadRef(str(w["apiVersion"]), str(w["kind"]), str(w["namespace"]), str(w["name"]))
        pods = tuple(
            PodAssignment(
                component=str(c),
                instance=str(i),
                index=int(x),
                node=str(n),
                requests={str(k): int(v) for k, v in dict(r).items()},
                devices=tuple(int(d) for d in devs),
            )
            for c, i, x, n, r, devs in data["pods"]
        )
        requests = {str(k): int(v) for k, v in dict(data.get("requests") or {}).items()}
        created = parse_rfc3339(data["created"])
        expires = parse_rfc3339(data["expires"])
        if created is None or expires is None:
            return None
        placement = Placement(ref, str(data["cluster"]), pods, requests)
        decision = str(data.get("decision", ""))
        claimed = data.get("claimed") is True
        update = data.get("update") is True
        return InFlight(placement, decision, created, expires, store, claimed, update)
    except (ValueError, KeyError, TypeError):
        return None


def entries_configmap(name: str, entries: Sequence[InFlight]) -> dict[str, Any]:
    """A ledger ConfigMap named ``name`` holding ``entries`` (data key: :func:`entry_name`)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": LEDGER_NAMESPACE,
            "labels": {LABEL_IN_FLIGHT: "true"},
        },
        "data": {entry_name(e.workload): encode_entry(e) for e in entries},
    }


def entry_to_configmap(entry: InFlight) -> dict[str, Any]:
    """The ConfigMap that stores ``entry`` alone (named :func:`entry_name`)."""
    return entries_configmap(entry_name(entry.workload), [entry])


def entries_from_configmap(obj: Mapping[str, Any]) -> tuple[list[InFlight], list[str]]:
    """The readable entries of a ledger ConfigMap, and the data keys that are not."""
    store = name_of(obj)
    entries: list[InFlight] = []
    bad: list[str] = []
    for key, text in (obj.get("data") or {}).items():
        entry = decode_entry(str(text), store=store)
        if entry is None:
            bad.append(str(key))
        else:
            entries.append(entry)
    return entries, bad


def entry_from_configmap(obj: Mapping[str, Any]) -> InFlight | None:
    """The entry of a single-entry ledger ConfigMap, or ``None`` when it is unreadable."""
    entries, bad = entries_from_configmap(obj)
    return entries[0] if len(entries) == 1 and not bad else None
