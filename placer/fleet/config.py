"""Which clusters make up the fleet and how to reach each one.

Two ways to say it:

* **kubeconfigs** (``--kubeconfig PATH`` and ``--context NAME``, both repeatable, ``KUBECONFIG``
  honoured): without ``--context`` every context of the merged kubeconfigs is a member cluster
  named after its context — except a context marked as a placement controller's hub (the
  context extension ``placer.dev/role`` with ``role: hub``, which ``placer fleet up --hub``
  writes), which is a member only when named with ``--context``. A missing file or an unknown
  ``--context`` is an error right away: the user typed it.
* **a fleet file** (``--fleet FILE``)::

      apiVersion: placer.dev/v1alpha1      # optional
      kind: Fleet                          # optional
      clusters:
      - name: east                         # member cluster name (unique)
        kubeconfig: kubeconfigs/east.yaml  # relative to the fleet file; default: KUBECONFIG
        context: east-admin                #   or ~/.kube/config; context default: the name
        timeout: 20                        # seconds for gathering this cluster (optional)
        labels: {region: us-east-1, provider: aws, cost: "3"}
        taints: [{key: reserved, value: team-a, effect: NoSchedule}]
        scheduler: kai                     # the member's scheduler (placer.schedulers):
                                           #   default | kai | kueue | volcano | coscheduling,
                                           #   or {name: NAME, queues: {...}, ...settings}
      accelerators:                        # optional: how GPU fractions, time-sliced GPUs and
        deviceClasses: [...]               #   DRA claims count (placer/accelerators.yaml);
                                           #   each key given replaces that default key
      topologies:                          # optional: topology levels gangs may name, in
      - name: datacenter                   #   Kueue's Topology form (placer.topology)
        levels: [{nodeLabel: example.com/block}, {nodeLabel: example.com/rack}]

  A malformed fleet file is an error naming the file and field. A member whose kubeconfig file
  is missing or lacks the context is *not*: that one cluster is reported unavailable with the
  reason (naming file and field) and the others are still gathered — one stale entry must not
  blind the whole fleet.

The result is a :class:`FleetConfig` of :class:`ClusterSource`; nothing is contacted here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from placer.accelerators import AcceleratorTable, accelerators_from_dict, default_accelerators
from placer.decoding import Decoder
from placer.errors import FleetConfigError, InputError
from placer.kube import ROLE_HUB, KubeconfigSet, load_kubeconfigs
from placer.model import Taint
from placer.schedulers import SchedulerSpec, scheduler_from_data
from placer.snapshot import parse_taints
from placer.topology import Topologies, topologies_from_list
from placer.yamlload import read_yaml_file

__all__ = [
    "DEFAULT_TIMEOUT",
    "FLEET_API_VERSION",
    "FLEET_KIND",
    "ClusterSource",
    "FleetConfig",
    "fleet_from_kubeconfigs",
    "load_fleet_file",
]

FLEET_API_VERSION = "placer.dev/v1alpha1"
FLEET_KIND = "Fleet"
#: seconds allowed for gathering one cluster when nothing else is said.
DEFAULT_TIMEOUT = 30.0
_CLUSTER_KEYS = ("name", "kubeconfig", "context", "timeout", "labels", "taints", "scheduler")


@dataclass(frozen=True)
class ClusterSource:
    """One member cluster: its name, where to reach it and what the user says about it."""

    name: str
    #: the context to use in ``kubeconfig``.
    context: str
    #: the merged kubeconfig files holding the context (``None`` when they could not be read).
    kubeconfig: KubeconfigSet | None = field(default=None, compare=False, repr=False)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: seconds allowed for gathering this cluster.
    timeout: float = DEFAULT_TIMEOUT
    #: why this cluster cannot be used at all (bad fleet-file entry); empty when fine.
    problem: str = ""
    #: the member's scheduler as the fleet file says (``None``: not said; the cluster label
    #: ``placer.dev/scheduler`` or ``default`` then applies).
    scheduler: SchedulerSpec | None = None


@dataclass(frozen=True)
class FleetConfig:
    """The member clusters, in order, and where the list came from (for messages)."""

    clusters: tuple[ClusterSource, ...]
    source: str = ""
    #: the fleet file's ``accelerators:`` section as written (empty: placer's defaults).
    accelerators_data: Mapping[str, object] = field(default_factory=dict)
    #: the fleet file's ``topologies:`` section (:mod:`placer.topology`): placer's default
    #: topology plus these.
    topologies: Topologies = field(default_factory=Topologies)
    #: that section as written, for the snapshots gathered with it.
    topologies_data: tuple[Mapping[str, object], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters)

    @property
    def schedulers(self) -> dict[str, SchedulerSpec]:
        """The schedulers the fleet file names, by cluster."""
        return {c.name: c.scheduler for c in self.clusters if c.scheduler is not None}

    @property
    def accelerators(self) -> AcceleratorTable:
        """How GPU fractions, shared GPUs and DRA devices are counted for this fleet."""
        if not self.accelerators_data:
            return default_accelerators()
        return accelerators_from_dict(
            self.accelerators_data, source=self.source, field="accelerators"
        )


def fleet_from_kubeconfigs(
    kubeconfigs: Sequence[str | Path] = (),
    contexts: Sequence[str] = (),
    *,
    timeout: float = DEFAULT_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> FleetConfig:
    """Member clusters from kubeconfig files: the given contexts, or all of them but those
    marked as a placement controller's hub (``placer fleet up --hub`` marks its hub with the
    context extension ``placer.dev/role: {role: hub}``).

    Raises:
        FleetConfigError: a missing or malformed kubeconfig, an unknown context, or no context.
    """
    merged = load_kubeconfigs(kubeconfigs, environ=environ)
    names = list(dict.fromkeys(contexts)) or [
        name for name in merged.context_names() if not _is_hub(merged, name)
    ]
    if not names:
        hubs = merged.context_names()
        raise FleetConfigError(
            f"the kubeconfig's only contexts are hubs ({', '.join(hubs)})"
            if hubs
            else "the kubeconfig defines no context",
            source=merged.describe_sources(),
            field="contexts",
            hint="add a context, or describe the fleet in a --fleet FILE",
        )
    for name in names:
        merged.context(name)  # unknown or dangling context: error now
    return FleetConfig(
        tuple(
            ClusterSource(name=name, context=name, kubeconfig=merged, timeout=timeout)
            for name in names
        ),
        source=merged.describe_sources(),
    )


def _is_hub(kubeconfigs: KubeconfigSet, name: str) -> bool:
    """Whether context ``name`` is marked as a placement controller's hub (not a member)."""
    try:
        return kubeconfigs.context(name).role == ROLE_HUB
    except FleetConfigError:  # a dangling context: reported when it is used
        return False


