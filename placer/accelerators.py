"""Accelerators a pod asks for that its containers' resources do not show, and where from.

kube-scheduler's request arithmetic (:mod:`placer.podspec`) sees only container resources. AI
clusters ask for GPUs three more ways, and placer counts each of them instead of a silent zero:

* **fractions of one device** — pod annotations of Run:ai and NVIDIA KAI Scheduler
  (``gpu-fraction: "0.5"``, ``gpu-memory: "20000"`` MiB, ``gpu-fraction-num-devices``): counted
  as :data:`placer.model.GPU_SHARE` (thousandths of one device), which the packer places on one
  device of a node with that much left (two 0.5 pods share one GPU). A share on several devices
  (``gpu-fraction-num-devices`` > 1) is counted as that many whole devices: placer's device
  model gives one pod a share of one device;
* **time-slicing / MPS** — the NVIDIA device plugin's renamed shared resource
  (``nvidia.com/gpu.shared``) is fitted exactly as kube-scheduler fits it (units on the node) and
  reported as the GPU share it is (``replicas`` shares per device);
* **Dynamic Resource Allocation** (``resource.k8s.io/v1``) — a pod's ``resourceClaims`` name a
  ResourceClaimTemplate or ResourceClaim whose device requests name a DeviceClass and a count;
  the table maps the DeviceClass to the resource placer counts (``gpu.nvidia.com`` ->
  ``nvidia.com/gpu``), and node capacity comes from ResourceSlices
  (:mod:`placer.fleet.devices`). A claim whose class the table does not map, or whose template
  is not in the input, is a **warning naming it**, not a zero.

Tables show GPU demand in one cell (:func:`gpu_text`): whole GPUs and shares of one device as
a number (``12``, ``0.5``; time-sliced resources as the share of a GPU they are, given the
table), then **MIG** slices by profile (``2×mig-1g.10gb``): the NVIDIA device plugin's ``mixed``
strategy publishes each MIG profile as its own resource ``nvidia.com/mig-<profile>``, placed
exactly like any extended resource (a slice is no fraction of a whole GPU placer could add up:
the profiles of one GPU differ by model). The ``single`` strategy publishes MIG devices as
``nvidia.com/gpu`` and they count as GPUs.

Which annotation, resource or class means what is configuration, not code: an
:class:`AcceleratorTable` (defaults in ``placer/accelerators.yaml``, replaced key by key by a
fleet file's ``accelerators:`` section, recorded in snapshots). Injected sidecars are the fourth
source and live in the definitions (``injectedContainers``, :mod:`placer.definitions.model`).

Pure: no I/O except reading the packaged default table once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from placer.errors import InputError, InterpretationError
from placer.model import GPU_SHARE
from placer.objects import name_of, namespace_of
from placer.quantity import GPU, to_canonical
from placer.yamlload import load as load_yaml

__all__ = [
    "ACCELERATOR_API_VERSION",
    "ACCELERATOR_KIND",
    "MIG_PREFIX",
    "AcceleratorDemand",
    "AcceleratorTable",
    "ClaimIndex",
    "ClaimSpec",
    "DeviceClassMapping",
    "DeviceRequest",
    "FractionAnnotation",
    "RequestSource",
    "SharedResource",
    "accelerator_demand",
    "accelerators_from_dict",
    "default_accelerators",
    "fraction_share",
    "gpu_text",
    "is_claim_object",
    "mig_slices",
]

#: MIG slice resources of the NVIDIA device plugin (``mixed`` strategy): the profile follows.
MIG_PREFIX = "nvidia.com/mig-"
ACCELERATOR_API_VERSION = "placer.dev/v1alpha1"
ACCELERATOR_KIND = "AcceleratorTable"
_DRA_GROUP = "resource.k8s.io"
_CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
_UNITS = ("fraction", "MiB")
_MIB = 2**20


# --------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class FractionAnnotation:
    """A pod annotation asking for part of one GPU device."""

    annotation: str
    #: ``fraction`` (0 < f <= 1 of a device) or ``MiB`` (of a device's memory).
    unit: str
    #: annotation giving the number of devices that each get this share (default 1).
    devices_annotation: str = ""


@dataclass(frozen=True)
class SharedResource:
    """A time-sliced / MPS resource: ``replicas`` units per physical GPU."""

    resource: str
    replicas: int


@dataclass(frozen=True)
class DeviceClassMapping:
    """A DRA DeviceClass and the resource placer counts its devices as."""

    device_class: str
    resource: str
    #: the DRA driver publishing these devices in ResourceSlices.
    driver: str
    #: attributes a device must have these values of, when it has the attribute at all.
    attributes: Mapping[str, str] = field(default_factory=dict)

    def covers(self, driver: str, attributes: Mapping[str, str]) -> bool:
        """Whether a ResourceSlice device of ``driver`` with ``attributes`` is of this class."""
        if driver != self.driver:
            return False
        return all(attributes.get(k, v) == v for k, v in self.attributes.items())


@dataclass(frozen=True)
class AcceleratorTable:
    """What counts as GPU demand beyond container resources (see the module docstring)."""

    fractions: tuple[FractionAnnotation, ...] = ()
    #: bytes of one device's memory, dividing ``gpu-memory`` requests.
    gpu_memory_per_device: int = 80 * 2**30
    reservation_namespaces: tuple[str, ...] = ()
    gpu_group_label: str = ""
    shared_resources: tuple[SharedResource, ...] = ()
    device_classes: tuple[DeviceClassMapping, ...] = ()
    #: ResourceSlice device attributes kept per node.
    device_attributes: tuple[str, ...] = ()

    def device_class(self, name: str) -> DeviceClassMapping | None:
        for mapping in self.device_classes:
            if mapping.device_class == name:
                return mapping
        return None

    def resource_of_device(self, driver: str, attributes: Mapping[str, str]) -> str:
        """The resource a ResourceSlice device counts as (``""`` when no class covers it)."""
        for mapping in self.device_classes:
            if mapping.covers(driver, attributes):
                return mapping.resource
        return ""

    def shared(self, resource: str) -> SharedResource | None:
        for item in self.shared_resources:
            if item.resource == resource:
                return item
        return None

    def to_dict(self) -> dict[str, Any]:
        """The table as a fleet file or snapshot writes it (every key)."""
        return {
            "fractions": [
                {"annotation": f.annotation, "unit": f.unit}
                | ({"devicesAnnotation": f.devices_annotation} if f.devices_annotation else {})
                for f in self.fractions
            ],
            "gpuMemoryPerDevice": _bytes_text(self.gpu_memory_per_device),
            "reservationNamespaces": list(self.reservation_namespaces),
            "gpuGroupLabel": self.gpu_group_label,
            "sharedResources": [
                {"resource": s.resource, "replicas": s.replicas} for s in self.shared_resources
            ],
            "deviceClasses": [
                {"deviceClass": d.device_class, "driver": d.driver}
                | ({"attributes": dict(d.attributes)} if d.attributes else {})
                | {"resource": d.resource}
                for d in self.device_classes
            ],
            "deviceAttributes": list(self.device_attributes),
        }


def _bytes_text(amount: int) -> str:
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)


@lru_cache(maxsize=1)
def default_accelerators() -> AcceleratorTable:
    """placer's defaults (``placer/accelerators.yaml``, shipped in the package)."""
    text = resources.files("placer").joinpath("accelerators.yaml").read_text(encoding="utf-8")
    return accelerators_from_dict(load_yaml(text), source="placer/accelerators.yaml", base=None)


