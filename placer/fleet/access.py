"""What placer's identity may do on each member: the rights a use needs, asked of the member's
API server one SelfSubjectAccessReview at a time (``placer fleet check``).

The rights are those ``deploy/member/rbac.yaml`` grants (a test keeps the two equal), by use:

* ``read`` — ``fleet show``, ``snapshot``, ``plan``, ``get``, ``describe``: list nodes and pods
  in every namespace, the in-flight ledger's ConfigMaps in ``placer-system``, ResourceSlices and
  ResourceClaims where ``resource.k8s.io/v1`` is served, and get/list on every workload kind of
  the catalog the member serves;
* ``submit`` — the above, plus get/create on namespaces, create/patch/delete on the workload
  kinds, every verb on the ledger's and the claims' ConfigMaps in ``placer-system``, get/create/
  patch/delete on what travels with a workload (ConfigMaps, Secrets, ServiceAccounts, Services,
  PersistentVolumeClaims) and on PodGroups and Karta objects where the member serves those kinds
  (the hand-off to its scheduler, docs/handoff.md);
* ``controller`` — ``submit``'s, plus watch on nodes, pods, the workload kinds, the ledger and
  the DRA objects (the controller lists once and follows).

A workload kind the member does not serve is not checked (placer leaves such a member out for
that kind anyway) and is named in the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from placer.errors import KubeError, NotFoundError

if TYPE_CHECKING:
    from placer.definitions import Catalog
    from placer.kube import KubeClient
    from placer.kube.resources import ResourceRef

__all__ = [
    "USES",
    "ClusterAccess",
    "Right",
    "check_access",
    "check_rights",
    "fixed_rights",
    "kind_rights",
    "served_workload_kinds",
]

#: the uses, each needing what the one before it needs and more.
USES = ("read", "submit", "controller")
#: the namespace of the in-flight ledger and the workload claims.
LEDGER_NAMESPACE = "placer-system"
#: what travels with a workload (docs/handoff.md), core group.
DEPENDENCIES = ("configmaps", "secrets", "serviceaccounts", "services", "persistentvolumeclaims")
#: the hand-off's kinds: (apiVersion, kind, resource, verbs).
_WRITE = ("get", "create", "patch", "delete")
HANDOFF_KINDS = (
    ("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", _WRITE),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", _WRITE),
    ("run.ai/v1alpha1", "Karta", "kartas", ("get", "list", "create", "patch")),
)
DRA_API_VERSION = "resource.k8s.io/v1"
#: concurrent reviews per cluster.
WORKERS = 8


@dataclass(frozen=True)
class Right:
    """One request placer makes: ``verb`` on ``resource`` of ``group`` in ``namespace`` (``""``:
    every namespace, or a cluster-scoped resource), and what for."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    why: str = ""
    #: a subresource (``status``), ``""`` for the resource itself.
    subresource: str = ""
    #: one object's name (RBAC's ``resourceNames``), ``""`` for any.
    name: str = ""

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        qualified = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            qualified += f"/{self.subresource}"
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {qualified}{named}{where}"

    @property
    def rbac_resource(self) -> str:
        """The resource as an RBAC rule names it (``jobsets/status``)."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class ClusterAccess:
    """One member's answer: the rights checked and the ones refused."""

    cluster: str
    use: str
    reachable: bool = True
    #: why the member could not be checked (unreachable, or the reviews themselves refused).
    error: str = ""
    checked: int = 0
    missing: list[Right] = field(default_factory=list)
    #: catalog kinds the member does not serve (not checked).
    not_served: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reachable and not self.error and not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "use": self.use,
            "reachable": self.reachable,
            "error": self.error,
            "checked": self.checked,
            "ok": self.ok,
            "missing": [
                {
                    "verb": r.verb,
                    "group": r.group,
                    "resource": r.resource,
                    "subresource": r.subresource,
                    "name": r.name,
                    "namespace": r.namespace,
                    "why": r.why,
                }
                for r in self.missing
            ],
            "notServed": list(self.not_served),
        }


def _uses(use: str) -> set[str]:
    if use not in USES:
        raise ValueError(f"unknown use {use!r}; choose one of {', '.join(USES)}")
    return set(USES[: USES.index(use) + 1])


