"""Building API requests as plain values, without any I/O.

Every verb of :class:`placer.kube.KubeClient` first builds a :class:`Request` here (method, path,
query, body, content type) and then hands it to the one method that sends requests. Keeping the
building pure means the protocol details — which query parameter a verb takes, which patch
content type, how DeleteOptions look — are testable without sockets and written once.

Patch content types (``PatchType``): ``merge`` (RFC 7386, works for every kind), ``json``
(RFC 6902 operation list), ``strategic`` (built-in kinds only; custom resources answer 415) and
``apply`` (server-side apply: needs a field manager).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode

from placer.kube.resources import ResourceRef
from placer.objects import meta, name_of

__all__ = [
    "PatchType",
    "Request",
    "apply_request",
    "create_request",
    "delete_request",
    "get_request",
    "list_request",
    "patch_request",
    "replace_request",
    "watch_request",
]

Query = tuple[tuple[str, str], ...]


class PatchType(StrEnum):
    """Patch flavours and their content types."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Request:
    """One API request, ready to send."""

    method: str
    path: str
    query: Query = ()
    #: JSON-serialisable body (a dict, or a list for JSON patches), or ``None``.
    body: Any = None
    #: ``Content-Type`` of the body (JSON when ``None``).
    content_type: str | None = None
    #: a verb phrase for error messages (``"get jobsets/demo"``).
    action: str = ""
    #: ``Accept`` header (JSON when ``None``).
    accept: str | None = None

    @property
    def url(self) -> str:
        """Path and query string."""
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path


def _query(**params: object) -> Query:
    """Query pairs for the parameters that are set, with Kubernetes spellings."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None or value == "" or value is False:
            continue
        text = "true" if value is True else str(value)
        pairs.append((key, text))
    return tuple(pairs)


def _scope(ref: ResourceRef, namespace: str | None) -> str | None:
    if not ref.namespaced:
        if namespace:
            raise ValueError(f"{ref.kind} is cluster-scoped: it takes no namespace")
        return None
    return namespace


def _need_namespace(ref: ResourceRef, namespace: str | None) -> str | None:
    ns = _scope(ref, namespace)
    if ref.namespaced and not ns:
        raise ValueError(f"{ref.kind} is namespaced: give a namespace")
    return ns


def _label(ref: ResourceRef, name: str | None = None, namespace: str | None = None) -> str:
    where = f"{namespace}/" if namespace else ""
    return f"{ref.plural}/{where}{name}" if name else ref.plural


def list_request(
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
    resource_version: str | None = None,
) -> Request:
    """A list (one page when ``limit`` is set; pass the returned ``continue`` token on)."""
    return Request(
        "GET",
        ref.path(namespace=_scope(ref, namespace)),
        _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            # NB: a continue token already pins the snapshot; resourceVersion must not be sent
            resourceVersion=None if continue_token else resource_version,
            **{"continue": continue_token},
        ),
        action=f"list {_label(ref, namespace=namespace)}",
    )


def watch_request(
    ref: ResourceRef,
    *,
    resource_version: str,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int | None = None,
    allow_bookmarks: bool = True,
) -> Request:
    """A watch from ``resource_version`` (chunked stream of JSON lines)."""
    return Request(
        "GET",
        ref.path(namespace=_scope(ref, namespace)),
        _query(
            watch=True,
            resourceVersion=resource_version,
            allowWatchBookmarks=allow_bookmarks,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            timeoutSeconds=timeout_seconds,
        ),
        action=f"watch {_label(ref, namespace=namespace)}",
    )


def get_request(
    ref: ResourceRef, name: str, *, namespace: str | None = None, subresource: str = ""
) -> Request:
    """Read one object (or one of its subresources)."""
    ns = _need_namespace(ref, namespace)
    return Request(
        "GET",
        ref.path(namespace=ns, name=name, subresource=subresource),
        action=f"get {_label(ref, name, ns)}",
    )


def create_request(
    ref: ResourceRef,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    field_manager: str | None = None,
    dry_run: bool = False,
) -> Request:
    """Create ``body`` in ``namespace``."""
    ns = _need_namespace(ref, namespace)
    name = name_of(body) or str(meta(body).get("generateName") or "")
    return Request(
        "POST",
        ref.path(namespace=ns),
        _query(fieldManager=field_manager, dryRun="All" if dry_run else None),
        dict(body),
        action=f"create {_label(ref, name, ns)}",
    )


def replace_request(
    ref: ResourceRef,
    body: Mapping[str, Any],
    *,
    name: str,
    namespace: str | None = None,
    subresource: str = "",
    field_manager: str | None = None,
    dry_run: bool = False,
) -> Request:
    """Replace (PUT) an object; ``metadata.resourceVersion`` in ``body`` makes it conditional."""
    ns = _need_namespace(ref, namespace)
    return Request(
        "PUT",
        ref.path(namespace=ns, name=name, subresource=subresource),
        _query(fieldManager=field_manager, dryRun="All" if dry_run else None),
        dict(body),
        action=f"replace {_label(ref, name, ns)}{'/' + subresource if subresource else ''}",
    )


def patch_request(
    ref: ResourceRef,
    name: str,
    patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    patch_type: PatchType = PatchType.MERGE,
    namespace: str | None = None,
    subresource: str = "",
    field_manager: str | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> Request:
    """Patch an object (or its ``status``/``scale`` subresource)."""
    ns = _need_namespace(ref, namespace)
    if patch_type is PatchType.JSON:
        if isinstance(patch, Mapping):
            raise ValueError("a JSON patch is a list of operations")
        body: Any = [dict(op) for op in patch]
    else:
        if not isinstance(patch, Mapping):
            raise ValueError(f"a {patch_type.name.lower()} patch is a mapping")
        body = dict(patch)
    if patch_type is PatchType.APPLY and not field_manager:
        raise ValueError("server-side apply needs a field manager")
    return Request(
        "PATCH",
        ref.path(namespace=ns, name=name, subresource=subresource),
        _query(
            fieldManager=field_manager,
            force=force if patch_type is PatchType.APPLY else None,
            dryRun="All" if dry_run else None,
        ),
        body,
        patch_type.value,
        action=f"patch {_label(ref, name, ns)}{'/' + subresource if subresource else ''}",
    )


def apply_request(
    ref: ResourceRef,
    body: Mapping[str, Any],
    *,
    field_manager: str,
    namespace: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    subresource: str = "",
) -> Request:
    """Server-side apply of ``body`` (its ``metadata.name`` names the object)."""
    name = name_of(body)
    if not name:
        raise ValueError("server-side apply needs metadata.name")
    return patch_request(
        ref,
        name,
        body,
        patch_type=PatchType.APPLY,
        namespace=namespace,
        subresource=subresource,
        field_manager=field_manager,
        force=force,
        dry_run=dry_run,
    )


def delete_request(
    ref: ResourceRef,
    name: str,
    *,
    namespace: str | None = None,
    propagation_policy: str | None = "Background",
    grace_period_seconds: int | None = None,
    dry_run: bool = False,
) -> Request:
    """Delete an object with DeleteOptions (``Foreground``, ``Background`` or ``Orphan``)."""
    if propagation_policy not in (None, "Foreground", "Background", "Orphan"):
        raise ValueError(f"unknown propagation policy {propagation_policy!r}")
    ns = _need_namespace(ref, namespace)
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation_policy:
        options["propagationPolicy"] = propagation_policy
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if dry_run:
        options["dryRun"] = ["All"]
    return Request(
        "DELETE",
        ref.path(namespace=ns, name=name),
        (),
        options,
        action=f"delete {_label(ref, name, ns)}",
    )