_KEYS = (
    "fractions",
    "gpuMemoryPerDevice",
    "reservationNamespaces",
    "gpuGroupLabel",
    "sharedResources",
    "deviceClasses",
    "deviceAttributes",
)


def accelerators_from_dict(
    data: object,
    *,
    source: str,
    field: str = "",
    base: AcceleratorTable | str | None = "default",
) -> AcceleratorTable:
    """A table from parsed YAML; every key given replaces that key of ``base`` (the defaults
    unless told otherwise; ``None``: an empty table). ``apiVersion``/``kind`` are accepted
    (a standalone ``AcceleratorTable`` document). Raises :class:`InputError` naming ``source``
    and the field."""
    start = default_accelerators() if base == "default" else base
    table = start if isinstance(start, AcceleratorTable) else AcceleratorTable()
    at = f"{field}." if field else ""
    if data is None:
        return table
    if not isinstance(data, Mapping):
        raise InputError("must be a mapping (an accelerator table)", source=source, field=field)
    unknown = sorted(set(map(str, data)) - set(_KEYS) - {"apiVersion", "kind", "metadata"})
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})",
            source=source,
            field=field or None,
        )
    changes: dict[str, Any] = {}
    if "fractions" in data:
        changes["fractions"] = tuple(
            _fraction(item, source, f"{at}fractions[{i}]")
            for i, item in enumerate(_list(data["fractions"], source, f"{at}fractions"))
        )
    if "gpuMemoryPerDevice" in data:
        where = f"{at}gpuMemoryPerDevice"
        try:
            amount = to_canonical("memory", data["gpuMemoryPerDevice"])
        except ValueError:
            amount = 0
        if amount <= 0:
            raise InputError(
                f"{data['gpuMemoryPerDevice']!r} is not a positive memory quantity",
                source=source,
                field=where,
                hint='write it like "80Gi" or "40960Mi"',
            )
        changes["gpu_memory_per_device"] = amount
    if "reservationNamespaces" in data:
        changes["reservation_namespaces"] = _strings(
            data["reservationNamespaces"], source, f"{at}reservationNamespaces"
        )
    if "gpuGroupLabel" in data:
        value = data["gpuGroupLabel"]
        if value is not None and not isinstance(value, str):
            raise InputError("must be a string", source=source, field=f"{at}gpuGroupLabel")
        changes["gpu_group_label"] = value or ""
    if "sharedResources" in data:
        changes["shared_resources"] = tuple(
            _shared(item, source, f"{at}sharedResources[{i}]")
            for i, item in enumerate(_list(data["sharedResources"], source, f"{at}sharedResources"))
        )
    if "deviceClasses" in data:
        classes = tuple(
            _device_class(item, source, f"{at}deviceClasses[{i}]")
            for i, item in enumerate(_list(data["deviceClasses"], source, f"{at}deviceClasses"))
        )
        seen: set[str] = set()
        for i, mapping in enumerate(classes):
            if mapping.device_class in seen:
                raise InputError(
                    f"DeviceClass {mapping.device_class!r} is listed twice",
                    source=source,
                    field=f"{at}deviceClasses[{i}].deviceClass",
                )
            seen.add(mapping.device_class)
        changes["device_classes"] = classes
    if "deviceAttributes" in data:
        changes["device_attributes"] = _strings(
            data["deviceAttributes"], source, f"{at}deviceAttributes"
        )
    return _replace(table, changes)


