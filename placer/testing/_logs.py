"""``GET /api/v1/namespaces/NS/pods/NAME/log``: a pod's log, as far as a loopback server has one.

The loopback API server runs no containers, so a container's "log" is what the server knows of
it: when and where it started, its image, how it ended. ``kubectl logs`` then answers as it
does against a real cluster instead of "the server could not find the requested resource", and
its errors are the real server's: a pod with several containers needs ``-c``, a pod not yet on
a node has no host, a container that has not started is waiting, there is no previous
container (nothing restarts here).

Query parameters honoured: ``container``, ``timestamps``, ``tailLines``, ``limitBytes``,
``previous``; ``follow`` returns what there is and ends (no process writes more).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placer.testing._status import StatusError

__all__ = ["pod_log"]

_TRUE = {"1", "true", "True"}


def pod_log(pod: Mapping[str, Any], query: Mapping[str, str]) -> bytes:
    """The text ``kubectl logs`` prints for ``pod`` and the request's ``query``.

    Raises:
        StatusError: 400 with the real server's message (container to choose, unknown
            container, no host yet, waiting to start, no previous container), or for a
            malformed ``tailLines``/``limitBytes``.
    """
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name", ""))
    spec = pod.get("spec") or {}
    containers = [str(c.get("name", "")) for c in spec.get("containers") or () if c]
    container = query.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise StatusError(
                400,
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(containers)}]",
            )
        container = containers[0]
    elif container not in containers:
        raise StatusError(400, f"container {container} is not valid for pod {name}")
    if query.get("previous") in _TRUE:
        raise StatusError(
            400, f'previous terminated container "{container}" in pod "{name}" not found'
        )
    node = str(spec.get("nodeName") or "")
    if not node:
        raise StatusError(400, f"pod {name} does not have a host assigned")
    status = pod.get("status") or {}
    state = _container_state(status, container)
    if "running" not in state and "terminated" not in state:
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise StatusError(
            400, f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        )
    image = _container_image(spec, container)
    started = (state.get("running") or state.get("terminated") or {}).get("startedAt") or (
        status.get("startTime") or ""
    )
    lines = [
        (
            started,
            f"placer loopback cluster: container {container} of pod "
            f"{metadata.get('namespace', '')}/{name} started on node {node} (image {image}); "
            "no process runs here, so this log holds only what the API server records",
        )
    ]
    ended = state.get("terminated")
    if ended:
        lines.append(
            (
                str(ended.get("finishedAt") or started),
                f"placer loopback cluster: container {container} exited with code "
                f"{ended.get('exitCode', 0)} ({ended.get('reason') or 'Completed'})",
            )
        )
    tail = _non_negative(query, "tailLines")
    if tail is not None:
        lines = lines[len(lines) - tail :] if tail else []
    stamped = query.get("timestamps") in _TRUE
    text = "".join(f"{when} {line}\n" if stamped else f"{line}\n" for when, line in lines)
    data = text.encode()
    limit = _non_negative(query, "limitBytes")
    return data[:limit] if limit is not None else data


def _container_state(status: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    for entry in status.get("containerStatuses") or ():
        if entry.get("name") == container:
            state: Mapping[str, Any] = entry.get("state") or {}
            return state
    return {}


def _container_image(spec: Mapping[str, Any], container: str) -> str:
    for entry in spec.get("containers") or ():
        if entry.get("name") == container:
            return str(entry.get("image") or "")
    return ""


def _non_negative(query: Mapping[str, str], key: str) -> int | None:
    value = query.get(key)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        raise StatusError(400, f'{key}: Invalid value: "{value}": must be an integer') from None
    if number < 0:
        raise StatusError(
            400, f"{key}: Invalid value: {number}: must be greater than or equal to 0"
        )
    return number
