"""Fleet-wide claims of workload identity: of concurrent deciders, exactly one dispatches.

The problem
-----------
Two deciders — two ``placer submit`` processes given the same manifests (a retried CI job), or a
submit and the controller — each check for copies of the workloads on the members, decide and
apply. The copy check cannot see a copy the other has decided but not yet applied, and the
in-flight ledger's read-back compares *capacity* on one cluster, not *identity* across the
fleet: when the two choose different clusters for a workload, both apply it and it runs twice.
What is needed is a lock per workload identity that every decider takes before it writes
anything for the workload, held until its copy is visible.

The claim
---------
A claim is one data key of a ConfigMap in ``placer-system`` on a member: key
:func:`claim_key` (a hash of the identity: API group, kind, namespace, name — the version
does not matter, it is the same object), value JSON with the identity, the decision id, the
holder (which process), a random token, and when it was acquired and last renewed plus its
lifetime. The keys are spread over :data:`SHARDS` ConfigMaps (``placer-claims-0`` ...,
label ``placer.dev/claims=true``) by hash, so that one dispatch of many workloads takes a
handful of requests per member, not one per workload.

Every change is a **compare-and-swap** of a whole shard: read it, change the keys, write it
back with ``replace`` conditional on the ``resourceVersion`` read (``create`` when it does not
exist yet); a ``409 Conflict``/``AlreadyExists`` means another decider wrote the shard
meanwhile, and the step is done again on a fresh read. The member's API server (etcd) orders
these writes, so at any moment a key holds at most one claim, and a decider that put its claim
there knows no other live claim was there.

The protocol (:class:`Claims`, used by :class:`placer.dispatch.Dispatcher`)
----------------------------------------------------------------------------
1. **Acquire** after deciding, before anything is written for the workload (ledger entry,
   namespace, object): put the claim in on *every* member the decider reaches, in one fixed
   order — first the first member (cluster names sorted) that answers, alone; then all the
   others at once. Where the key holds a live claim of another decider the workload is
   **lost**: its claims are released wherever they were put, and the decider reports it
   ``in-flight`` (or waits for the other to finish, then looks again: ``placer submit`` does).
   A workload is **won** when its claim is in on every member that answered.
2. **Check while holding**: list the workload's copies on every member (one list per kind and
   namespace per member). A copy with placer's record is the result of a decider that held the
   claim before and finished: ``unchanged``, nothing is sent.
3. **Dispatch** (ledger entry, apply) while the claim is renewed (every :data:`CLAIM_TTL`/3
   seconds); an apply is only *started* while the claim has at least half its lifetime left
   (a fence: a holder that was stalled for longer re-reads its claim first and steps back if it
   was taken over).
4. **Release** after the apply is acknowledged (or rolled back): from then on the **placement
   record on the object** is the lasting claim, and step 2 of any later decider sees it.

Why exactly one of two concurrent deciders dispatches a workload:

* *At most one.* A winner holds its claim on every member it reached, at the time it applies.
  Two winners would both hold their claim on a member both reached — impossible at one key —
  unless one released before the other acquired; but release comes after the apply, and the
  later decider checks for copies (step 2) after acquiring, so it sees the copy and sends
  nothing. Hence two copies need two deciders that reached *no member in common* (below).
* *At least one* (two deciders never each win part and both step back). Two deciders that
  reach the same first member both go there first and alone: one of them puts its claim in,
  the other finds it, steps back, and has written nothing anywhere else — so the first goes
  on to the other members unopposed (ordered lock acquisition: a common first lock is enough
  to order them). Deciders whose first answering members differ (one of them cannot reach the
  other's first), a stale claim of a dead decider, or a third decider can make both step
  back; the controller retries after its backoff, a submit waits and looks again. Taking every
  member one after the other would also order deciders with different first members, at one
  round trip per member instead of two in all.

Expiry and takeover
-------------------
A claim lives :data:`CLAIM_TTL` seconds (30) after its last renewal. A live holder renews every
10 s; a holder that died (killed, laptop closed) stops renewing, and the next decider to find
the claim expired **takes it over** in its compare-and-swap (logged) — then checks for copies
(step 2), so a copy the dead holder applied is kept, not doubled. This relies on clocks agreeing
to within a few seconds (the expiry is an absolute time written by the holder), as Kubernetes
leader election does, and on a member processing an apply within 15 s of the request (the
fence): an apply the server executes later than that, sent by a holder that then died, can race
a takeover.

Members that do not answer
--------------------------
The rule: a decider claims on every member it reaches; a member that does not answer, or
refuses the claim (403: an older member RBAC without ``update`` on ConfigMaps in
``placer-system``), is skipped with a warning, and the workload is won on the others (the
first member that answers is the one taken alone). The
guarantee above holds between deciders that reach at least one member in common. Two deciders
on the two sides of a partition (each reaching only members the other cannot) can both
dispatch: requiring a majority of the members instead would stop all placement while half the
fleet is unreachable, which is worse for a placement engine whose members fail independently;
a copy placed during a partition is found by the copy check once the members are reachable
again (``unchanged`` for the first found, a note names the duplicate). The order is the sorted
cluster names of each decider's fleet: deciders whose fleet files name the members differently
stay safe (the argument for "at most one" does not use the order) but may both step back.
Claims live on the members, not on a hub, because the members are what every decider shares:
``placer submit`` has no hub.

Cost: per member and per shard holding the workloads, two requests to acquire (read, write)
and usually one to release (the write goes on the shard as this decider last wrote it; only a
conflict makes it read again): a dispatch of 500 workloads to 8 members makes about 96
requests, shards at once, two round trips in a row to acquire and one to release; renewing
only in dispatches longer than 10 s. ``simulations/bench_submit.py`` measures it side by side
with the code before (``--baseline``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from placer.dispatch.storage import NAMESPACE, create_configmap
from placer.errors import ConflictError, KubeError, NotFoundError
from placer.model import WorkloadRef
from placer.objects import version_of
from placer.timestamps import parse_rfc3339, rfc3339

if TYPE_CHECKING:  # the client (and urllib3) are imported only where requests are sent
    from placer.kube import KubeClient

__all__ = [
    "CLAIM_TTL",
    "LABEL_CLAIMS",
    "SHARDS",
    "Acquired",
    "Claim",
    "Claims",
    "Succession",
    "claim_key",
    "claims_from_configmaps",
    "default_holder",
    "identity",
    "live_claims",
    "read_claims",
    "shard_of",
]

log = logging.getLogger(__name__)

LABEL_CLAIMS = "placer.dev/claims"
#: ConfigMaps the claims of a member are spread over (by hash of the claim key).
SHARDS = 4
#: seconds a claim holds after its last renewal.
CLAIM_TTL = 30.0
#: compare-and-swap attempts on one shard before the member counts as not answering.
CAS_ATTEMPTS = 12


def identity(ref: WorkloadRef) -> str:
    """The identity a claim is on: ``group/Kind/namespace/name`` (any version)."""
    group = ref.api_version.rsplit("/", 1)[0] if "/" in ref.api_version else ""
    return f"{group}/{ref.kind}/{ref.namespace}/{ref.name}"


def claim_key(ref: WorkloadRef) -> str:
    """The data key of ``ref``'s claim (a valid ConfigMap key)."""
    return "claim-" + hashlib.sha256(identity(ref).encode()).hexdigest()[:32]