def _replace(table: AcceleratorTable, changes: Mapping[str, Any]) -> AcceleratorTable:
    from dataclasses import replace

    return replace(table, **changes)


def _list(value: object, source: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError("must be a list", source=source, field=where)
    return value


def _strings(value: object, source: str, where: str) -> tuple[str, ...]:
    items = _list(value, source, where)
    if not all(isinstance(v, str) and v for v in items):
        raise InputError("must be a list of non-empty strings", source=source, field=where)
    return tuple(items)


def _text(item: Mapping[str, Any], key: str, source: str, where: str, *, required: bool) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value:
        raise InputError("must be a non-empty string", source=source, field=f"{where}.{key}")
    return value


def _mapping(item: object, source: str, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise InputError("must be a mapping", source=source, field=where)
    unknown = sorted(set(map(str, item)) - set(keys))
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(unknown)} (known: {', '.join(keys)})",
            source=source,
            field=where,
        )
    return item


def _fraction(item: object, source: str, where: str) -> FractionAnnotation:
    data = _mapping(item, source, where, ("annotation", "unit", "devicesAnnotation"))
    unit = _text(data, "unit", source, where, required=True)
    if unit not in _UNITS:
        raise InputError(
            f"unit {unit!r} is not one of {', '.join(_UNITS)}", source=source, field=f"{where}.unit"
        )
    return FractionAnnotation(
        annotation=_text(data, "annotation", source, where, required=True),
        unit=unit,
        devices_annotation=_text(data, "devicesAnnotation", source, where, required=False),
    )


