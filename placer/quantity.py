"""Kubernetes resource quantities and placer's canonical integer units.

Inside placer every amount of a resource is an ``int`` in a canonical unit, exactly as
kube-scheduler accounts it:

* ``cpu``: millicores, rounded up (``Quantity.MilliValue()``);
* every other resource (``memory``, ``ephemeral-storage``, ``pods``, ``nvidia.com/gpu``, MIG and
  other extended resources, ``hugepages-*``): whole base units (bytes or counts), rounded up
  (``Quantity.Value()``).

Users see *base units* (``to_base``): cpu in cores (``0.5`` for ``500m``), memory in bytes, other
resources as counts. ``format_quantity`` renders a canonical amount back as a short Kubernetes
quantity string (``"500m"``, ``"16Gi"``) for snapshots and tables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "CPU",
    "GPU",
    "MAX_AMOUNT",
    "MEMORY",
    "PODS",
    "Resources",
    "add",
    "fits",
    "format_quantity",
    "format_resources",
    "is_extended_resource",
    "overcommit_allowed",
    "parse_quantity",
    "parse_resources",
    "resource_amount",
    "scale",
    "subtract",
    "to_base",
    "to_base_map",
    "to_canonical",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"

#: A resource vector in canonical integer units (see module docstring). Treat as read-only.
Resources = Mapping[str, int]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)


#: Largest amount placer accepts, in canonical units (2^48: 256 TiB of memory, 2.8·10^11 cores,
#: 2.8·10^14 GPUs): far above any node, and sums over tens of thousands of nodes stay within
#: the 64-bit integers the solver counts in.
MAX_AMOUNT = 2**48
#: Longest quantity text and largest exponent accepted (``1e999999999`` would take hours to
#: expand, a million-digit number seconds): anything beyond is out of range anyway.
_MAX_TEXT = 64
_MAX_EXPONENT = 30


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``4``, ``0.5``).

    Raises ``ValueError`` with the offending text when it is not a quantity (or is so long or
    its exponent so large that it could not be a real amount).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    text = value.strip()
    if len(text) > _MAX_TEXT:
        raise ValueError(f"not a quantity: {value[:_MAX_TEXT]!r}... ({len(value)} characters)")
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number = Fraction(match["num"])
    if match["bin"]:
        number *= _BINARY[match["bin"]]
    elif match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"{value!r} is out of range (exponent beyond ±{_MAX_EXPONENT})")
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[match["dec"] or ""]
    return -number if match["sign"] == "-" else number


def to_canonical(resource: str, value: object) -> int:
    """A quantity in placer's canonical unit for ``resource`` (cpu: millicores; else base units).

    Raises ``ValueError`` when it is not a quantity or beyond ±:data:`MAX_AMOUNT`.
    """
    if isinstance(value, str):
        # the same few quantity strings ("1", "500m", "16Gi") recur across manifests and pods
        return _canonical_text(resource == CPU, value)
    return _in_range(parse_quantity(value), resource == CPU, value)


@lru_cache(maxsize=4096)
def _canonical_text(millis: bool, text: str) -> int:
    return _in_range(parse_quantity(text), millis, text)


def _in_range(quantity: Fraction, millis: bool, value: object) -> int:
    amount = math.ceil(quantity * 1000 if millis else quantity)
    if abs(amount) > MAX_AMOUNT:
        raise ValueError(
            f"{value!r} is too large (placer accepts at most {MAX_AMOUNT} "
            f"{'millicores' if millis else 'units'})"
        )
    return amount


def is_extended_resource(resource: str) -> bool:
    """Kubernetes' extended resources (``nvidia.com/gpu``, ``rdma/ib``): a domain other than
    ``kubernetes.io``; whole numbers only, never overcommitted."""
    return (
        "/" in resource
        and "kubernetes.io/" not in resource
        and not resource.startswith("requests.")
    )


def overcommit_allowed(resource: str) -> bool:
    """Whether a request may be below its limit (native resources except hugepages)."""
    return not is_extended_resource(resource) and not resource.startswith("hugepages-")


def resource_amount(resource: str, value: object) -> int:
    """An amount of ``resource`` as Kubernetes accepts it in a pod or a node: a quantity, not
    negative, a whole number for extended resources; in canonical units.

    Raises ``ValueError`` saying which rule ``value`` breaks (Kubernetes' own wording).
    """
    amount = to_canonical(resource, value)
    if amount < 0:
        raise ValueError(f"{value!r} must be greater than or equal to 0")
    if is_extended_resource(resource) and parse_quantity(value).denominator != 1:
        raise ValueError(f"{value!r} must be an integer ({resource} is an extended resource)")
    return amount


def parse_resources(values: Mapping[str, object] | None) -> dict[str, int]:
    """Parse a ``{resource: quantity}`` map (e.g. a container's ``requests``) to canonical ints."""
    if not values:
        return {}
    return {name: to_canonical(name, quantity) for name, quantity in values.items()}


def to_base(resource: str, amount: int) -> int | float:
    """Canonical amount to the base unit users see: cpu cores (float when fractional), else int."""
    if resource == CPU:
        return amount // 1000 if amount % 1000 == 0 else amount / 1000
    return amount


def to_base_map(resources: Mapping[str, int]) -> dict[str, int | float]:
    """``to_base`` over a whole vector, keys sorted for stable output."""
    return {name: to_base(name, resources[name]) for name in sorted(resources)}


def format_quantity(resource: str, amount: int) -> str:
    """Render a canonical amount as a short Kubernetes quantity string.

    cpu: ``"4"`` or ``"500m"``; byte-like resources (memory, storage, hugepages): the largest
    binary suffix that divides exactly (``"16Gi"``), else plain bytes; other resources: the count.
    """
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if _is_bytes(resource) and amount:
        for suffix, factor in reversed(_BINARY.items()):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def format_resources(resources: Mapping[str, int]) -> dict[str, str]:
    """``format_quantity`` over a vector, keys sorted."""
    return {name: format_quantity(name, resources[name]) for name in sorted(resources)}


def _is_bytes(resource: str) -> bool:
    return resource in (MEMORY, "ephemeral-storage", "storage") or resource.startswith("hugepages-")


def add(*vectors: Mapping[str, int]) -> dict[str, int]:
    """Sum of resource vectors (missing entries count as 0)."""
    total: dict[str, int] = {}
    for vector in vectors:
        for name, amount in vector.items():
            total[name] = total.get(name, 0) + amount
    return total


def subtract(left: Mapping[str, int], right: Mapping[str, int]) -> dict[str, int]:
    """``left - right`` per resource, over the union of names (may go negative)."""
    names: Iterable[str] = set(left) | set(right)
    return {name: left.get(name, 0) - right.get(name, 0) for name in names}


def scale(vector: Mapping[str, int], factor: int) -> dict[str, int]:
    """``vector * factor``."""
    return {name: amount * factor for name, amount in vector.items()}


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether every positive entry of ``request`` is available in ``free`` (absent = 0)."""
    return all(amount <= free.get(name, 0) for name, amount in request.items() if amount > 0)