def load_fleet_file(
    path: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> FleetConfig:
    """Read a fleet file (see module docstring).

    Args:
        path: the fleet file.
        timeout: default per-cluster timeout (a cluster's own ``timeout`` wins).
        environ: environment for clusters without ``kubeconfig`` (``KUBECONFIG``, ``HOME``).

    Raises:
        FleetConfigError: the file is missing or malformed (naming the field).
    """
    source = str(path)
    if not Path(path).exists():
        raise FleetConfigError("no such fleet file", source=source)
    data = read_yaml_file(path, FleetConfigError)
    return fleet_from_data(data, source=source, timeout=timeout, environ=environ)


def fleet_from_data(
    data: object,
    *,
    source: str = "<fleet>",
    timeout: float = DEFAULT_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> FleetConfig:
    """Validate parsed fleet-file data; kubeconfig paths are relative to ``source``'s folder."""
    read = Decoder(FleetConfigError, source)
    if not isinstance(data, Mapping):
        read.fail(
            None,
            "a fleet file must be a mapping with a clusters list",
            hint="see `placer snapshot --help` for the format",
        )
    for key, expected in (("apiVersion", FLEET_API_VERSION), ("kind", FLEET_KIND)):
        if key in data and data[key] != expected:
            read.fail(key, f"is {data[key]!r}, expected {expected!r}")
    items = data.get("clusters")
    if not isinstance(items, list) or not items:
        read.fail("clusters", "must be a non-empty list")
    accelerators = data.get("accelerators") or {}
    try:  # NB: checked now, so that a typo is an error before any cluster is contacted
        accelerators_from_dict(accelerators, source=source, field="accelerators")
    except InputError as err:
        raise FleetConfigError(err.message, hint=err.hint) from None
    try:
        topologies = topologies_from_list(data.get("topologies"))
    except ValueError as err:
        raise FleetConfigError(str(err), source=source) from None
    base = Path(source).parent
    loaded: dict[tuple[str, ...], KubeconfigSet | FleetConfigError] = {}
    clusters: list[ClusterSource] = []
    for where, item in read.entries(items, "clusters"):
        cluster = _cluster(read, item, where, base, timeout, environ, loaded)
        if cluster.name in {c.name for c in clusters}:
            read.fail(f"{where}.name", f"duplicate cluster name {cluster.name!r}")
        clusters.append(cluster)
    return FleetConfig(
        tuple(clusters),
        source=source,
        accelerators_data=dict(accelerators),
        topologies=topologies,
        topologies_data=tuple(data.get("topologies") or ()),
    )


def _cluster(
    read: Decoder,
    item: object,
    where: str,
    base: Path,
    default_timeout: float,
    environ: Mapping[str, str] | None,
    loaded: dict[tuple[str, ...], KubeconfigSet | FleetConfigError],
) -> ClusterSource:
    source = read.source
    if not isinstance(item, Mapping):
        read.fail(where, "must be a mapping")
    unknown = sorted(set(map(str, item)) - set(_CLUSTER_KEYS))
    if unknown:
        read.fail(
            where, f"unknown field(s) {', '.join(unknown)} (known: {', '.join(_CLUSTER_KEYS)})"
        )
    name = read.string(item.get("name"), f"{where}.name", required=True)
    context = read.string(item.get("context"), f"{where}.context") or name
    path_text = read.string(item.get("kubeconfig"), f"{where}.kubeconfig")
    timeout = read.number(
        item.get("timeout", default_timeout), f"{where}.timeout", positive=True, unit="seconds"
    )
    labels = read.labels(item.get("labels"), f"{where}.labels")
    taints = parse_taints(
        item.get("taints"), source=source, field=f"{where}.taints", error=FleetConfigError
    )
    scheduler = None
    if item.get("scheduler") is not None:
        scheduler = scheduler_from_data(
            item["scheduler"], source=source, field=f"{where}.scheduler", error=FleetConfigError
        )
    paths: tuple[str, ...] = ()
    if path_text:
        file = Path(path_text).expanduser()
        paths = (str(file if file.is_absolute() else base / file),)
    kubeconfig = loaded.get(paths)
    if kubeconfig is None:
        try:
            kubeconfig = load_kubeconfigs(paths, environ=environ)
        except FleetConfigError as err:
            kubeconfig = err
        loaded[paths] = kubeconfig
    problem = ""
    if isinstance(kubeconfig, FleetConfigError):
        problem = f"{source}: {where}.kubeconfig: {kubeconfig.message}"
        kubeconfig = None
    else:
        try:
            kubeconfig.context(context)
        except FleetConfigError as err:
            problem = f"{source}: {where}.context: {err.message}"
    return ClusterSource(
        name=name,
        context=context,
        kubeconfig=kubeconfig,
        labels=labels,
        taints=taints,
        timeout=timeout,
        problem=problem,
        scheduler=scheduler,
    )