def _shared(item: object, source: str, where: str) -> SharedResource:
    data = _mapping(item, source, where, ("resource", "replicas"))
    replicas = data.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise InputError(
            f"must be a whole number >= 1, got {replicas!r}",
            source=source,
            field=f"{where}.replicas",
        )
    return SharedResource(_text(data, "resource", source, where, required=True), replicas)


def _device_class(item: object, source: str, where: str) -> DeviceClassMapping:
    data = _mapping(item, source, where, ("deviceClass", "driver", "attributes", "resource"))
    attributes = data.get("attributes") or {}
    if not isinstance(attributes, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | bool) for k, v in attributes.items()
    ):
        raise InputError(
            "must map attribute names to values", source=source, field=f"{where}.attributes"
        )
    device_class = _text(data, "deviceClass", source, where, required=True)
    return DeviceClassMapping(
        device_class=device_class,
        resource=_text(data, "resource", source, where, required=True),
        driver=_text(data, "driver", source, where, required=False) or device_class,
        attributes={str(k): _attribute_text(v) for k, v in attributes.items()},
    )


def _attribute_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------------------------
# Fractions


def fraction_share(
    annotations: Mapping[str, Any], table: AcceleratorTable
) -> tuple[FractionAnnotation, str, int, int] | None:
    """The first fraction annotation of ``table`` present: ``(entry, its text, devices,
    thousandths of each device)``. Raises ``ValueError`` (with the reason) for a value that is
    not a valid share."""
    for entry in table.fractions:
        text = annotations.get(entry.annotation)
        if text is None:
            continue
        text = str(text).strip()
        try:
            amount = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if not math.isfinite(amount) or amount <= 0:
            raise ValueError(f"{text!r} must be a positive number")
        if entry.unit == "fraction":
            if amount > 1:
                raise ValueError(f"{text!r} is more than one device (use nvidia.com/gpu)")
            milli = math.ceil(round(amount * 1000, 6))
        else:
            milli = math.ceil(round(amount * _MIB * 1000 / table.gpu_memory_per_device, 6))
        devices = 1
        if entry.devices_annotation and entry.devices_annotation in annotations:
            raw = str(annotations[entry.devices_annotation]).strip()
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"{entry.devices_annotation}={raw!r} must be a whole number >= 1")
            devices = int(raw)
        return entry, text, devices, max(1, milli)
    return None


# --------------------------------------------------------------------------------------------
# DRA claims


@dataclass(frozen=True)
class DeviceRequest:
    """One device request of a claim: ``count`` devices of ``device_class``."""

    name: str
    device_class: str
    count: int = 1
    #: ``allocationMode: All`` (every matching device of a node; counted as one).
    all_devices: bool = False
    admin_access: bool = False
    #: alternatives of ``firstAvailable`` (the first one is counted); 0 for ``exactly``.
    alternatives: int = 0