def shard_of(key: str, shards: int = SHARDS) -> int:
    """The shard (of ``shards``) holding claim ``key``."""
    return int(key[-8:], 16) % shards


def shard_name(shard: int) -> str:
    return f"placer-claims-{shard}"


def default_holder() -> str:
    """Who holds a claim, for people reading it: ``placer on HOST pid PID``."""
    return f"placer on {socket.gethostname()} pid {os.getpid()}"


@dataclass(frozen=True)
class Claim:
    """One claim as stored (see the module docstring)."""

    workload: str
    decision: str
    holder: str
    token: str
    acquired: float
    renewed: float
    ttl: float
    #: the leader-election Lease its holder was elected through (``""``: none).
    lease: str = ""

    @property
    def expires(self) -> float:
        return self.renewed + self.ttl

    def live(self, now: float) -> bool:
        return now < self.expires

    def describe(self) -> str:
        return f"decision {self.decision} of {self.holder}"

    def encode(self) -> str:
        data: dict[str, Any] = {
            "workload": self.workload,
            "decision": self.decision,
            "holder": self.holder,
            "token": self.token,
            "acquired": rfc3339(self.acquired, digits=6),
            "renewed": rfc3339(self.renewed, digits=6),
            "ttlSeconds": self.ttl,
        }
        if self.lease:
            data["lease"] = self.lease
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, text: object) -> Claim | None:
        """The claim of :meth:`encode`'s text, or ``None`` when it is unreadable."""
        try:
            data = json.loads(str(text))
            acquired = parse_rfc3339(data["acquired"])
            renewed = parse_rfc3339(data["renewed"])
            if acquired is None or renewed is None:
                return None
            return cls(
                str(data["workload"]),
                str(data["decision"]),
                str(data["holder"]),
                str(data["token"]),
                acquired,
                renewed,
                float(data["ttlSeconds"]),
                str(data.get("lease") or ""),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Succession:
    """A decider elected through a leader-election Lease (the controller): ``lease`` names the
    Lease, ``holder`` this process (unique per process start).

    Leader election lets one holder act at a time — a leader that cannot renew steps down
    before a successor may take over — so a claim taken under the same Lease by another
    process is a predecessor's: it died or stepped down, and its claims protect nothing. The
    successor takes them over at once and retires the in-flight entries written under them
    whose workload never appeared, instead of waiting out their lifetime.
    """

    lease: str
    holder: str

    def succeeds(self, claim: Claim) -> bool:
        """Whether ``claim`` was taken by a predecessor of this process."""
        return bool(self.lease) and claim.lease == self.lease and claim.holder != self.holder


def read_claims(client: KubeClient) -> dict[str, Claim]:
    """Every readable claim stored on ``client``'s cluster, by key (one list call).

    Raises:
        KubeError: the cluster refused or did not answer.
    """
    listed = client.list(
        "v1", "ConfigMap", namespace=NAMESPACE, label_selector=f"{LABEL_CLAIMS}=true"
    )
    return claims_from_configmaps(listed.items)


def claims_from_configmaps(items: Iterable[Mapping[str, Any]]) -> dict[str, Claim]:
    """Every readable claim of the claim ConfigMaps ``items``, by key."""
    claims: dict[str, Claim] = {}
    for item in items:
        for key, text in (item.get("data") or {}).items():
            claim = Claim.decode(text)
            if claim is not None:
                claims[str(key)] = claim
    return claims


def live_claims(client: KubeClient, *, now: float | None = None) -> dict[str, Claim]:
    """The claims of ``client``'s cluster that have not expired, by key (one list call)."""
    when = time.time() if now is None else now
    return {k: c for k, c in read_claims(client).items() if c.live(when)}


@dataclass(frozen=True)
class Acquired:
    """What :meth:`Claims.acquire` got."""

    #: claimed on every member that answered.
    won: tuple[WorkloadRef, ...] = ()
    #: held by another decider (its live claim, as found).
    lost: Mapping[WorkloadRef, Claim] = field(default_factory=dict)
    #: member -> why it was skipped (did not answer, refused).
    skipped: Mapping[str, str] = field(default_factory=dict)


#: a mutation's result: the shard's new data (``None``: leave it), the refs it did, and the
#: refs it found held by another decider (with that decider's claim).
_Change = tuple[dict[str, str] | None, list[WorkloadRef], dict[WorkloadRef, Claim]]
#: ``mutate(data, now)``: the change to one shard's data (pure; run again on a conflict).
_Mutation = Callable[[dict[str, str], float], _Change]


def _removed(ref: WorkloadRef) -> Claim:
    """Stand-in for a claim of this decider that vanished (taken over, then released)."""
    return Claim(identity(ref), "", "another decider (the claim was removed)", "", 0.0, 0.0, 0.0)


class Claims:
    """The claims of one dispatch: acquire, renew, fence, release (see the module docstring).

    Thread-safe. Args: ``clients`` (the members the decider reaches), ``decision`` (its id),
    ``holder`` (who, for people reading a claim), ``ttl``, ``shards``, ``field_manager``,
    ``clock`` (epoch seconds).
    """

    def __init__(
        self,
        clients: Mapping[str, KubeClient],
        *,
        decision: str,
        holder: str | None = None,
        ttl: float = CLAIM_TTL,
        shards: int = SHARDS,
        field_manager: str = "placer",
        clock: Callable[[], float] = time.time,
        succession: Succession | None = None,
    ) -> None:
        self.clients = dict(clients)
        self.order = sorted(self.clients)
        self.decision = decision
        self.succession = succession
        self.holder = succession.holder if succession else holder or default_holder()
        self.ttl = ttl
        self.shards = shards
        self.field_manager = field_manager
        self.clock = clock
        self.token = secrets.token_hex(8)
        self._lock = threading.Lock()
        #: ref -> member -> renewal time written there (epoch seconds).
        self._held: dict[WorkloadRef, dict[str, float]] = {}
        #: ref -> members where a write failed without an answer (released there too).
        self._maybe: dict[WorkloadRef, set[str]] = {}
        #: refs another decider took over while this one held them.
        self._taken: dict[WorkloadRef, Claim] = {}
        #: member -> why it was skipped (cumulative).
        self.skipped: dict[str, str] = {}
        #: (member, shard) -> the shard as this decider last wrote it (renewing and releasing
        #: write on it directly; a conflict means a fresh read).
        self._written: dict[tuple[str, int], Mapping[str, Any]] = {}

    # ----------------------------------------------------------------------------------------
    # what this decider holds

    def held(self) -> list[WorkloadRef]:
        with self._lock:
            return list(self._held)

    def members_of(self, ref: WorkloadRef) -> set[str]:
        """The members where ``ref`` is claimed by this decider."""
        with self._lock:
            return set(self._held.get(ref, {}))

    def taken(self, ref: WorkloadRef) -> Claim | None:
        """The claim of the decider that took ``ref`` over, if one did."""
        with self._lock:
            return self._taken.get(ref)

    def holds(self, ref: WorkloadRef) -> bool:
        """The fence before an apply: ``ref`` is claimed by this decider with at least half
        of the lifetime left (renewed first when less is left)."""
        if self._valid_for(ref) >= self.ttl / 2:
            return True
        self.renew()
        return self._valid_for(ref) >= self.ttl / 2

    def _valid_for(self, ref: WorkloadRef) -> float:
        with self._lock:
            if ref in self._taken or ref not in self._held:
                return -1.0
            written = self._held[ref].values()
            return min(written, default=float("inf")) + self.ttl - self.clock()

    # ----------------------------------------------------------------------------------------
    # acquire, renew, release

    def acquire(self, refs: Iterable[WorkloadRef]) -> Acquired:
        """Claim ``refs`` on every member (module docstring, step 1): the first member in name
        order that answers alone, then all the others at once.

        A ref lost on some member is released where it was claimed; the result says who holds
        it. Never raises for cluster trouble: members that fail are ``skipped``.
        """
        todo = list(dict.fromkeys(refs))
        lost: dict[WorkloadRef, Claim] = {}
        skipped: dict[str, str] = {}
        with self._lock:
            for ref in todo:
                self._held.setdefault(ref, {})
                self._taken.pop(ref, None)

        def step(member: str, refs: Sequence[WorkloadRef]) -> None:
            now = self.clock()
            results = self._each_shard(member, refs, partial(self._take, now=now))
            with self._lock:
                for ref in results.done:
                    self._held[ref][member] = now
                for ref in results.failed:
                    self._maybe.setdefault(ref, set()).add(member)
                if results.problems:
                    skipped[member] = results.problems[0]
                lost.update(results.found)

        members = list(self.order)
        while members and todo:  # the arbiter: the first member that answers
            member = members.pop(0)
            step(member, todo)
            todo = [ref for ref in todo if ref not in lost]
            if member not in skipped:
                break
        if todo:
            self._on_members(members, partial(step, refs=todo))
            todo = [ref for ref in todo if ref not in lost]
        if lost:
            self.release(lost)
        with self._lock:
            self.skipped.update(skipped)
        return Acquired(tuple(todo), lost, skipped)

    def renew(self) -> None:
        """Renew every claim held. A claim another decider took over is marked ``taken``; a
        member that does not answer is left (like a member skipped when acquiring)."""
        by_member: dict[str, list[WorkloadRef]] = {}
        with self._lock:
            for ref, members in self._held.items():
                for member in members:
                    by_member.setdefault(member, []).append(ref)

        def one(member: str) -> None:
            now = self.clock()
            results = self._each_shard(
                member, by_member[member], partial(self._refresh, now=now), reuse=True
            )
            with self._lock:
                for ref in results.done:
                    if member in self._held.get(ref, {}):
                        self._held[ref][member] = now
                for ref, claim in results.found.items():
                    self._taken[ref] = claim
                for ref in results.failed:
                    self._held.get(ref, {}).pop(member, None)
                    self._maybe.setdefault(ref, set()).add(member)
            if results.problems:
                log.warning("cluster %s: claims not renewed: %s", member, results.problems[0])

        self._on_members(sorted(by_member), one)

    def release(self, refs: Iterable[WorkloadRef] | None = None) -> None:
        """Give up the claims of ``refs`` (default: all held), on every member at once.

        Never raises: a claim that cannot be released expires after its lifetime.
        """
        with self._lock:
            chosen = list(self._held) if refs is None else [r for r in refs if r in self._held]
            by_member: dict[str, list[WorkloadRef]] = {}
            for ref in chosen:
                for member in set(self._held.pop(ref)) | self._maybe.pop(ref, set()):
                    by_member.setdefault(member, []).append(ref)
                self._taken.pop(ref, None)

        def one(member: str) -> None:
            results = self._each_shard(member, by_member[member], self._drop, reuse=True)
            if results.problems:
                log.info(
                    "cluster %s: claims not released (they expire): %s", member, results.problems[0]
                )

        self._on_members(sorted(by_member), one)

    @contextmanager
    def renewing(self, interval: float | None = None) -> Iterator[Claims]:
        """Renew the held claims every ``interval`` (default ttl/3) seconds in a thread while
        the block runs; release every claim still held at its end."""
        stop = threading.Event()
        every = self.ttl / 3 if interval is None else interval

        def loop() -> None:
            while not stop.wait(every):
                try:
                    self.renew()
                except Exception:  # never let the renewer die silently mid-dispatch
                    log.exception("renewing workload claims failed")

        thread = threading.Thread(target=loop, name="placer-claims", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            self.release()

    # ----------------------------------------------------------------------------------------
    # the mutations of one shard's data (pure): new data (``None``: unchanged), refs done,
    # refs found held by another decider

    def _mine(self, ref: WorkloadRef, renewed: float, acquired: float | None = None) -> str:
        acquired = renewed if acquired is None else acquired
        lease = self.succession.lease if self.succession else ""
        claim = Claim(
            identity(ref),
            self.decision,
            self.holder,
            self.token,
            acquired,
            renewed,
            self.ttl,
            lease,
        )
        return claim.encode()

    def _take(self, keyed: Mapping[str, WorkloadRef], now: float) -> _Mutation:
        def mutate(data: dict[str, str], clock: float) -> _Change:
            done: list[WorkloadRef] = []
            found: dict[WorkloadRef, Claim] = {}
            for key, ref in keyed.items():
                current = Claim.decode(data[key]) if key in data else None
                if (
                    current is not None
                    and current.token != self.token
                    and current.live(clock)
                    and not (self.succession and self.succession.succeeds(current))
                ):
                    found[ref] = current
                    continue
                if key in data and (current is None or current.token != self.token):
                    log.info(
                        "%s: taking over the claim of %s",
                        identity(ref),
                        current.describe() if current else "an unreadable claim",
                        extra={"event": "claim-takeover", "workload": identity(ref)},
                    )
                data[key] = self._mine(ref, now)
                done.append(ref)
            return (data if done else None), done, found

        return mutate

    def _refresh(self, keyed: Mapping[str, WorkloadRef], now: float) -> _Mutation:
        def mutate(data: dict[str, str], clock: float) -> _Change:
            done: list[WorkloadRef] = []
            found: dict[WorkloadRef, Claim] = {}
            for key, ref in keyed.items():
                current = Claim.decode(data.get(key))
                if current is not None and current.token == self.token:
                    data[key] = self._mine(ref, now, current.acquired)
                    done.append(ref)
                else:  # taken over (and maybe released again by the taker): never put back
                    found[ref] = current or _removed(ref)
            return (data if done else None), done, found

        return mutate

    def _drop(self, keyed: Mapping[str, WorkloadRef]) -> _Mutation:
        def mutate(data: dict[str, str], clock: float) -> _Change:
            done: list[WorkloadRef] = []
            for key, ref in keyed.items():
                current = Claim.decode(data.get(key))
                if current is not None and current.token == self.token:
                    del data[key]
                    done.append(ref)
            return (data if done else None), done, {}

        return mutate

    # ----------------------------------------------------------------------------------------
    # compare-and-swap on the member

    def _each_shard(
        self,
        member: str,
        refs: Sequence[WorkloadRef],
        build: Callable[[Mapping[str, WorkloadRef]], _Mutation],
        *,
        reuse: bool = False,
    ) -> _ShardResults:
        """Run the mutation ``build(keyed)`` on every shard of ``member`` holding ``refs``
        (concurrently), and gather what they did and found (``reuse``: see :meth:`_cas`)."""
        client = self.clients[member]
        by_shard: dict[int, dict[str, WorkloadRef]] = {}
        for ref in refs:
            key = claim_key(ref)
            by_shard.setdefault(shard_of(key, self.shards), {})[key] = ref
        results = _ShardResults()

        def one(shard: int) -> None:
            keyed = by_shard[shard]
            try:
                done, found = self._cas(client, member, shard, build(keyed), reuse=reuse)
            except KubeError as err:
                text = err.message
                prefix = f"cluster {member}: "
                with self._lock:
                    results.failed.extend(keyed.values())
                    results.problems.append(text.removeprefix(prefix))
                return
            with self._lock:
                results.done.extend(done)
                results.found.update(found)

        self._on_members(sorted(by_shard), one)
        return results

    def _cas(
        self,
        client: KubeClient,
        member: str,
        shard: int,
        mutate: _Mutation,
        *,
        reuse: bool = False,
    ) -> tuple[list[WorkloadRef], dict[WorkloadRef, Claim]]:
        """Compare-and-swap one shard: read, mutate, write conditionally; again on a conflict.

        ``reuse`` (renewing, releasing: changes to this decider's own claims): first try the
        shard as this decider last wrote it, without reading it; only a write that succeeds
        counts — a conflict, or no change to make, means a fresh read.

        Raises:
            KubeError: the member refused or did not answer, or the shard changed under every
                attempt.
        """
        name = shard_name(shard)
        cached = self._written.pop((member, shard), None) if reuse else None
        for attempt in range(CAS_ATTEMPTS):
            current = cached
            if current is None:
                try:
                    current = client.get("v1", "ConfigMap", name, namespace=NAMESPACE)
                except NotFoundError:
                    current = None
            data = {str(k): str(v) for k, v in ((current or {}).get("data") or {}).items()}
            new, done, found = mutate(data, self.clock())
            if new is None:
                if cached is not None:  # judged on what this decider wrote: look again
                    cached = None
                    continue
                return done, found
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": {LABEL_CLAIMS: "true"},
                },
                "data": new,
            }
            try:
                if current is None:
                    written = create_configmap(client, body, self.field_manager)
                else:
                    body["metadata"]["resourceVersion"] = version_of(current) or None
                    written = client.replace(body, field_manager=self.field_manager)
            except ConflictError:  # written meanwhile by another decider: read again
                if cached is None:
                    time.sleep(random.uniform(0.0, 0.005 * (attempt + 1)))
                cached = None
                continue
            except NotFoundError:  # the shard was deleted meanwhile (by hand): read again
                cached = None
                continue
            with self._lock:
                self._written[(member, shard)] = written
            return done, found
        raise ConflictError(
            f"cluster {client.name}: ConfigMap {NAMESPACE}/{name} changed under each of "
            f"{CAS_ATTEMPTS} attempts to write it",
            cluster=client.name,
            code=409,
            reason="Conflict",
        )

    @staticmethod
    def _on_members(items: Sequence[Any], one: Callable[[Any], None]) -> None:
        """``one(item)`` for every item, concurrently when there are several."""
        if len(items) == 1:
            one(items[0])
        elif items:
            with ThreadPoolExecutor(min(16, len(items)), thread_name_prefix="claims") as pool:
                list(pool.map(one, items))


@dataclass
class _ShardResults:
    #: refs whose change was written (or needed none).
    done: list[WorkloadRef] = field(default_factory=list)
    #: refs held by another decider, with its claim.
    found: dict[WorkloadRef, Claim] = field(default_factory=dict)
    #: refs whose shard could not be written (no answer, refused).
    failed: list[WorkloadRef] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
