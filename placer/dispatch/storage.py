"""Where placer keeps its own bookkeeping on a member: ConfigMaps in namespace ``placer-system``.

The in-flight ledger (:mod:`placer.dispatch.ledger`) and the workload claims
(:mod:`placer.dispatch.claims`) both live there, so that every placer process reaching a member
shares them with no extra service and with namespaced rights only. This module holds what the
two share: the namespace, creating a ConfigMap there (and the namespace when it is missing),
and the timestamps they store (UTC, microseconds: Kubernetes' MicroTime format,
:func:`placer.timestamps.rfc3339` with ``digits=6``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placer.errors import NotFoundError

if TYPE_CHECKING:  # the client (and urllib3) are imported only where requests are sent
    from placer.kube import KubeClient

__all__ = ["NAMESPACE", "create_configmap"]

NAMESPACE = "placer-system"


def create_configmap(
    client: KubeClient, body: Mapping[str, Any], field_manager: str
) -> dict[str, Any]:
    """Create a ConfigMap in :data:`NAMESPACE` (and the namespace when it is missing); the
    object created.

    Raises:
        ConflictError: one of that name exists (reason ``AlreadyExists``).
        KubeError: the cluster refused or did not answer.
    """
    try:
        return client.create(body, field_manager=field_manager)
    except NotFoundError:
        client.ensure_namespace(NAMESPACE, labels={"placer.dev/placed-by": "placer"})
        return client.create(body, field_manager=field_manager)