@dataclass(frozen=True)
class ClaimSpec:
    """A ResourceClaim or ResourceClaimTemplate, as far as counting devices goes."""

    kind: str
    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...]
    #: a ResourceClaim that already has ``status.allocation`` (its devices are on a node).
    allocated: bool = False

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def is_claim_object(obj: object) -> bool:
    """A ``resource.k8s.io`` ResourceClaim or ResourceClaimTemplate (any version)."""
    if not isinstance(obj, Mapping):
        return False
    api_version = str(obj.get("apiVersion") or "")
    return api_version.partition("/")[0] == _DRA_GROUP and obj.get("kind") in _CLAIM_KINDS


class ClaimIndex:
    """The ResourceClaims and ResourceClaimTemplates a decision can see, by namespace and name
    (the documents of the input files next to the workloads, or objects read from a cluster)."""

    def __init__(self, objects: Iterable[tuple[Mapping[str, Any], str]] = ()) -> None:
        self._claims: dict[tuple[str, str, str], ClaimSpec] = {}
        for obj, source in objects:
            self.add(obj, source=source)

    def add(self, obj: Mapping[str, Any], *, source: str = "") -> ClaimSpec:
        """Index one object; raises :class:`InterpretationError` naming it when malformed."""
        spec = claim_spec(obj, source=source)
        self._claims[(spec.kind, spec.namespace, spec.name)] = spec
        return spec

    def template(self, namespace: str, name: str) -> ClaimSpec | None:
        return self._claims.get(("ResourceClaimTemplate", namespace, name))

    def claim(self, namespace: str, name: str) -> ClaimSpec | None:
        return self._claims.get(("ResourceClaim", namespace, name))

    def __len__(self) -> int:
        return len(self._claims)


def claim_spec(obj: Mapping[str, Any], *, source: str = "") -> ClaimSpec:
    """Read a ResourceClaim or ResourceClaimTemplate (``resource.k8s.io`` v1, v1beta2 or
    v1beta1 field names)."""
    kind = str(obj.get("kind"))
    name = name_of(obj)
    namespace = namespace_of(obj) or "default"
    where = f"{source + ': ' if source else ''}{kind}/{name or '<no name>'}"
    if not name:
        raise InterpretationError(f"{where}: metadata.name is missing")
    spec = obj.get("spec")
    field = "spec"
    if kind == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, Mapping) else None
        field = "spec.spec"
    if not isinstance(spec, Mapping):
        raise InterpretationError(
            f"{where}: {field} is missing (a claim needs its device requests)"
        )
    devices = spec.get("devices") or {}
    if not isinstance(devices, Mapping):
        raise InterpretationError(f"{where}: {field}.devices must be a mapping")
    requests = []
    items = devices.get("requests") or []
    if not isinstance(items, list):
        raise InterpretationError(f"{where}: {field}.devices.requests must be a list")
    for i, item in enumerate(items):
        requests.append(_device_request(item, f"{where}: {field}.devices.requests[{i}]"))
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    allocated = kind == "ResourceClaim" and bool(status.get("allocation"))
    return ClaimSpec(kind, namespace, name, tuple(requests), allocated=allocated)


def _device_request(item: object, where: str) -> DeviceRequest:
    if not isinstance(item, Mapping):
        raise InterpretationError(f"{where}: must be a mapping")
    name = str(item.get("name") or "")
    alternatives = 0
    body: Mapping[str, Any]
    if isinstance(item.get("exactly"), Mapping):
        body = item["exactly"]
        where = f"{where}.exactly"
    elif isinstance(item.get("firstAvailable"), list) and item["firstAvailable"]:
        first = item["firstAvailable"][0]
        if not isinstance(first, Mapping):
            raise InterpretationError(f"{where}.firstAvailable[0]: must be a mapping")
        body = first
        alternatives = len(item["firstAvailable"])
        where = f"{where}.firstAvailable[0]"
    else:
        body = item  # v1beta1: the fields sit on the request itself
    device_class = body.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise InterpretationError(f"{where}.deviceClassName: is missing")
    mode = body.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise InterpretationError(
            f"{where}.allocationMode: {mode!r} is not ExactCount or All",
        )
    count = body.get("count", 1)
    if count is None:
        count = 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InterpretationError(f"{where}.count: must be a whole number >= 1, got {count!r}")
    return DeviceRequest(
        name=name,
        device_class=device_class,
        count=count,
        all_devices=mode == "All",
        admin_access=bool(body.get("adminAccess")),
        alternatives=alternatives,
    )


