"""Gathering the fleet: every member cluster at once, each within its own timeout.

One thread per cluster (the clients are synchronous and independent; the work is waiting on
sockets and parsing JSON). Per cluster: list the nodes, reading each page into
:class:`placer.model.Node` values at once (a real Node object, with its image list, is many times
what placer keeps), then the non-terminal pods page by page (``limit``/``continue``, field
selector ``status.phase!=Succeeded,status.phase!=Failed``), feeding each page to a
:class:`placer.fleet.capacity.PodTally` and dropping it — a 5,000-pod cluster never sits in
memory as objects. Then the Dynamic Resource Allocation objects (``resource.k8s.io/v1``
ResourceSlices, and ResourceClaims when there are slices; nothing when the API is not served).
The pure :func:`placer.fleet.capacity.cluster_from_api` then builds the
:class:`placer.model.Cluster`.

Timeouts are per cluster and hold twice: every request's timeout is cut to the time left before
the cluster's deadline, and the coordinator stops waiting at the deadline (plus a short grace)
whatever the thread is doing. A cluster that fails — unreachable, TLS, 401, 403, timeout, a bad
fleet-file entry — comes back as ``Cluster(reachable=False, reason=...)`` and the others are
gathered regardless; the reason says what to do when the error does (a 401: refresh the
credentials; a 403: the RBAC permission missing). Reasons never hold credentials (see
:mod:`placer.kube.translate`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager
from typing import Any

from placer.accelerators import AcceleratorTable, default_accelerators
from placer.errors import KubeError, NotFoundError, PlacerError
from placer.fleet.capacity import NON_TERMINAL_PODS, PodTally, cluster_from_api, node_from_api
from placer.fleet.config import ClusterSource, FleetConfig
from placer.fleet.devices import DRA_API_VERSION, node_device_groups
from placer.kube import ClientSettings, KubeClient, open_client
from placer.model import Cluster, DeviceGroup, Fleet, Node
from placer.timestamps import rfc3339

__all__ = [
    "GRACE",
    "PAGES_AT_ONCE",
    "failure_reason",
    "gather_cluster",
    "gather_fleet",
    "unavailable",
]

log = logging.getLogger(__name__)

#: seconds the coordinator waits past a cluster's deadline for its thread to report.
GRACE = 0.5
#: list pages decoded and counted at the same time, fleet-wide. Decoding is bound by the GIL,
#: so more is not faster (one is slower); the bound keeps the pages alive at once independent
#: of the cluster count, and so the memory (simulations/README.md, "Behind the code's
#: constants").
PAGES_AT_ONCE = 4


def unavailable(source: ClusterSource, reason: str) -> Cluster:
    """The cluster as it is reported when it could not be gathered."""
    return Cluster(
        name=source.name,
        labels=dict(source.labels),
        taints=source.taints,
        reachable=False,
        reason=reason,
    )


def gather_cluster(
    source: ClusterSource,
    *,
    deadline: float | None = None,
    settings: ClientSettings | None = None,
    page_gate: AbstractContextManager[Any] | None = None,
    accelerators: AcceleratorTable | None = None,
) -> Cluster:
    """Gather one cluster; never raises for cluster trouble (returns it unavailable).

    Args:
        source: the member cluster.
        accelerators: how GPU fractions and DRA devices are counted (default: placer's).
        deadline: ``time.monotonic()`` by which gathering must be done (default: now +
            ``source.timeout``).
        settings: client settings (default: request timeout = the cluster's timeout).
        page_gate: held while a list page is decoded and counted (see
            :attr:`placer.kube.KubeClient.page_gate`).
    """
    if deadline is None:
        deadline = time.monotonic() + source.timeout
    table = accelerators or default_accelerators()
    if source.problem or source.kubeconfig is None:
        return unavailable(source, source.problem or "no kubeconfig")
    settings = settings or ClientSettings(
        request_timeout=source.timeout, connect_timeout=min(10.0, source.timeout)
    )
    try:
        client = open_client(
            source.kubeconfig,
            source.context,
            name=source.name,
            settings=settings,
            page_gate=page_gate,
        )
        with client:
            nodes: list[Node] = []
            for page in client.iter_pages("v1", "Node", deadline=deadline):
                nodes.extend(node_from_api(obj) for obj in page.get("items") or ())
                del page  # NB: before the next page is fetched (see KubeClient.iter_pages)
            tally = _tally_pods(client, deadline, table)
            devices = _devices(client, deadline, table)
    except KubeError as err:
        return unavailable(source, failure_reason(err))
    except PlacerError as err:  # the kubeconfig entry could not be turned into a client
        return unavailable(source, err.message)
    return cluster_from_api(
        source.name, nodes, tally, labels=source.labels, taints=source.taints, devices=devices
    )


def _devices(
    client: KubeClient, deadline: float, table: AcceleratorTable
) -> dict[str, tuple[DeviceGroup, ...]]:
    """DRA devices per node: ResourceSlices and the ResourceClaims holding them (none when the
    cluster does not serve ``resource.k8s.io/v1``)."""
    try:
        slices = [
            item
            for page in client.iter_pages(DRA_API_VERSION, "ResourceSlice", deadline=deadline)
            for item in page.get("items") or ()
        ]
        if not slices:
            return {}
        claims = [
            item
            for page in client.iter_pages(DRA_API_VERSION, "ResourceClaim", deadline=deadline)
            for item in page.get("items") or ()
        ]
    except NotFoundError:
        return {}
    return node_device_groups(slices, claims, table)


def _tally_pods(client: KubeClient, deadline: float, table: AcceleratorTable) -> PodTally:
    """Tally every non-terminal pod; start over once if the continue token expires (410)."""
    for attempt in (1, 2):
        tally = PodTally(table)
        try:
            pages = client.iter_pages(
                "v1", "Pod", field_selector=NON_TERMINAL_PODS, deadline=deadline
            )
            for page in pages:
                tally.add_all(page.get("items") or ())
                del page
            return tally
        except KubeError as err:
            if err.code != 410 or attempt == 2:
                raise
            log.info("pod list expired mid-way; listing again")
    raise AssertionError("unreachable")  # pragma: no cover


def gather_fleet(
    config: FleetConfig,
    *,
    settings: Callable[[ClusterSource], ClientSettings] | None = None,
    max_workers: int | None = None,
    before: Callable[[ClusterSource], None] | None = None,
) -> Fleet:
    """Gather every member cluster concurrently (see module docstring).

    Args:
        config: the member clusters.
        settings: client settings per cluster (default: from each cluster's timeout).
        max_workers: threads (default: one per cluster, at most 64).
        before: called in each cluster's thread before that cluster is gathered, within its
            deadline — for what must be read before its pods (the in-flight ledger: an entry
            retired because its pods were seen bound must find them in the gathered
            capacity). A :class:`KubeError` it raises reports the cluster unavailable with
            that reason, without gathering it.

    Returns:
        The fleet, clusters in configuration order, ``captured_at`` = start time (UTC).
    """
    captured_at = rfc3339()
    sources: Sequence[ClusterSource] = config.clusters
    if not sources:
        return Fleet(
            (),
            captured_at,
            accelerators=dict(config.accelerators_data),
            topologies=config.topologies_data,
        )
    start = time.monotonic()
    gate = threading.BoundedSemaphore(PAGES_AT_ONCE)
    pool = ThreadPoolExecutor(
        max_workers=max_workers or min(64, len(sources)), thread_name_prefix="gather"
    )
    futures: list[Future[Cluster]] = []
    for source in sources:
        futures.append(
            pool.submit(
                _prepare_and_gather,
                source,
                before,
                deadline=start + source.timeout,
                settings=settings(source) if settings else None,
                page_gate=gate,
                accelerators=config.accelerators,
            )
        )
    clusters: list[Cluster] = []
    try:
        for source, future in zip(sources, futures, strict=True):
            left = start + source.timeout + GRACE - time.monotonic()
            try:
                clusters.append(future.result(timeout=max(left, 0.0)))
            except FutureTimeout:
                clusters.append(unavailable(source, f"timed out after {source.timeout:g}s"))
    finally:
        # NB: a thread past its deadline ends by itself: its socket timeouts are cut to it
        pool.shutdown(wait=False, cancel_futures=True)
    return Fleet(
        tuple(clusters),
        captured_at,
        accelerators=dict(config.accelerators_data),
        topologies=config.topologies_data,
    )


def _prepare_and_gather(
    source: ClusterSource,
    before: Callable[[ClusterSource], None] | None,
    *,
    deadline: float,
    settings: ClientSettings | None,
    page_gate: AbstractContextManager[Any],
    accelerators: AcceleratorTable,
) -> Cluster:
    if before is not None and not source.problem and source.kubeconfig is not None:
        try:
            before(source)
        except KubeError as err:
            return unavailable(source, failure_reason(err))
    return gather_cluster(
        source,
        deadline=deadline,
        settings=settings,
        page_gate=page_gate,
        accelerators=accelerators,
    )


def failure_reason(err: KubeError) -> str:
    """Why a cluster could not be listed, in one line: the error's message without the
    ``cluster NAME:`` prefix (where it is shown names the cluster), and what to do about it
    (refresh the credentials, grant the RBAC permission...) when the error says."""
    prefix = f"cluster {err.cluster}: "
    text = err.message
    text = text[len(prefix) :] if err.cluster and text.startswith(prefix) else text
    return f"{text} ({err.hint})" if err.hint else text
