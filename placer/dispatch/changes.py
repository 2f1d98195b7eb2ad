"""Whether a workload's manifest changed since placer placed it, and what changed (pure).

``placer submit`` of a workload placer already placed compares the manifest with the copy on
its member (:func:`copy_changed`):

* the copy carries the hash of the manifest it was applied from (``placer.dev/manifest-hash``,
  :func:`placer.dispatch.record.manifest_hash`): changed when the hashes differ. Exact: the
  API server's defaults and normalised quantities in the stored object do not count, a field
  the user removed does;
* a copy without the hash (placed by an older placer) counts as changed when some field the
  manifest sets has another value on the copy (what the server added does not count; a field
  the user removed cannot be seen);
* a copy waiting suspended in the middle of a move (``placer.dev/moving-from``) always counts
  as changed: applying the manifest resumes it.

:func:`describe_changes` says what changed in a few words, for people: per component, the
replicas, the requests of one pod and the container images, read through the workload's
definition from the copy and from the manifest; then, when those are equal, the first fields
that differ (``spec.ttlSecondsAfterFinished: 300 -> 600``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placer.definitions import ComponentInstance, Decomposition, decompose
from placer.dispatch.outcomes import Manifest
from placer.dispatch.record import (
    ANNOTATION_MANIFEST,
    ANNOTATION_MOVING_FROM,
    dispatch_manifest,
    manifest_hash,
)
from placer.errors import PlacerError
from placer.quantity import format_quantity

__all__ = ["copy_changed", "describe_changes", "field_differences", "moving_from"]

#: fields listed at most when no component-level change explains a difference.
MAX_FIELDS = 4
#: characters of a value shown in a field difference.
VALUE_WIDTH = 40


def moving_from(copy: Mapping[str, Any]) -> str:
    """The cluster a suspended copy is being moved from (``""``: not in a move)."""
    return str(_annotations(copy).get(ANNOTATION_MOVING_FROM) or "")


def copy_changed(manifest: Manifest, copy: Mapping[str, Any]) -> bool:
    """Whether applying ``manifest`` would change the copy placer placed (module docstring)."""
    if moving_from(copy):
        return True
    recorded = _annotations(copy).get(ANNOTATION_MANIFEST)
    if isinstance(recorded, str) and recorded:
        return recorded != manifest_hash(manifest.body, manifest.ref)
    return bool(field_differences(_desired(manifest), copy, limit=1))


def describe_changes(manifest: Manifest, copy: Mapping[str, Any]) -> tuple[str, ...]:
    """What applying ``manifest`` changes on ``copy``, in a few words (module docstring)."""
    source = moving_from(copy)
    resumed = [f"resumed after its move from {source}"] if source else []
    try:
        before: Decomposition | None = decompose(copy, manifest.decomposition.definition)
    except PlacerError:
        before = None
    changes = _component_changes(before, manifest.decomposition) if before is not None else []
    if not changes:
        changes = field_differences(_desired(manifest), copy, limit=MAX_FIELDS)
    if not changes and not resumed:
        changes = ["fields the manifest no longer sets are removed"]
    return (*resumed, *changes)


def field_differences(
    desired: Mapping[str, Any], live: Mapping[str, Any], *, limit: int = MAX_FIELDS
) -> list[str]:
    """The fields ``desired`` sets that ``live`` lacks or holds differently (at most
    ``limit``), as ``path: old -> new``. Mappings compare key by key (keys only ``live`` has
    are the server's and do not count), lists item by item."""
    found: list[str] = []
    _walk(desired, live, "", found, limit)
    return found


# --------------------------------------------------------------------------------------------


def _desired(manifest: Manifest) -> dict[str, Any]:
    body = dispatch_manifest(manifest.body, manifest.ref, None)
    body.pop("status", None)
    return body


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def _walk(desired: Any, live: Any, path: str, found: list[str], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        for key, value in desired.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in live:
                found.append(f"{child}: (none) -> {_short(value)}")
            else:
                _walk(value, live[key], child, found, limit)
            if len(found) >= limit:
                return
        return
    if isinstance(desired, list) and isinstance(live, list):
        if len(desired) != len(live):
            found.append(f"{path}: {len(live)} items -> {len(desired)}")
            return
        for index, (want, have) in enumerate(zip(desired, live, strict=True)):
            _walk(want, have, f"{path}[{index}]", found, limit)
        return
    if desired != live and not _same_scalar(desired, live):
        found.append(f"{path}: {_short(live)} -> {_short(desired)}")


def _same_scalar(desired: Any, live: Any) -> bool:
    """``1`` and ``"1"`` (a quantity written as a number, stored as a string) are the same."""
    if isinstance(desired, bool) or isinstance(live, bool):
        return False
    if isinstance(desired, int | float) and isinstance(live, str):
        return str(desired) == live
    return False


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 3] + "..."


def _component_changes(before: Decomposition, after: Decomposition) -> list[str]:
    old = {c.label: c for c in before.components}
    new = {c.label: c for c in after.components}
    changes: list[str] = []
    for label, component in new.items():
        previous = old.get(label)
        if previous is None:
            changes.append(f"{label}: added ({_pods(component.replicas)})")
            continue
        if previous.replicas != component.replicas:
            changes.append(f"{label}: replicas {previous.replicas} -> {component.replicas}")
        requests = _request_changes(previous, component)
        if requests:
            changes.append(f"{label}: requests per pod {requests}")
        changes += [f"{label}: {text}" for text in _image_changes(previous, component)]
    for label, component in old.items():
        if label not in new:
            changes.append(f"{label}: removed ({_pods(component.replicas)})")
    return changes


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _request_changes(before: ComponentInstance, after: ComponentInstance) -> str:
    old, new = before.pod.requests, after.pod.requests
    parts = []
    for name in sorted(set(old) | set(new)):
        if old.get(name, 0) != new.get(name, 0):
            was = format_quantity(name, old[name]) if name in old else "none"
            now = format_quantity(name, new[name]) if name in new else "none"
            parts.append(f"{name} {was} -> {now}")
    return ", ".join(parts)


def _image_changes(before: ComponentInstance, after: ComponentInstance) -> list[str]:
    old, new = _images(before.template), _images(after.template)
    return [
        f"image {name} {old.get(name, '(none)')} -> {image}"
        for name, image in new.items()
        if old.get(name) != image
    ]


def _images(template: Mapping[str, Any]) -> dict[str, str]:
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return {}
    images: dict[str, str] = {}
    for key in ("initContainers", "containers"):
        containers: Sequence[Any] = spec.get(key) or ()
        for container in containers:
            if isinstance(container, Mapping) and container.get("name"):
                images[str(container["name"])] = str(container.get("image", ""))
    return images
