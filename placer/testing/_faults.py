"""Fault injection and request recording for the loopback API server.

Tests of multi-cluster code need clusters that misbehave in controlled ways: a slow cluster
(:attr:`Faults.latency`) or slow requests (:meth:`Faults.delay`), a cluster that answers the
next N matching requests with an error Status (:meth:`Faults.fail`: 403, 429 with
``Retry-After``, 500, ...), drops the connection without answering (:meth:`Faults.drop`), or
holds matching requests until the test lets them through or denies them (:meth:`Faults.hold`:
a client caught between two requests, e.g. killed while its write waits).
An unreachable cluster is a stopped server (:meth:`ApiServer.stop`; :meth:`ApiServer.start`
brings it back on the same port). Denials that depend on the object written belong in
admission callbacks (:meth:`Store.add_admission`).

Every request is recorded (:class:`RequestRecord`) so tests can assert how a client talked to the
server: that it paginated, which field manager it used, how many requests a gather took.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["FaultRule", "Faults", "Gate", "RequestRecord"]


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it.

    Attributes:
        method: HTTP method.
        path: URL path (no query).
        query: query parameters (last value wins).
        verb: Kubernetes verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
            ``delete``, ``deletecollection``); ``get`` for discovery.
        resource: resource plural (``pods``), ``None`` for discovery and other non-resource paths.
        subresource: ``status`` or ``None``.
        namespace: request namespace or ``None``.
        name: object name or ``None``.
        code: HTTP status code answered (``0`` when the connection was dropped).
        user_agent: the client's ``User-Agent``.
        content_type: the request ``Content-Type`` (``""`` when absent).
    """

    method: str
    path: str
    query: Mapping[str, str]
    verb: str
    resource: str | None
    subresource: str | None
    namespace: str | None
    name: str | None
    code: int
    user_agent: str
    content_type: str


@dataclass(frozen=True)
class Target:
    """What a request addresses: verb, resource (plural and group), subresource, namespace
    and name (``resource`` ``None`` for discovery and other non-resource paths)."""

    verb: str
    resource: str | None = None
    group: str = ""
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None


