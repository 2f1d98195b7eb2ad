"""Table responses: what ``kubectl get`` asks for and prints.

kubectl asks for lists and objects as ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the ``meta.k8s.io/v1`` Table it gets back: ``columnDefinitions`` (name, type,
format, description, priority — ``-o wide`` adds the columns of priority 1) and ``rows``, each
with its ``cells`` and the object as ``PartialObjectMetadata`` (``?includeObject=Object``: the
whole object; ``None``: nothing). A server without Table support makes kubectl fall back to
NAME and AGE.

The columns are the real server's (kube-apiserver's printers, 1.31) for the built-in kinds
this server serves — pods ``NAME READY STATUS RESTARTS AGE`` (wide: ``IP NODE NOMINATED NODE
READINESS GATES``), nodes ``NAME STATUS ROLES AGE VERSION`` (wide: addresses, OS image,
kernel, runtime), namespaces, configmaps, secrets, services, events, workloads, jobs... — and,
for a custom resource, its CRD version's ``additionalPrinterColumns`` after ``Name`` (a CRD
without them gets ``Name`` and ``Age``), their JSONPath evaluated as the apiextensions server
does (first result; ``date`` columns as an age, ``string`` columns printed). Ages are
apimachinery's ``HumanDuration`` (``45s``, ``3m20s``, ``5h10m``, ``3d4h``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from placer.testing._resources import ResourceType

__all__ = ["TABLE_MEDIA", "human_duration", "json_path", "table", "wants_table"]

JsonObj = dict[str, Any]
Cell = Any
#: the media type of a Table response.
TABLE_MEDIA = "application/json;as=Table;v=v1;g=meta.k8s.io"

_NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC."
)


def wants_table(accept: str) -> bool:
    """Whether an ``Accept`` header asks for a ``meta.k8s.io`` Table (v1 or v1beta1)."""
    for part in accept.split(","):
        params = {
            k.strip(): v.strip() for k, _, v in (p.partition("=") for p in part.split(";")[1:])
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
    return False


# --------------------------------------------------------------------------------------------
# time


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``: the age kubectl and the server print."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    total = int(seconds)
    minutes, hours, days = total // 60, total // 3600, total // 86400
    if total < 120:
        return f"{total}s"
    if minutes < 10:
        rest = total % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d" if rest == 0 else f"{days}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{years}y"


def _seconds_since(timestamp: Any, now: datetime) -> float | None:
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return (now - then).total_seconds()


def _age(timestamp: Any, now: datetime) -> str:
    seconds = _seconds_since(timestamp, now)
    return "<unknown>" if seconds is None else human_duration(seconds)


# --------------------------------------------------------------------------------------------
# JSONPath (the subset CRD printer columns use)

_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-/]+)
      | \[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*(?P<op>==|!=)\s*(?P<fval>"[^"]*"|'[^']*'|[^)\s]+)\)\]
      | \[(?P<slice>-?\d*:-?\d*)\]
      | \[(?P<index>-?\d+)\]
      | \[(?P<star>\*)\]
      | \.(?P<all>\*)
    """,
    re.VERBOSE,
)


