"""The in-flight ledger: placements dispatched but not yet visible as pods on their cluster.

Why: capacity is gathered from nodes and the pods bound to them. Between the moment placer
applies a workload and the moment its framework has created the pods and the scheduler has
bound them, the cluster *looks* as free as before; a second decision in that window would
place onto the same GPUs (Karmada #1385: 20 Deployments submitted at once, 4 landed where 2
fit). Every decision therefore charges the fleet with the in-flight placements first
(:meth:`Ledger.charge`, through :func:`placer.solver.charge`).

The package, by concept: :mod:`~placer.dispatch.ledger.entry` — an entry (:class:`InFlight`)
and its JSON in a ConfigMap (pure); :mod:`~placer.dispatch.ledger.book` — the in-memory
:class:`Ledger` and charging it to a fleet; :mod:`~placer.dispatch.ledger.store` — the ledger
ConfigMaps on a member (write, read, remove); :mod:`~placer.dispatch.ledger.sync` — observing
entries against the member's workloads and pods (:func:`observe`, :func:`sync_cluster`).

Where the ledger lives — on the member cluster itself
------------------------------------------------------
ConfigMaps in namespace :data:`LEDGER_NAMESPACE` (``placer-system``) of the cluster the
workloads were placed on, labelled ``placer.dev/in-flight=true``; each data key
(:func:`entry_name` of the workload) holds one placement as JSON: workload, decision id,
creation and expiry time, and every pod with its node, requests and GPU devices. A dispatch
writes the entries of all its workloads for one cluster in one ConfigMap (chunks of at most
:data:`ENTRIES_PER_CONFIGMAP`; :func:`write_entries`), so reserving costs one request per
cluster, not one per workload; entries leave by key (:func:`remove_entries`) and a ConfigMap
goes when its last entry does.

* It is shared by every placer process — two users submitting from two laptops, a CI job and
  the controller — with no extra infrastructure, and read with **one list call per cluster**.
* It is written **before** the workloads are applied (reserve, then apply) and the entry is
  removed again if an apply fails, so no reader ever sees a placed workload without its
  reservation.
* It is read, on each member, **before** that member's nodes and pods are listed (in the
  gathering thread: :func:`placer.dispatch.submit.gather_charged`, the controller's gather).
  An entry is retired when its pods are seen bound; read after the capacity, pods bound
  between the two reads would be in neither and a decision would place onto their GPUs (two
  concurrent submissions put 51 GPUs on a 48-GPU cluster that way).
* It needs only namespaced rights in ``placer-system`` (get/list/create/update/patch/delete
  ConfigMaps, the claims of :mod:`placer.dispatch.claims` included), not cluster-wide ones; a
  process that cannot write it still dispatches and says so.
* A local state file was rejected: it would protect one user's back-to-back commands only,
  not the platform team's many submitters, and would outlive clusters it no longer matches.

The controller keeps the same entries in process (:class:`Ledger`) and syncs with the members.

When an entry stops counting
----------------------------
*Observed*, pod by pod (:func:`observe`): a pod of the workload counts as observed once it
exists on the member **and** is bound to a node (``spec.nodeName``) or has finished — from
then on capacity gathering sees it (a bound pod's requests are in its node's ``requested``;
a finished one no longer uses anything). Pods belong to the workload when their owner chain
reaches the root object (spec section 7.2: any owner reference with the root's uid, else the
controller reference followed up to 6 levels); a workload that is a bare Pod is its own pod.
Each observed pod retires one planned pod of the entry — the one on the same node with the
same requests if there is one, else one with the same requests, else one on the same node,
else any — so the charge shrinks exactly as the pods appear and nothing is counted twice. An
entry with nothing left charges nothing, and stays stored until it is :data:`OBSERVED_KEEP`
old: the read-back of a concurrent decision that gathered before those pods were bound (see
:mod:`placer.dispatch.readback`) must still find it — deleted at once by some third reader,
it would be in neither the capacity that decision gathered nor the ledger it reads back.
Unbound (Pending) pods retire nothing: the gathered capacity does not include them yet.

*Not there*: an entry whose workload is not on its member — never applied (its decider died
or stepped back between reserving and applying, or its rollback was cut short), deleted
since, or placed there by another decision (another record) — stops counting, and is deleted,
at the next look, **unless its decider may still be about to apply it**. A dispatch takes the
workload's claim (:mod:`placer.dispatch.claims`) before it reserves and releases it only after
the apply, so an entry written under a claim (``claimed``) may still be applied exactly while
its decision holds a live claim for the workload on that member. A reader therefore reads the
entries, then the claims, then the workloads: a claim released before it was read means the
apply came earlier still and the workload read afterwards would show it. So an entry of a live
decider in the middle of its apply is kept, and one of a decider that died is retired once its
claim has expired (:data:`~placer.dispatch.claims.CLAIM_TTL`, 30 s, after its last renewal) —
or at once by a controller elected through the same Lease as the one that wrote it
(:class:`~placer.dispatch.claims.Succession`: leader election stops a predecessor before its
successor starts), which is what lets a restarted controller place at start-up instead of
waiting on its predecessor's reservations. An entry written without a claim (a member that
refused claims, an older placer) keeps the grace rule: dropped once older than
:data:`APPLY_GRACE`.

*Expired*: an entry older than its TTL (:data:`DEFAULT_TTL`, 10 minutes) no longer counts and
is deleted by the next reader — pods that never appeared after that long (no framework
controller on the member, a quota) must not block the capacity forever.

Known limits: two processes that gather at the same instant and both choose the same free
GPUs before either has written its reservation decide without seeing each other; the
dispatcher's read-back after reserving settles that. A decision dispatched more than
:data:`OBSERVED_KEEP` after it read the ledger could miss a placement observed and deleted
meanwhile (``placer submit`` and the controller dispatch within seconds of reading).
"""

from placer.dispatch.ledger.book import Ledger, charge_known, release_known
from placer.dispatch.ledger.entry import (
    DEFAULT_TTL,
    LABEL_IN_FLIGHT,
    LEDGER_NAMESPACE,
    InFlight,
    decode_entry,
    encode_entry,
    entries_configmap,
    entries_from_configmap,
    entry_from_configmap,
    entry_name,
    entry_to_configmap,
)
from placer.dispatch.ledger.store import (
    delete_entry,
    read_entries,
    remove_entries,
    write_entries,
    write_entry,
)
from placer.dispatch.ledger.sync import APPLY_GRACE, OBSERVED_KEEP, observe, sync_cluster

__all__ = [
    "APPLY_GRACE",
    "DEFAULT_TTL",
    "LABEL_IN_FLIGHT",
    "LEDGER_NAMESPACE",
    "OBSERVED_KEEP",
    "InFlight",
    "Ledger",
    "charge_known",
    "decode_entry",
    "delete_entry",
    "encode_entry",
    "entries_configmap",
    "entries_from_configmap",
    "entry_from_configmap",
    "entry_name",
    "entry_to_configmap",
    "observe",
    "read_entries",
    "release_known",
    "remove_entries",
    "sync_cluster",
    "write_entries",
    "write_entry",
]