class Gate:
    """Requests held by :meth:`Faults.hold`: each waits (in its own handler thread, outside
    every lock) until :meth:`release`, or ``timeout`` seconds, then goes on — or is answered
    with an error Status when released with ``deny``, so a held write never lands."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        #: set when the first request arrives.
        self.arrived = threading.Event()
        self._released = threading.Event()
        self._denial: FaultRule | None = None

    def release(self, *, deny: int | None = None, message: str | None = None) -> None:
        """Let the held requests (and later ones) through, or answer them ``deny``."""
        if deny is not None:
            self._denial = FaultRule("fail", deny, message=message, remaining=None)
        self._released.set()

    def pass_through(self) -> FaultRule | None:
        """Wait for :meth:`release` (called for each matching request); the denial, if any."""
        self.arrived.set()
        self._released.wait(self.timeout)
        return self._denial


@dataclass
class FaultRule:
    """An injected fault: which requests it hits, how many times, and what they get.

    Attributes:
        action: ``fail`` (answer an error Status), ``drop`` (close the connection without an
            answer), ``delay`` (wait ``seconds``, then answer normally) or ``hold`` (wait for
            ``gate``).
        code: HTTP code of a ``fail``.
        seconds: wait of a ``delay``.
        verb: only requests with this verb (``None``: any).
        resource: only this resource (``pods``, ``jobsets.jobset.x-k8s.io``, ``pods/status``);
            ``None``: any request, discovery included.
        namespace: only requests in this namespace.
        name: only requests for this object name.
        remaining: hits left; ``None`` until :meth:`Faults.clear`.
        reason: Status reason override of a ``fail``.
        message: Status message of a ``fail``.
        retry_after: ``Retry-After`` seconds of a ``fail``.
        gate: what a ``hold`` waits for.
        hits: requests hit so far.
    """

    action: Literal["fail", "drop", "delay", "hold"]
    code: int = 500
    seconds: float = 0.0
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    remaining: int | None = 1
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
    gate: Gate | None = None
    hits: int = field(default=0)

    def matches(self, target: Target) -> bool:
        """Whether a request for ``target`` is hit by this rule."""
        if self.verb is not None and self.verb != target.verb:
            return False
        if self.resource is not None:
            if target.resource is None:
                return False
            names = {target.resource}
            if target.group:
                names.add(f"{target.resource}.{target.group}")
            if target.subresource:
                names = {f"{n}/{target.subresource}" for n in names}
            if self.resource not in names:
                return False
        if self.namespace is not None and self.namespace != target.namespace:
            return False
        return self.name is None or self.name == target.name


class Faults:
    """The faults a server injects; thread-safe, changeable while the server runs.

    The request filters of :meth:`fail`, :meth:`drop` and :meth:`delay` are the same: ``verb``
    (``list``, ``get``, ``watch``, ``create``, ``update``, ``patch``, ``delete``, ...),
    ``resource`` (``pods``, ``jobsets.jobset.x-k8s.io``, ``pods/status``), ``namespace`` and
    ``name``; an unset filter matches anything, and a rule without any filter also hits
    discovery requests.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self.latency: float = 0.0
        """Seconds every request waits before it is handled (a slow cluster). Stopping the
        server interrupts the wait."""

    def _add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def fail(
        self,
        code: int = 500,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        reason: str | None = None,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> FaultRule:
        """Answer the next ``times`` matching requests (``None``: all) with an error Status.

        Args:
            code: HTTP code; the Status reason defaults to the real one for the code.
            times: how many requests to fail; ``None`` for every one until :meth:`clear`.
            verb: request filter (see the class docstring).
            resource: request filter.
            namespace: request filter.
            name: request filter.
            reason: Status reason override.
            message: Status message (default: a generic one naming the fault).
            retry_after: seconds for ``Retry-After`` (with 429/503); note that urllib3, under
                the official client, waits and retries such answers by itself.

        Returns:
            The rule (its ``hits`` counts the requests it failed).
        """
        return self._add(
            FaultRule(
                "fail",
                code,
                0.0,
                verb,
                resource,
                namespace,
                name,
                times,
                reason,
                message,
                retry_after,
            )
        )

    def drop(
        self,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> FaultRule:
        """Close the connection of the next ``times`` matching requests without answering."""
        return self._add(FaultRule("drop", 0, 0.0, verb, resource, namespace, name, times))

    def delay(
        self,
        seconds: float,
        *,
        times: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> FaultRule:
        """Make matching requests wait ``seconds`` before they are answered (by default every
        one until :meth:`clear`): e.g. a pod list slower than a client's timeout while
        discovery stays fast. Delays of several matching rules add up."""
        return self._add(FaultRule("delay", 0, seconds, verb, resource, namespace, name, times))

    def hold(
        self,
        *,
        times: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        timeout: float = 60.0,
    ) -> Gate:
        """Hold matching requests (by default every one until :meth:`clear`) until the gate
        returned is released (see :class:`Gate`); at most ``timeout`` seconds each."""
        gate = Gate(timeout)
        rule = FaultRule("hold", 0, 0.0, verb, resource, namespace, name, times, gate=gate)
        self._add(rule)
        return gate

    def clear(self) -> None:
        """Remove every rule and the latency (held requests go on)."""
        with self._lock:
            gates = [rule.gate for rule in self._rules if rule.gate is not None]
            self._rules.clear()
            self.latency = 0.0
        for gate in gates:
            gate.release()

    def forbidding(self, target: Target) -> FaultRule | None:
        """The standing 403 rule (``fail(403, times=None, ...)``: an identity without an RBAC
        right) that a request for ``target`` would meet, without counting a hit: what a
        SelfSubjectAccessReview answers. Counted 403s (``times=N``) are passing failures, not
        missing rights."""
        with self._lock:
            for rule in self._rules:
                if (
                    rule.action == "fail"
                    and rule.code == 403
                    and rule.remaining is None
                    and rule.matches(target)
                ):
                    return rule
        return None

    def take(self, target: Target) -> tuple[float, FaultRule | None]:
        """What hits this request: the total delay and the first ``fail``/``drop`` rule (or
        ``None``); every rule applied counts the hit. Held requests wait here (outside the
        lock) for their gates; a gate released with a denial is the hit."""
        delay = 0.0
        hit: FaultRule | None = None
        gates: list[Gate] = []
        with self._lock:
            for rule in list(self._rules):
                waits = rule.action in ("delay", "hold")
                if (not waits and hit is not None) or not rule.matches(target):
                    continue
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
                if rule.action == "delay":
                    delay += rule.seconds
                elif rule.action == "hold":
                    assert rule.gate is not None
                    gates.append(rule.gate)
                else:
                    hit = rule
        for gate in gates:
            denial = gate.pass_through()
            if denial is not None and hit is None:
                hit = denial
        return delay, hit


class RequestLog:
    """The most recent requests (bounded), and how many of each verb and resource came since
    the start (unbounded counts), thread-safe."""

    def __init__(self, size: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=size)
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, record: RequestRecord) -> None:
        key = (record.verb, record.resource or "")
        with self._lock:
            self._records.append(record)
            self._counts[key] = self._counts.get(key, 0) + 1

    def counts(self) -> dict[tuple[str, str], int]:
        """``(verb, resource)`` -> requests since the start (``""``: no resource)."""
        with self._lock:
            return dict(self._counts)

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