def json_path(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` (``.status.conditions[?(@.type=="Ready")].status``, ``[0]``,
    ``[-1:]``, ``[*]``; the braces ``{...}`` optional) selects in ``obj``, in order."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    values = [obj]
    at = 0
    while at < len(text):
        step = _STEP.match(text, at)
        if step is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {text[at:]!r}")
        at = step.end()
        values = [v for value in values for v in _apply(step, value)]
    return values


def _apply(step: re.Match[str], value: Any) -> list[Any]:
    if step.group("field") is not None:
        if isinstance(value, Mapping) and step.group("field") in value:
            return [value[step.group("field")]]
        return []
    if step.group("star") or step.group("all"):
        if isinstance(value, Mapping):
            return list(value.values())
        return list(value) if isinstance(value, list) else []
    if not isinstance(value, list):
        return []
    if step.group("index") is not None:
        index = int(step.group("index"))
        return [value[index]] if -len(value) <= index < len(value) else []
    if step.group("slice") is not None:
        start, _, end = step.group("slice").partition(":")
        return value[int(start) if start else None : int(end) if end else None]
    wanted = step.group("fval").strip("\"'")
    found = []
    for item in value:
        got = json_path(item, "." + step.group("fpath"))
        text = _text(got[0]) if got else None
        if (text == wanted) == (step.group("op") == "=="):
            found.append(item)
    return found


def _text(value: Any) -> str:
    """A value as JSONPath's template prints it (``true``, ``3``, strings as they are)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# the Table


def table(
    rt: ResourceType,
    objects: Sequence[JsonObj],
    *,
    crd: JsonObj | None = None,
    include_object: str = "PartialObjectMetadata",
    resource_version: str = "",
    now: datetime | None = None,
    with_columns: bool = True,
) -> JsonObj:
    """The ``meta.k8s.io/v1`` Table of ``objects`` of type ``rt`` (``crd``: its definition,
    for a custom resource's printer columns)."""
    when = now or datetime.now(UTC)
    columns, cells = _columns(rt, crd)
    rows = []
    for obj in objects:
        row: JsonObj = {"cells": cells(obj, when)}
        if include_object == "Object":
            # encoded on its own, the object carries its kind (list items need not): kubectl's
            # --sort-by decodes the rows' objects by kind
            row["object"] = {"kind": rt.kind, "apiVersion": rt.api_version, **obj}
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version} if resource_version else {},
        "columnDefinitions": columns if with_columns else [],
        "rows": rows,
    }


Cells = Callable[[JsonObj, datetime], list[Cell]]


def _column(name: str, kind: str = "string", description: str = "", priority: int = 0) -> JsonObj:
    return {
        "name": name,
        "type": kind,
        "format": "name" if name == "Name" else "",
        "description": description,
        "priority": priority,
    }


def _columns(rt: ResourceType, crd: JsonObj | None) -> tuple[list[JsonObj], Cells]:
    if not rt.builtin:
        return _custom_columns(rt, crd)
    printer = _PRINTERS.get((rt.group, rt.kind))
    if printer is None:  # the server's default: name and creation time
        columns = [
            _column("Name", description=_NAME_DESCRIPTION),
            _column("Created At", "date", _AGE_DESCRIPTION),
        ]
        return columns, lambda obj, now: [_name(obj), _meta(obj).get("creationTimestamp")]
    heads, cells = printer
    named = [] if rt.kind == "Event" else [_column("Name", description=_NAME_DESCRIPTION)]
    return named + [_column(name, kind, "", priority) for name, kind, priority in heads], cells


def _custom_columns(rt: ResourceType, crd: JsonObj | None) -> tuple[list[JsonObj], Cells]:
    version = next(
        (
            v
            for v in ((crd or {}).get("spec") or {}).get("versions") or ()
            if isinstance(v, dict) and v.get("name") == rt.version
        ),
        {},
    )
    declared = [c for c in version.get("additionalPrinterColumns") or () if isinstance(c, dict)]
    if not declared:
        declared = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = [_column("Name", description=_NAME_DESCRIPTION)] + [
        {
            "name": str(c.get("name", "")),
            "type": str(c.get("type", "string")),
            "format": str(c.get("format", "")),
            "description": str(c.get("description", "")),
            "priority": int(c.get("priority", 0) or 0),
        }
        for c in declared
    ]

    def cells(obj: JsonObj, now: datetime) -> list[Cell]:
        row: list[Cell] = [_name(obj)]
        for column in declared:
            try:
                found = json_path(obj, str(column.get("jsonPath", "")))
            except ValueError:
                found = []
            row.append(_custom_cell(str(column.get("type", "string")), found, now))
        return row

    return columns, cells


def _custom_cell(kind: str, found: list[Any], now: datetime) -> Cell:
    if not found:
        return None
    value = found[0]
    if kind == "string":
        return _text(value)
    if kind == "date":
        seconds = _seconds_since(value, now)
        return "<invalid>" if seconds is None else human_duration(seconds)
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return value if ok else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    return _text(value)


# --------------------------------------------------------------------------------------------
# built-in printers


def _meta(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return default
        obj = obj[key]
    return obj


def _name(obj: JsonObj) -> str:
    return str(_meta(obj).get("name", ""))


def _created(obj: JsonObj, now: datetime) -> str:
    return _age(_meta(obj).get("creationTimestamp"), now)


def _none(value: Any) -> Any:
    return "<none>" if value in (None, "", [], {}) else value


def _pod_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if isinstance(s, dict) and s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0) or 0) for s in statuses if isinstance(s, dict))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in statuses:
        waiting = _get(container, "state", "waiting", "reason")
        terminated = _get(container, "state", "terminated", "reason")
        if waiting:
            reason = waiting
        elif terminated:
            reason = terminated
    if _meta(obj).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        conditions = {
            c.get("type"): c.get("status")
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        }
        met = sum(1 for g in gates if conditions.get(_get(g, "conditionType")) == "True")
        gates_text = f"{met}/{len(gates)}"
    return [
        _name(obj),
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        _created(obj, now),
        _none(status.get("podIP")),
        _none(spec.get("nodeName")),
        _none(status.get("nominatedNodeName")),
        gates_text,
    ]


def _node_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    status = obj.get("status") or {}
    ready = next(
        (
            c.get("status")
            for c in status.get("conditions") or ()
            if isinstance(c, dict) and c.get("type") == "Ready"
        ),
        None,
    )
    state = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    if _get(obj, "spec", "unschedulable"):
        state += ",SchedulingDisabled"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(
        {
            k.removeprefix("node-role.kubernetes.io/")
            for k in labels
            if k.startswith("node-role.kubernetes.io/")
        }
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = {
        a.get("type"): a.get("address")
        for a in status.get("addresses") or ()
        if isinstance(a, dict)
    }
    return [
        _name(obj),
        state,
        ",".join(r for r in roles if r) or "<none>",
        _created(obj, now),
        info.get("kubeletVersion", ""),
        _none(addresses.get("InternalIP")),
        _none(addresses.get("ExternalIP")),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _containers(obj: JsonObj, *template: str) -> tuple[str, str]:
    spec = _get(obj, *template, "spec") or {}
    containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def _selector(selector: Any) -> str:
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        if isinstance(expression, dict):
            values = ",".join(expression.get("values") or ())
            op = str(expression.get("operator", "")).lower()
            parts.append(f"{expression.get('key')} {op} ({values})")
    return ",".join(parts) or "<none>"


def _deployment_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    status = obj.get("status") or {}
    names, images = _containers(obj, "spec", "template")
    return [
        _name(obj),
        f"{status.get('readyReplicas', 0)}/{_get(obj, 'spec', 'replicas', default=1)}",
        int(status.get("updatedReplicas", 0) or 0),
        int(status.get("availableReplicas", 0) or 0),
        _created(obj, now),
        names,
        images,
        _selector(_get(obj, "spec", "selector")),
    ]


def _replicaset_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    status = obj.get("status") or {}
    names, images = _containers(obj, "spec", "template")
    return [
        _name(obj),
        int(_get(obj, "spec", "replicas", default=1) or 0),
        int(status.get("replicas", 0) or 0),
        int(status.get("readyReplicas", 0) or 0),
        _created(obj, now),
        names,
        images,
        _selector(_get(obj, "spec", "selector")),
    ]


def _statefulset_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    status = obj.get("status") or {}
    names, images = _containers(obj, "spec", "template")
    return [
        _name(obj),
        f"{status.get('readyReplicas', 0)}/{_get(obj, 'spec', 'replicas', default=1)}",
        _created(obj, now),
        names,
        images,
    ]


def _daemonset_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    status = obj.get("status") or {}
    names, images = _containers(obj, "spec", "template")
    selector = _get(obj, "spec", "template", "spec", "nodeSelector") or {}
    return [
        _name(obj),
        int(status.get("desiredNumberScheduled", 0) or 0),
        int(status.get("currentNumberScheduled", 0) or 0),
        int(status.get("numberReady", 0) or 0),
        int(status.get("updatedNumberScheduled", 0) or 0),
        int(status.get("numberAvailable", 0) or 0),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        _created(obj, now),
        names,
        images,
        _selector(_get(obj, "spec", "selector")),
    ]


def _job_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conditions = {
        c.get("type"): c.get("status")
        for c in status.get("conditions") or ()
        if isinstance(c, dict)
    }
    if conditions.get("Complete") == "True":
        state = "Complete"
    elif conditions.get("Failed") == "True":
        state = "Failed"
    elif _meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif conditions.get("Suspended") == "True" or spec.get("suspend"):
        state = "Suspended"
    else:
        state = "Running"
    succeeded = int(status.get("succeeded", 0) or 0)
    completions = spec.get("completions")
    done = (
        f"{succeeded}/{completions}"
        if completions is not None
        else f"{succeeded}/1 of {spec.get('parallelism', 1)}"
    )
    started = _seconds_since(status.get("startTime"), now)
    finished = _seconds_since(status.get("completionTime"), now)
    duration = "" if started is None else human_duration(started - (finished or 0.0))
    names, images = _containers(obj, "spec", "template")
    return [
        _name(obj),
        state,
        done,
        duration,
        _created(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _cronjob_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(obj, "spec", "jobTemplate", "spec", "template")
    last = status.get("lastScheduleTime")
    return [
        _name(obj),
        spec.get("schedule", ""),
        _none(spec.get("timeZone")),
        "True" if spec.get("suspend") else "False",
        len(status.get("active") or ()),
        _age(last, now) if last else "<none>",
        _created(obj, now),
        names,
        images,
        _selector(_get(obj, "spec", "jobTemplate", "spec", "selector")),
    ]


def _service_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec = obj.get("spec") or {}
    ports = [
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}"
        f"/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or ()
        if isinstance(p, dict)
    ]
    ingress = _get(obj, "status", "loadBalancer", "ingress") or []
    external = [str(i.get("ip") or i.get("hostname")) for i in ingress if isinstance(i, dict)]
    external += list(spec.get("externalIPs") or ())
    kind = spec.get("type", "ClusterIP")
    if not external:
        external_text = "<pending>" if kind == "LoadBalancer" else "<none>"
    else:
        external_text = ",".join(external)
    selector = spec.get("selector") or {}
    return [
        _name(obj),
        kind,
        spec.get("clusterIP") or "<none>",
        external_text,
        ",".join(ports) or "<none>",
        _created(obj, now),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _event_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    last = (
        obj.get("lastTimestamp")
        or obj.get("eventTime")
        or _get(obj, "series", "lastObservedTime")
        or _meta(obj).get("creationTimestamp")
    )
    first = obj.get("firstTimestamp") or obj.get("eventTime") or _meta(obj).get("creationTimestamp")
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingController") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    kind = str(involved.get("kind", "")).lower()
    return [
        _age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{kind}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        f"{component}, {host}" if host else component,
        obj.get("message") or obj.get("note") or "",
        _age(first, now),
        int(obj.get("count", 1) or 1),
        _name(obj),
    ]


def _pvc_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        _name(obj),
        status.get("phase", ""),
        spec.get("volumeName", ""),
        _get(status, "capacity", "storage", default=""),
        _modes(status.get("accessModes")),
        spec.get("storageClassName") or "<unset>",
        spec.get("volumeAttributesClassName") or "<unset>",
        _created(obj, now),
        spec.get("volumeMode") or "Filesystem",
    ]


def _pv_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    claim = spec.get("claimRef") or {}
    return [
        _name(obj),
        _get(spec, "capacity", "storage", default=""),
        _modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy", ""),
        status.get("phase", ""),
        f"{claim.get('namespace')}/{claim.get('name')}" if claim else "",
        spec.get("storageClassName", ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        status.get("reason", ""),
        _created(obj, now),
        spec.get("volumeMode") or "Filesystem",
    ]


def _modes(modes: Any) -> str:
    short = {
        "ReadWriteOnce": "RWO",
        "ReadOnlyMany": "ROX",
        "ReadWriteMany": "RWX",
        "ReadWriteOncePod": "RWOP",
    }
    return ",".join(short.get(m, m) for m in modes or ())


def _quota_cells(obj: JsonObj, now: datetime) -> list[Cell]:
    hard = _get(obj, "status", "hard") or _get(obj, "spec", "hard") or {}
    used = _get(obj, "status", "used") or {}
    requests = [
        f"{k}: {used.get(k, '0')}/{v}"
        for k, v in sorted(hard.items())
        if not k.startswith("limits.")
    ]
    limits = [
        f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()) if k.startswith("limits.")
    ]
    return [_name(obj), _created(obj, now), ", ".join(requests), ", ".join(limits)]


_PRINTERS: Mapping[tuple[str, str], tuple[Sequence[tuple[str, str, int]], Cells]] = {
    ("", "Pod"): (
        [
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        _pod_cells,
    ),
    ("", "Node"): (
        [
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        _node_cells,
    ),
    ("", "Namespace"): (
        [("Status", "string", 0), ("Age", "string", 0)],
        lambda obj, now: [_name(obj), _get(obj, "status", "phase", default=""), _created(obj, now)],
    ),
    ("", "ConfigMap"): (
        [("Data", "string", 0), ("Age", "string", 0)],
        lambda obj, now: [
            _name(obj),
            len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
            _created(obj, now),
        ],
    ),
    ("", "Secret"): (
        [("Type", "string", 0), ("Data", "string", 0), ("Age", "string", 0)],
        lambda obj, now: [
            _name(obj),
            obj.get("type", "Opaque"),
            len(obj.get("data") or {}),
            _created(obj, now),
        ],
    ),
    ("", "ServiceAccount"): (
        [("Secrets", "string", 0), ("Age", "string", 0)],
        lambda obj, now: [_name(obj), len(obj.get("secrets") or ()), _created(obj, now)],
    ),
    ("", "Service"): (
        [
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ],
        _service_cells,
    ),
    ("", "ResourceQuota"): (
        [("Age", "string", 0), ("Request", "string", 0), ("Limit", "string", 0)],
        _quota_cells,
    ),
    ("", "PersistentVolumeClaim"): (
        [
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        _pvc_cells,
    ),
    ("", "PersistentVolume"): (
        [
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("Reclaim Policy", "string", 0),
            ("Status", "string", 0),
            ("Claim", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Reason", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        _pv_cells,
    ),
    ("apps", "Deployment"): (
        [
            ("Ready", "string", 0),
            ("Up-to-date", "string", 0),
            ("Available", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _deployment_cells,
    ),
    ("apps", "ReplicaSet"): (
        [
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _replicaset_cells,
    ),
    ("apps", "StatefulSet"): (
        [
            ("Ready", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
        ],
        _statefulset_cells,
    ),
    ("apps", "DaemonSet"): (
        [
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Node Selector", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _daemonset_cells,
    ),
    ("batch", "Job"): (
        [
            ("Status", "string", 0),
            ("Completions", "string", 0),
            ("Duration", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _job_cells,
    ),
    ("batch", "CronJob"): (
        [
            ("Schedule", "string", 0),
            ("Timezone", "string", 0),
            ("Suspend", "boolean", 0),
            ("Active", "integer", 0),
            ("Last Schedule", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _cronjob_cells,
    ),
    ("", "Event"): (
        [
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        _event_cells,
    ),
    ("coordination.k8s.io", "Lease"): (
        [("Holder", "string", 0), ("Age", "string", 0)],
        lambda obj, now: [
            _name(obj),
            _get(obj, "spec", "holderIdentity", default=""),
            _created(obj, now),
        ],
    ),
    ("scheduling.k8s.io", "PriorityClass"): (
        [("Value", "integer", 0), ("Global-Default", "boolean", 0), ("Age", "string", 0)],
        lambda obj, now: [
            _name(obj),
            obj.get("value", 0),
            bool(obj.get("globalDefault", False)),
            _created(obj, now),
        ],
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        [("Created At", "date", 0)],
        lambda obj, now: [_name(obj), _meta(obj).get("creationTimestamp")],
    ),
}
_PRINTERS = {**_PRINTERS, ("events.k8s.io", "Event"): _PRINTERS[("", "Event")]}
