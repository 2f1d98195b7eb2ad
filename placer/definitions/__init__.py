"""Workload Map (Karta) definitions: load, validate, and decompose any AI workload with them.

A definition (``run.ai/v1alpha1 Karta``, or the older ``optimization.nvidia.com/v1alpha1
ResourceInterface``) tells, with jq paths, where a workload kind keeps its components,
instances, replicas, pod templates, status and gang groups. placer reads them exactly as
NVIDIA's Workload Map library does (``reference/karta-spec.md`` is the written-up semantics),
with the improvements each module documents, so that the solver and the controller never
contain framework-specific code.

Modules, by concept:

* :mod:`~placer.definitions.model` - the typed, immutable definition model;
* :mod:`~placer.definitions.documents`, :mod:`~placer.definitions.loader` - reading YAML/JSON
  documents and decoding definitions;
* :mod:`~placer.definitions.validate` - upstream's validation rules and more;
* :mod:`~placer.definitions.jqsyntax`, :mod:`~placer.definitions.jq` - jq parsing, safety and
  termination analysis, and the runtime;
* :mod:`~placer.definitions.interpret` - extraction of instances, scales, templates, status;
* :mod:`~placer.definitions.gangs`, :mod:`~placer.definitions.pods` - gang prediction and
  what definitions say about pods;
* :mod:`~placer.definitions.decompose` - :func:`decompose`, the entry point;
* :mod:`~placer.definitions.suspend` - suspend/resume actions;
* :mod:`~placer.definitions.catalog` - :class:`Catalog`, built-in plus user definitions;
* :mod:`~placer.definitions.view` - the ``describe`` view and its text/JSON renderings.
"""

from placer.definitions.catalog import Catalog, builtin_catalog_dir
from placer.definitions.decompose import (
    ComponentInstance,
    ComponentNode,
    Decomposition,
    InstanceNode,
    decompose,
    phases_of,
    workload_ref,
)
from placer.definitions.documents import Document, parse_documents, read_documents
from placer.definitions.jq import DEFAULT_LIMITS, JqLimits
from placer.definitions.loader import definition_from_dict, is_definition, load_definitions
from placer.definitions.model import Component, Definition, GroupVersionKind
from placer.definitions.pods import expected_pod_labels
from placer.definitions.suspend import can_suspend, resume, suspend
from placer.definitions.validate import check_definition, validate_definition

__all__ = [
    "DEFAULT_LIMITS",
    "Catalog",
    "Component",
    "ComponentInstance",
    "ComponentNode",
    "Decomposition",
    "Definition",
    "Document",
    "GroupVersionKind",
    "InstanceNode",
    "JqLimits",
    "builtin_catalog_dir",
    "can_suspend",
    "check_definition",
    "decompose",
    "definition_from_dict",
    "expected_pod_labels",
    "is_definition",
    "load_definitions",
    "parse_documents",
    "phases_of",
    "read_documents",
    "resume",
    "suspend",
    "validate_definition",
    "workload_ref",
]
