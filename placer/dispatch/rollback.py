"""Removing what a failed unit left on a cluster, before it is tried anywhere else.

When any step fails for a unit on a cluster (unreachable, 403, 404 for a kind the cluster does
not serve, 422, an admission webhook's denial, its claim taken over...), everything created for
the unit there is removed again: the objects already applied (co-grouped ones included), its
in-flight ledger entries, and a namespace placer created for it that nothing else placed uses.
Only a clean cluster lets the unit be decided again elsewhere
(:mod:`placer.dispatch.redecide`): if the clean-up itself fails (the cluster stopped answering
mid-way, so an apply may have landed), the unit is **not** placed elsewhere — a workload must
never run twice — and :func:`rollback` says what may be left where.
"""

from __future__ import annotations

from collections.abc import Sequence

from placer.dispatch.reservation import release_reserved
from placer.dispatch.units import ClusterRun, Unit
from placer.errors import ClusterUnreachableError, KubeError, PlacerError
from placer.model import WorkloadRef

__all__ = ["may_have_landed", "rollback"]


def rollback(
    run: ClusterRun,
    unit: Unit,
    applied: Sequence[WorkloadRef],
    created: Sequence[str],
    *,
    dry_run: bool = False,
) -> str:
    """Remove what the unit left on the cluster (``applied`` objects, its ledger entries, the
    ``created`` namespaces nothing else uses); what could not be removed, in words (empty:
    clean). A dry run changed nothing, so nothing is removed."""
    if dry_run:
        return ""
    client = run.client
    problems: list[str] = []
    for ref in applied:
        try:
            client.delete(
                ref.api_version,
                ref.kind,
                ref.name,
                namespace=ref.namespace,
                propagation_policy="Background",
                missing_ok=True,
            )
        except KubeError as err:
            problems.append(f"{ref} may be left on cluster {client.name} ({err.message})")
    release_reserved(run, unit)
    for namespace in created:
        if namespace in run.used_namespaces:
            continue
        try:
            client.delete("v1", "Namespace", namespace, missing_ok=True)
            run.known_namespaces.discard(namespace)
            run.created_namespaces.discard(namespace)
        except KubeError as err:
            problems.append(
                f"namespace {namespace} created by placer may be left on cluster "
                f"{client.name} ({err.message})"
            )
    if problems:
        return "not placed elsewhere, so that it cannot run twice: " + "; ".join(problems)
    return ""


def may_have_landed(err: PlacerError) -> bool:
    """Whether a failed write may still have been stored (the answer was lost)."""
    if isinstance(err, ClusterUnreachableError):
        text = err.status_message or ""
        never_sent = err.reason == "TLSError" or "refused" in text or "does not resolve" in text
        return not never_sent
    return isinstance(err, KubeError) and err.code >= 500