# --------------------------------------------------------------------------------------------
# A pod's accelerator demand


@dataclass(frozen=True)
class RequestSource:
    """One contribution to a pod's request that its containers' resources do not show (or a
    shared resource they do show), with where it comes from. Amounts are per pod."""

    #: ``fraction``, ``shared``, ``claim`` or ``injected``.
    kind: str
    #: short name (``gpu-fraction: "0.5"``, ``queue-proxy``, ``claim gpus``).
    name: str
    #: where it comes from (``pod annotation``, ``ResourceClaimTemplate team-a/two-gpus``).
    origin: str
    requests: Mapping[str, int]
    #: how it is counted (``0.5 of one device``).
    note: str = ""

    @property
    def text(self) -> str:
        """``origin: note`` for tables and messages."""
        return f"{self.origin}: {self.note}" if self.note else self.origin


@dataclass(frozen=True)
class AcceleratorDemand:
    """What :func:`accelerator_demand` found for one pod template."""

    #: to add to the pod's container requests.
    added: Mapping[str, int]
    sources: tuple[RequestSource, ...] = ()
    warnings: tuple[str, ...] = ()


def accelerator_demand(
    spec: Mapping[str, Any],
    annotations: Mapping[str, Any],
    requests: Mapping[str, int],
    *,
    namespace: str,
    table: AcceleratorTable,
    claims: ClaimIndex | None,
    where: str,
) -> AcceleratorDemand:
    """GPU demand of one pod template beyond ``requests`` (its containers' effective request).

    Raises :class:`InterpretationError` for a malformed fraction annotation (the Run:ai / KAI
    admission would reject the pod too); everything placer cannot count is a warning.
    """
    added: dict[str, int] = {}
    sources: list[RequestSource] = []
    warnings: list[str] = []
    try:
        share = fraction_share(annotations, table)
    except ValueError as exc:
        raise InterpretationError(f"{where}: GPU fraction annotation: {exc}") from None
    if share is not None:
        entry, text, devices, milli = share
        name = f'{entry.annotation}: "{text}"'
        if devices > 1:
            name += f', {entry.devices_annotation}: "{devices}"'
        origin = "pod annotation (Run:ai / KAI Scheduler GPU sharing)"
        if requests.get(GPU, 0) > 0:
            warnings.append(
                f"{where}: the pod asks for {GPU} and has the annotation {name}; the annotation "
                "is not counted (a pod gets whole GPUs or a share, not both)"
            )
        elif devices > 1 or milli >= 1000:
            added[GPU] = devices
            note = (
                f"{milli / 1000:g} of each of {devices} devices, counted as {devices} whole "
                "devices (placer shares one device per pod)"
                if devices > 1
                else "a whole device"
            )
            sources.append(RequestSource("fraction", name, origin, {GPU: devices}, note))
        else:
            added[GPU_SHARE] = milli
            note = f"{milli / 1000:g} of one device"
            if entry.unit == "MiB":
                note += f" of {_bytes_text(table.gpu_memory_per_device)} (gpuMemoryPerDevice)"
            sources.append(RequestSource("fraction", name, origin, {GPU_SHARE: milli}, note))
    for shared in table.shared_resources:
        amount = requests.get(shared.resource, 0)
        if amount > 0:
            sources.append(
                RequestSource(
                    "shared",
                    shared.resource,
                    "container resources (NVIDIA time-slicing / MPS)",
                    {shared.resource: amount},
                    f"{amount / shared.replicas:g} GPU at {shared.replicas} shares per device",
                )
            )
    items = spec.get("resourceClaims") or []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping):
            continue
        _claim_demand(
            item,
            f"{where}: resourceClaims[{i}]",
            namespace,
            table,
            claims,
            added,
            sources,
            warnings,
        )
    return AcceleratorDemand(added, tuple(sources), tuple(warnings))


