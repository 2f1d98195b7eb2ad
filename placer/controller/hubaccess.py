"""What the placement controller's identity must be allowed on the HUB: the rights
``deploy/rbac.yaml`` grants (a test keeps the two equal), asked of the hub's API server one
SelfSubjectAccessReview at a time (``placer fleet check --hub-context NAME``).

* every workload kind of the catalog the hub serves: get, list, watch and patch (placement
  record, finalizer), and patch on its ``status`` (the ``Placed`` condition, mirrored status);
* the definition kinds (Karta, ResourceInterface), PlacementPolicies, Queues and PriorityClasses
  where served: get, list, watch; patch on the policies' and queues' ``status``;
* ResourceClaimTemplates and ResourceClaims where ``resource.k8s.io/v1`` is served: get, list,
  watch (their devices count toward a workload's demand);
* what a workload's pods name (ConfigMaps, Secrets, ServiceAccounts, Services, PVCs): get;
* Events: create and patch;
* in the controller's namespace: create Leases and get/update its own (leader election), create
  ConfigMaps and get/patch/update ``placer-reservations`` (the reservations it keeps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.controller.hubconfig import (
    DEFINITION_KINDS,
    POLICY_KIND,
    PRIORITY_CLASS_KIND,
    QUEUE_KIND,
)
from placer.controller.reservationstore import CONFIGMAP as RESERVATIONS
from placer.controller.settings import LeaseSettings
from placer.errors import NotFoundError
from placer.fleet.access import (
    DEPENDENCIES,
    DRA_API_VERSION,
    ClusterAccess,
    Right,
    check_rights,
    served_workload_kinds,
)

if TYPE_CHECKING:
    from placer.definitions import Catalog
    from placer.kube import KubeClient

__all__ = ["HUB_USE", "check_hub_access", "hub_rights"]

#: the use the report names.
HUB_USE = "hub"
_READ = ("get", "list", "watch")


def check_hub_access(
    name: str, client: KubeClient, catalog: Catalog, lease: LeaseSettings | None = None
) -> ClusterAccess:
    """Ask the hub ``client`` reaches for every right the controller needs there."""
    return check_rights(name, client, HUB_USE, lambda: hub_rights(client, catalog, lease))


def hub_rights(
    client: KubeClient, catalog: Catalog, lease: LeaseSettings | None = None
) -> tuple[list[Right], list[str]]:
    """The rights the controller needs on the hub ``client`` reaches (its discovery says which
    kinds are served) and the catalog kinds it does not serve (not checked)."""
    lease = lease or LeaseSettings()
    rights: list[Right] = []
    served, not_served = served_workload_kinds(client, catalog)
    for ref, kind in served:
        why = f"{kind} workloads"
        rights += [Right(v, ref.group, ref.plural, why=why) for v in (*_READ, "patch")]
        rights.append(Right("patch", ref.group, ref.plural, why=why, subresource="status"))
    readable = [(*kind, "definitions extend the catalog", False) for kind in DEFINITION_KINDS] + [
        (*POLICY_KIND, "PlacementPolicies opt workloads in", True),
        (*QUEUE_KIND, "queues and their quotas", True),
        (*PRIORITY_CLASS_KIND, "the priority priorityClassName names", False),
        (DRA_API_VERSION, "ResourceClaimTemplate", "DRA claims the pods name", False),
        (DRA_API_VERSION, "ResourceClaim", "DRA claims the pods name", False),
    ]
    for api_version, kind, why, status in readable:
        try:
            ref = client.resource(api_version, kind)
        except NotFoundError:
            continue  # not served: the controller does without it
        rights += [Right(v, ref.group, ref.plural, why=why) for v in _READ]
        if status:
            rights.append(Right("patch", ref.group, ref.plural, why=why, subresource="status"))
    rights += [Right("get", "", r, why="what travels with a workload") for r in DEPENDENCIES]
    rights += [Right(v, "", "events", why="Events on workloads") for v in ("create", "patch")]
    own = lease.namespace
    rights.append(Right("create", "coordination.k8s.io", "leases", own, "leader election"))
    rights += [
        Right(v, "coordination.k8s.io", "leases", own, "leader election", name=lease.name)
        for v in ("get", "update")
    ]
    rights.append(Right("create", "", "configmaps", own, "keep reservations"))
    rights += [
        Right(v, "", "configmaps", own, "keep reservations", name=RESERVATIONS)
        for v in ("get", "patch", "update")
    ]
    return rights, not_served
