"""Leader election with a ``coordination.k8s.io/v1`` Lease on the hub, with client-go's rules.

Several controller replicas may run; only the one holding the Lease acts. The rules are
client-go's ``leaderelection`` package's, so placer behaves like every other controller on the
cluster:

* a candidate reads the Lease every ``retry_period``; it may take it when it is absent, held by
  nobody, or when the candidate has *observed no change* of the Lease record for
  ``leaseDurationSeconds`` — judged by the candidate's own clock from the moment it first saw
  the current record, never by comparing ``renewTime`` with its clock, so clock skew between
  machines cannot make two leaders;
* every write is a conditional update (the Lease's ``resourceVersion``), so two candidates
  racing for an expired Lease cannot both win;
* the leader renews every ``retry_period``; if it has not renewed successfully for
  ``renew_deadline`` (shorter than the lease duration) it steps down *before* anyone else can
  take over;
* on graceful shutdown the leader releases the Lease (empty holder, 1 s duration), so a standby
  takes over at once instead of after the lease duration.

:func:`next_lease` is the pure decision; :class:`LeaderElector` does the I/O.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from placer.controller.settings import LeaseSettings
from placer.errors import ConflictError, KubeError, NotFoundError
from placer.kube import KubeClient
from placer.objects import version_of
from placer.timestamps import rfc3339

__all__ = ["LeaderElector", "LeaseView", "next_lease"]

log = logging.getLogger(__name__)

API_VERSION = "coordination.k8s.io/v1"
KIND = "Lease"


@dataclass(frozen=True)
class LeaseView:
    """What a candidate remembers about the Lease between attempts."""

    #: the Lease's spec as last read (``None`` when there was none).
    spec: Mapping[str, Any] | None
    #: the candidate's clock when that spec was first seen.
    observed_at: float


def next_lease(
    current: Mapping[str, Any] | None,
    previous: LeaseView | None,
    *,
    identity: str,
    duration: float,
    now: float,
    wall: float,
) -> tuple[dict[str, Any] | None, LeaseView]:
    """The spec to write to hold the Lease, or ``None`` when another holder's Lease is valid.

    Args:
        current: the Lease's ``spec`` as just read (``None`` when the Lease does not exist).
        previous: what was observed before (for the observed-time rule).
        identity: this candidate.
        duration: lease duration in seconds.
        now: the candidate's monotonic clock.
        wall: Unix time for the timestamps written.

    Returns:
        ``(spec or None, view)``: the spec to write (create or conditional update) and the
        updated observation.
    """
    spec = dict(current) if current is not None else None
    if previous is not None and previous.spec == spec:
        view = previous
    else:
        view = LeaseView(spec, now)
    holder = str((spec or {}).get("holderIdentity") or "")
    held_seconds = float((spec or {}).get("leaseDurationSeconds") or duration)
    if spec is not None and holder and holder != identity:
        if now - view.observed_at < held_seconds:
            return None, view
    transitions = int((spec or {}).get("leaseTransitions") or 0)
    stamp = rfc3339(wall, digits=6)
    new: dict[str, Any] = {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, math.ceil(duration)),
        "renewTime": stamp,
    }
    if holder == identity and spec is not None:
        new["acquireTime"] = spec.get("acquireTime") or stamp
        new["leaseTransitions"] = transitions
    else:
        new["acquireTime"] = stamp
        new["leaseTransitions"] = transitions + 1 if spec is not None else 0
    return new, view


class LeaderElector:
    """Acquires and renews the Lease in a thread; tells the controller when it leads.

    Args:
        client: a client for the hub.
        settings: Lease name, namespace and timings.
        identity: this replica's name in the Lease.
        on_started: called (in the elector's thread) when this replica becomes the leader.
        on_stopped: called when it stops leading (lost the Lease or shut down).
        clock: monotonic clock (tests may pass their own).
    """

    def __init__(
        self,
        client: KubeClient,
        settings: LeaseSettings,
        identity: str,
        *,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.identity = identity
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._clock = clock
        self._view: LeaseView | None = None
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._last_renew = 0.0
        self._resource_version = ""
        self._thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    def holder(self) -> str:
        """The current holder as last observed (empty when unknown)."""
        spec = self._view.spec if self._view else None
        return str((spec or {}).get("holderIdentity") or "")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning; a leader releases the Lease (when ``release``) and steps down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.renew_deadline + 5)
        if self.leading:
            if release:
                self._release()
            self._step_down()

    def wait_leading(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    # ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            try:
                held = self._try()
            except KubeError as err:
                log.warning(
                    "lease %s/%s: %s",
                    self.settings.namespace,
                    self.settings.name,
                    err,
                    extra={"event": "lease-error"},
                )
                held = False
            now = self._clock()
            if held:
                self._last_renew = now
                if not self.leading:
                    self._leading.set()
                    log.info(
                        "became the leader",
                        extra={"event": "leader-started", "identity": self.identity},
                    )
                    self._on_started()
            elif self.leading and now - self._last_renew >= self.settings.renew_deadline:
                log.warning(
                    "could not renew the lease for %.1fs: stepping down",
                    now - self._last_renew,
                    extra={"event": "leader-lost", "identity": self.identity},
                )
                self._step_down()
            wait = self.settings.retry_period - (self._clock() - started)
            self._stop.wait(max(0.05, wait))

    def _step_down(self) -> None:
        if self._leading.is_set():
            self._leading.clear()
            self._on_stopped()

    def _try(self) -> bool:
        """One attempt to acquire or renew; ``True`` when this replica holds the Lease now."""
        namespace, name = self.settings.namespace, self.settings.name
        try:
            lease = self.client.get(API_VERSION, KIND, name, namespace=namespace)
        except NotFoundError:
            lease = None
        spec = (lease or {}).get("spec") if lease else None
        desired, self._view = next_lease(
            spec,
            self._view,
            identity=self.identity,
            duration=self.settings.duration,
            now=self._clock(),
            wall=time.time(),
        )
        if desired is None:
            return False
        body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace},
            "spec": desired,
        }
        try:
            if lease is None:
                written = self.client.create(body, namespace=namespace)
            else:
                body["metadata"]["resourceVersion"] = version_of(lease)
                written = self.client.replace(body, namespace=namespace)
        except ConflictError:
            return False  # someone else wrote first: read again next time
        self._view = LeaseView(dict(written.get("spec") or {}), self._clock())
        return True

    def _release(self) -> None:
        namespace, name = self.settings.namespace, self.settings.name
        try:
            lease = self.client.get(API_VERSION, KIND, name, namespace=namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(
                holderIdentity="", leaseDurationSeconds=1, renewTime=rfc3339(time.time(), digits=6)
            )
            lease["spec"] = spec
            self.client.replace(lease, namespace=namespace)
            log.info("released the lease", extra={"event": "leader-released"})
        except KubeError as err:
            log.warning("could not release the lease: %s", err, extra={"event": "lease-error"})