def _claim_demand(
    item: Mapping[str, Any],
    where: str,
    namespace: str,
    table: AcceleratorTable,
    claims: ClaimIndex | None,
    added: dict[str, int],
    sources: list[RequestSource],
    warnings: list[str],
) -> None:
    claim_name = str(item.get("name") or "")
    template_name = item.get("resourceClaimTemplateName")
    named = item.get("resourceClaimName")
    if isinstance(template_name, str) and template_name:
        found = claims.template(namespace, template_name) if claims else None
        label = f"ResourceClaimTemplate {namespace}/{template_name}"
    elif isinstance(named, str) and named:
        found = claims.claim(namespace, named) if claims else None
        label = f"ResourceClaim {namespace}/{named}"
    else:
        return
    where = f"{where} ({claim_name!r})" if claim_name else where
    if found is None:
        warnings.append(
            f"{where}: {label} is not in the input, so its devices are not counted "
            "(give it in the same files as the workload)"
        )
        return
    short = f"claim {claim_name}" if claim_name else "claim"
    if found.allocated:
        sources.append(
            RequestSource(
                "claim", short, label, {}, "already allocated: counted on its node's devices"
            )
        )
        return
    for request in found.requests:
        origin = f"{label}, request {request.name!r}, DeviceClass {request.device_class}"
        if request.admin_access:
            sources.append(
                RequestSource("claim", short, origin, {}, "admin access: consumes no device")
            )
            continue
        mapping = table.device_class(request.device_class)
        if mapping is None:
            warnings.append(
                f"{where}: {label} request {request.name!r} asks for DeviceClass "
                f"{request.device_class!r}, which placer does not map to a resource: its "
                "devices are not counted (add it to the fleet file's accelerators.deviceClasses)"
            )
            continue
        count = request.count
        note = f"{count} x {mapping.resource}"
        if request.all_devices:
            count = 1
            note = f"allocationMode All: counted as 1 x {mapping.resource}"
            warnings.append(
                f"{where}: {label} request {request.name!r} asks for all devices of its class on "
                "a node; placer counts one"
            )
        if request.alternatives > 1:
            note += f" (the first of {request.alternatives} alternatives)"
        added[mapping.resource] = added.get(mapping.resource, 0) + count
        sources.append(RequestSource("claim", short, origin, {mapping.resource: count}, note))


# --------------------------------------------------------------------------------------------
# How tables show GPU demand


def mig_slices(requests: Mapping[str, int]) -> dict[str, int]:
    """The MIG slices in ``requests`` by profile (``{"mig-1g.10gb": 2}``), sorted."""
    return {
        name.removeprefix("nvidia.com/"): amount
        for name, amount in sorted(requests.items())
        if name.startswith(MIG_PREFIX) and amount > 0
    }


def gpu_text(requests: Mapping[str, int], table: AcceleratorTable | None = None) -> str:
    """The GPUs of ``requests`` in one table cell (see the module docstring): ``12``, ``0.5``,
    ``2×mig-1g.10gb``, ``1+2×mig-1g.10gb``; ``0`` when there are none. With ``table``, its
    time-sliced resources count as the share of a GPU they are."""
    gpus = requests.get(GPU, 0) + requests.get(GPU_SHARE, 0) / 1000
    for shared in table.shared_resources if table is not None else ():
        gpus += requests.get(shared.resource, 0) / shared.replicas
    parts = [f"{gpus:g}"] if gpus else []
    parts += [f"{amount}×{profile}" for profile, amount in mig_slices(requests).items()]
    return "+".join(parts) or "0"
