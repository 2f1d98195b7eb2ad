"""Where placer keeps its own bookkeeping on a member: ConfigMaps in namespace ``placer-system``.

The in-flight ledger (:mod:`placer.dispatch.ledger`) and the workload claims
(:mod:`placer.dispatch.claims`) both live there, so that every placer process reaching a member
shares them with no extra service and with namespaced rights only. This module holds what the
two share: the namespace, creating a ConfigMap there (and the namespace when it is missing),
and the timestamps they store (UTC, microseconds: Kubernetes' MicroTime format).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from placer.errors import NotFoundError
from placer.kube import KubeClient

__all__ = ["NAMESPACE", "create_configmap", "micro_time", "parse_micro_time"]

NAMESPACE = "placer-system"


def micro_time(seconds: float) -> str:
    """Epoch ``seconds`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: object) -> float | None:
    """Epoch seconds of a :func:`micro_time` (or seconds-precision RFC 3339) text, or ``None``."""
    if not isinstance(text, str):
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


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
