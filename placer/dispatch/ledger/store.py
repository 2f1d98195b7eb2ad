"""Ledger entries on a member: writing, reading and removing the ledger ConfigMaps.

A dispatch writes the entries of all its workloads for one cluster in one ConfigMap (chunks of
at most :data:`ENTRIES_PER_CONFIGMAP` entries and :data:`CONFIGMAP_BYTES` of data;
:func:`write_entries`), so reserving costs one request per cluster; entries leave by key
(:func:`remove_entries`) and a ConfigMap goes when its last entry does. Every read is one list
call per cluster (:func:`read_entries`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import replace

from placer.dispatch.ledger.entry import (
    LABEL_IN_FLIGHT,
    LEDGER_NAMESPACE,
    InFlight,
    encode_entry,
    entries_configmap,
    entries_from_configmap,
    entry_name,
    entry_to_configmap,
)
from placer.dispatch.storage import create_configmap
from placer.errors import ConflictError, NotFoundError
from placer.kube import KubeClient
from placer.model import WorkloadRef
from placer.objects import name_of

__all__ = [
    "CONFIGMAP_BYTES",
    "ENTRIES_PER_CONFIGMAP",
    "delete_entry",
    "read_entries",
    "remove_entries",
    "write_entries",
    "write_entry",
]

log = logging.getLogger(__name__)

#: entries per ledger ConfigMap, and bytes of entry data (ConfigMaps hold at most 1 MiB).
ENTRIES_PER_CONFIGMAP = 250
CONFIGMAP_BYTES = 512 * 1024


def write_entry(client: KubeClient, entry: InFlight, *, field_manager: str = "placer") -> InFlight:
    """Store ``entry`` alone in its own ConfigMap (named :func:`entry_name`); idempotent.

    Creates :data:`LEDGER_NAMESPACE` when it is missing. Returns the entry with its ``store``.
    Raises :class:`KubeError` when the cluster refuses.
    """
    body = entry_to_configmap(entry)
    try:
        create_configmap(client, body, field_manager)
    except ConflictError:  # written before (a retry): this entry replaces it
        client.apply(body, field_manager=field_manager, force=True)
    return replace(entry, store=body["metadata"]["name"])


def write_entries(
    client: KubeClient,
    entries: Sequence[InFlight],
    *,
    name: str,
    field_manager: str = "placer",
) -> list[InFlight]:
    """Store ``entries`` in as few ConfigMaps as fit (at most :data:`ENTRIES_PER_CONFIGMAP`
    entries and :data:`CONFIGMAP_BYTES` of data each) — one request for a whole dispatch to a
    cluster instead of one per workload. Each ConfigMap is new: ``NAME-<random>``, so that
    concurrent writers (parts of one decision dispatched in parallel) never share one.

    Returns the entries with their ``store``. Raises :class:`KubeError` when the cluster
    refuses (entries of chunks written before the failure stay; they are dropped by readers
    once :data:`APPLY_GRACE` has passed without their workload).
    """
    stored: list[InFlight] = []
    chunk: list[InFlight] = []
    size = 0

    def flush() -> None:
        nonlocal chunk, size
        if not chunk:
            return
        for attempt in range(3):
            store = f"{name}-{secrets.token_hex(4)}"
            try:
                create_configmap(client, entries_configmap(store, chunk), field_manager)
                break
            except ConflictError:
                if attempt == 2:
                    raise
        stored.extend(replace(e, store=store) for e in chunk)
        chunk, size = [], 0

    for entry in entries:
        text = len(encode_entry(entry))
        if chunk and (len(chunk) >= ENTRIES_PER_CONFIGMAP or size + text > CONFIGMAP_BYTES):
            flush()
        chunk.append(entry)
        size += text
    flush()
    return stored


def remove_entries(client: KubeClient, store: str, refs: Iterable[WorkloadRef]) -> None:
    """Take the entries of ``refs`` out of ledger ConfigMap ``store``; delete it once empty.

    Gone already is fine (another reader cleaned up).
    """
    keys = {entry_name(ref): None for ref in refs}
    if not keys:
        return
    try:
        result = client.patch("v1", "ConfigMap", store, {"data": keys}, namespace=LEDGER_NAMESPACE)
    except NotFoundError:
        return
    if not (result or {}).get("data"):
        client.delete("v1", "ConfigMap", store, namespace=LEDGER_NAMESPACE, missing_ok=True)


def delete_entry(client: KubeClient, ref: WorkloadRef) -> None:
    """Remove the entry of ``ref`` from ``client``'s cluster, wherever it is stored (one list
    call to find it); gone already is fine."""
    key = entry_name(ref)
    listed = client.list(
        "v1", "ConfigMap", namespace=LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
    )
    for item in listed.items:
        if key in (item.get("data") or {}):
            remove_entries(client, name_of(item), [ref])


def read_entries(client: KubeClient) -> list[InFlight]:
    """Every readable entry stored on ``client``'s cluster (one list call)."""
    listed = client.list(
        "v1", "ConfigMap", namespace=LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
    )
    entries: list[InFlight] = []
    for item in listed.items:
        found, bad = entries_from_configmap(item)
        for key in bad:
            name = name_of(item)
            log.warning(
                "cluster %s: skipping unreadable in-flight entry %s/%s", client.name, name, key
            )
        entries += found
    return entries