def fixed_rights(use: str, *, dra: bool, handoff: Iterable[tuple[str, str]] = ()) -> list[Right]:
    """The rights ``use`` needs besides the workload kinds; ``dra``: the member serves
    ``resource.k8s.io/v1``; ``handoff``: (group, resource) of the hand-off kinds it serves."""
    uses = _uses(use)
    rights = [
        Right("list", "", "nodes", why="gather node capacity"),
        Right("list", "", "pods", why="gather what runs on each node"),
        Right("list", "", "configmaps", LEDGER_NAMESPACE, "read the in-flight ledger"),
    ]
    if dra:
        rights += [
            Right("list", "resource.k8s.io", r, why="count DRA devices")
            for r in ("resourceslices", "resourceclaims")
        ]
    if "submit" in uses:
        rights += [
            Right("get", "", "namespaces", why="find the workload's namespace"),
            Right("create", "", "namespaces", why="create the workload's namespace"),
        ]
        rights += [
            Right(verb, "", "configmaps", LEDGER_NAMESPACE, "the in-flight ledger and claims")
            for verb in ("get", "create", "update", "patch", "delete")
        ]
        rights += [
            Right(verb, "", resource, why="what travels with a workload")
            for resource in DEPENDENCIES
            for verb in ("get", "create", "patch", "delete")
        ]
        for group, resource in handoff:
            verbs = next(v for (av, _, r, v) in HANDOFF_KINDS if av.split("/")[0] == group)
            rights += [
                Right(verb, group, resource, why="hand the gang to the member's scheduler")
                for verb in verbs
            ]
    if "controller" in uses:
        rights += [
            Right("watch", "", "nodes", why="follow node capacity"),
            Right("watch", "", "pods", why="follow what runs on each node"),
            Right("watch", "", "configmaps", LEDGER_NAMESPACE, "follow the in-flight ledger"),
        ]
        if dra:
            rights += [
                Right("watch", "resource.k8s.io", r, why="follow DRA devices")
                for r in ("resourceslices", "resourceclaims")
            ]
    return rights


def kind_rights(use: str, group: str, resource: str, kind: str) -> list[Right]:
    """The rights ``use`` needs on one workload kind."""
    uses = _uses(use)
    verbs = ["get", "list"]
    if "submit" in uses:
        verbs += ["create", "patch", "delete"]
    if "controller" in uses:
        verbs.append("watch")
    return [Right(verb, group, resource, why=f"{kind} workloads") for verb in verbs]


def check_access(
    clients: Mapping[str, KubeClient], catalog: Catalog, use: str
) -> list[ClusterAccess]:
    """Ask every member (concurrently) for the rights ``use`` needs; one report per client,
    in the order of ``clients``."""
    _uses(use)
    with ThreadPoolExecutor(max_workers=max(1, len(clients))) as pool:
        futures = [
            pool.submit(_check_cluster, name, client, catalog, use)
            for name, client in clients.items()
        ]
        return [f.result() for f in futures]


def _check_cluster(name: str, client: KubeClient, catalog: Catalog, use: str) -> ClusterAccess:
    return check_rights(name, client, use, lambda: _rights_of(client, catalog, use))


def check_rights(
    name: str,
    client: KubeClient,
    use: str,
    rights_of: Callable[[], tuple[list[Right], list[str]]],
) -> ClusterAccess:
    """Ask ``client``'s API server for each right ``rights_of`` lists (it may read the
    server's discovery; it returns the rights and the kinds not served); the report as
    ``name`` for ``use``."""
    report = ClusterAccess(name, use)
    try:
        rights, report.not_served = rights_of()
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            answers = list(pool.map(lambda right: _allowed(client, right), rights))
    except KubeError as err:
        report.reachable = err.code != 0
        report.error = err.message
        return report
    report.checked = len(rights)
    report.missing = [right for right, allowed in zip(rights, answers, strict=True) if not allowed]
    return report


def served_workload_kinds(
    client: KubeClient, catalog: Catalog
) -> tuple[list[tuple[ResourceRef, str]], list[str]]:
    """The catalog's workload kinds ``client``'s server serves, as (resource, kind), and the
    ones it does not serve (``apiVersion/kind``)."""
    served: list[tuple[ResourceRef, str]] = []
    not_served: list[str] = []
    for definition in catalog.definitions:
        gvk = definition.target
        if gvk is None:
            continue
        try:
            served.append((client.resource(gvk.api_version, gvk.kind), gvk.kind))
        except NotFoundError:
            not_served.append(str(gvk))
    return served, not_served


def _rights_of(client: KubeClient, catalog: Catalog, use: str) -> tuple[list[Right], list[str]]:
    served, not_served = served_workload_kinds(client, catalog)
    rights = [r for ref, kind in served for r in kind_rights(use, ref.group, ref.plural, kind)]
    dra = bool(client.served_kinds(DRA_API_VERSION))
    handoff = []
    if "submit" in _uses(use):
        for api_version, kind, resource, _ in HANDOFF_KINDS:
            if kind in client.served_kinds(api_version):
                handoff.append((api_version.split("/")[0], resource))
    return fixed_rights(use, dra=dra, handoff=handoff) + rights, not_served


def _allowed(client: KubeClient, right: Right) -> bool:
    attributes = {"verb": right.verb, "group": right.group, "resource": right.resource}
    for key, value in (
        ("namespace", right.namespace),
        ("subresource", right.subresource),
        ("name", right.name),
    ):
        if value:
            attributes[key] = value
    answer = client.create(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
    )
    return bool((answer.get("status") or {}).get("allowed"))


def rights_by_rule(rights: Sequence[Right]) -> dict[tuple[str, str, str], set[str]]:
    """``rights`` as RBAC rules: (group, resource, namespace) → verbs (for comparing with a
    Role or ClusterRole)."""
    rules: dict[tuple[str, str, str], set[str]] = {}
    for right in rights:
        key = (right.group, right.rbac_resource, right.namespace)
        rules.setdefault(key, set()).add(right.verb)
    return rules
