"""Which component (and instance) each pod of a workload plays (spec sections 7.1 and 7.3).

Pods already scoped to the workload (:mod:`placer.kube.owners`) are attributed to the
definition's pod-bearing components as the Workload Map CLI does:

* a component with a ``componentTypeSelector`` claims the pods it matches: every
  ``matchLabels`` pair equal, then ``keyPath`` — equal to ``value`` when one is given, else
  present (non-null); a selector with neither claims nothing;
* a component without one claims every pod when it is the definition's only pod-bearing
  component, else none (upstream's known gap: such pods are shown nowhere);
* a multi-instance component hands its pods to the instance whose id equals the pod's
  ``componentInstanceSelector.idPath`` (pods whose id matches no instance are left out);
  without a pod selector every instance gets every pod.

A pod may be claimed by two components when both selectors match (as upstream). Selector
expressions are jq on the pod; a pod on which one fails is skipped for that component.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from placer.definitions import Decomposition
from placer.definitions.jq import compile_jq, normalize, to_json_text
from placer.definitions.model import Component, TypeSelector
from placer.errors import PlacerError
from placer.objects import labels_of, name_of

__all__ = ["attribute_pods", "instance_id"]

Pod = Mapping[str, Any]


def attribute_pods(decomposition: Decomposition, pods: Sequence[Pod]) -> dict[str, list[Pod]]:
    """``component`` or ``component/instance`` label -> its pods, sorted by name."""
    definition = decomposition.definition
    bearing = [c for c in definition.components if c.has_pod_definition]
    texts = [to_json_text(normalize(p)) for p in pods]
    out: dict[str, list[Pod]] = {}
    for component in bearing:
        claimed = [
            i for i, text in enumerate(texts) if _claims(component, text, sole=len(bearing) == 1)
        ]
        node = next(n for n in decomposition.structure if n.name == component.name)
        if not node.multi_instance:
            out[component.name] = _sorted(pods[i] for i in claimed)
            continue
        selector = component.pod_selector
        ids = {inst.id for inst in node.instances}
        by_instance: dict[str, list[Pod]] = {i: [] for i in ids}
        for i in claimed:
            if selector is None or selector.component_instance is None:
                for bucket in by_instance.values():
                    bucket.append(pods[i])
                continue
            found = instance_id(selector.component_instance.id_path, texts[i])
            if found in by_instance:
                by_instance[found].append(pods[i])
        for ident, members in by_instance.items():
            out[f"{component.name}/{ident}" if ident else component.name] = _sorted(members)
    return out


def _sorted(pods: Any) -> list[Pod]:
    return sorted(pods, key=name_of)


def _claims(component: Component, text: str, *, sole: bool) -> bool:
    selector = component.pod_selector
    if selector is None or selector.component_type is None:
        return sole
    return _type_matches(selector.component_type, text)


def _type_matches(selector: TypeSelector, text: str) -> bool:
    if selector.match_labels:
        labels = labels_of(json.loads(text))
        if any(labels.get(k) != v for k, v in selector.match_labels.items()):
            return False
    if not selector.key_path:
        return bool(selector.match_labels)
    try:
        outputs = compile_jq(selector.key_path).run(text)
    except PlacerError:
        return False
    if selector.value is None:
        return any(o is not None for o in outputs)
    return any(_text(o) == selector.value for o in outputs)


def instance_id(id_path: str, pod_text: str) -> str | None:
    """The instance id ``id_path`` yields on the pod (single non-empty result), else ``None``."""
    try:
        outputs = compile_jq(id_path).run(pod_text)
    except PlacerError:
        return None
    if len(outputs) != 1 or outputs[0] is None or outputs[0] == "":
        return None
    return _text(outputs[0])


def _text(value: Any) -> str:
    """Go ``%v`` formatting of a jq value, for the values selectors meet (labels, numbers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
