"""What a definition says about the pods a framework will create.

Definitions identify pods by jq paths evaluated on the POD (``componentTypeSelector``,
``componentInstanceSelector``, ``replicaSelector``, gang ``groupByKeyPaths``). Nearly all of them
read one label: ``.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]``, optionally with a
default (``// "0"``) or a filter (``| ascii_downcase``). :func:`pod_field_key` recognises that
shape on the syntax tree, which lets placer

* predict gang groups from a manifest before any pod exists (a gang keyed on the same label as
  the instance selector is one gang per instance: :mod:`placer.definitions.gangs`), and
* materialise realistic pods for a virtual fleet (:func:`expected_pod_labels`): the labels the
  framework would set so that the definition's selectors match them.

Best effort by nature: paths that are not a plain label read (``[.metadata.ownerReferences[]? |
select(.kind == "Sandbox") | .uid][0]``) are ignored.
"""

from __future__ import annotations

from functools import lru_cache

from placer.definitions.jq import compile_jq
from placer.definitions.jqsyntax import Node
from placer.definitions.model import Component, Definition
from placer.errors import JqError

__all__ = ["ancestors", "expected_pod_labels", "pod_field_key", "subtree"]


@lru_cache(maxsize=4096)
def pod_field_key(expression: str) -> tuple[str, str] | None:
    """``("labels", key)`` or ``("annotations", key)`` when ``expression`` reads one pod label or
    annotation (``.metadata.labels["k"]``, ``.metadata.labels.k``, with ``// default``, ``| f``,
    ``?`` or parentheses around it); ``None`` otherwise."""
    try:
        node = compile_jq(expression).tree
    except JqError:
        return None
    while True:
        if node.kind in ("pipe", "alternative"):
            node = node.children[0]
        elif node.kind in ("optional", "paren"):
            node = node.children[0]
        else:
            break
    key = _key(node)
    if key is None or not node.children:
        return None
    container = node.children[0]
    if container.kind != "field" or container.value not in ("labels", "annotations"):
        return None
    if not container.children:
        return None
    metadata = container.children[0]
    if metadata.kind != "field" or metadata.value != "metadata":
        return None
    if metadata.children and metadata.children[0].kind != "identity":
        return None
    return str(container.value), key


def _key(node: Node) -> str | None:
    if node.kind == "field" and node.children:
        return str(node.value)
    if node.kind == "index" and len(node.children) == 2:
        index = node.children[1]
        if index.kind == "string" and isinstance(index.value, str):
            return index.value
    return None


def ancestors(definition: Definition, component: Component) -> list[Component]:
    """``component``'s owners, nearest first (stops at the root or on a cycle)."""
    out: list[Component] = []
    seen = {component.name}
    owner = component.owner
    while owner is not None and owner not in seen:
        try:
            parent = definition.component(owner)
        except KeyError:
            break
        out.append(parent)
        seen.add(owner)
        owner = parent.owner
    return out


def subtree(definition: Definition, name: str) -> list[Component]:
    """The component ``name`` and all components below it, in definition order."""
    names = {name}
    changed = True
    while changed:
        changed = False
        for c in definition.children:
            if c.owner in names and c.name not in names:
                names.add(c.name)
                changed = True
    return [c for c in definition.components if c.name in names]


def expected_pod_labels(
    definition: Definition,
    component: str,
    instance: str = "",
    *,
    workload_name: str | None = None,
    replica_index: int = 0,
) -> dict[str, str]:
    """Labels a framework would put on a pod of ``component``/``instance``.

    Derived from the selectors of the component and its owners and from the gang
    ``groupByKeyPaths`` of the pod groups it belongs to: type selector ``matchLabels`` and
    ``keyPath == value``; the instance id under the instance selector's label; ``replica_index``
    under the replica selector's label; gang keys and existence-only type selectors get
    ``workload_name`` (or the component name). Only plain label reads are understood (see the
    module docstring); annotations are not labels and are skipped.
    """
    leaf = definition.component(component)
    chain = [leaf, *ancestors(definition, leaf)]
    labels: dict[str, str] = {}
    fallback = workload_name or leaf.name
    for comp in chain:
        selector = comp.pod_selector
        if selector is None:
            continue
        if selector.component_type is not None:
            labels.update(selector.component_type.match_labels)
            key = _label(selector.component_type.key_path)
            if key is not None:
                value = selector.component_type.value
                labels.setdefault(key, value if value is not None else fallback)
        if selector.component_instance is not None and instance:
            key = _label(selector.component_instance.id_path)
            if key is not None:
                labels[key] = instance
        if selector.replica is not None:
            key = _label(selector.replica.key_path)
            if key is not None:
                labels.setdefault(key, str(replica_index))
    chain_names = {c.name for c in chain}
    if definition.gang is not None:
        for group in definition.gang.pod_groups:
            for member in group.members:
                if member.component_name not in chain_names:
                    continue
                for path in member.group_by_key_paths:
                    key = _label(path)
                    if key is not None:
                        labels.setdefault(key, fallback)
    return labels


def _label(expression: str | None) -> str | None:
    if not expression:
        return None
    found = pod_field_key(expression)
    if found is None or found[0] != "labels":
        return None
    return found[1]
