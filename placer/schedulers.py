"""Which scheduler runs the pods on a member cluster, and its settings (pure).

placer proves that a gang fits a member's nodes; the member's own scheduler then binds the
pods. Only a gang scheduler binds a gang all at once, and each wants to be told in its own
words. A member says which one it runs, in the fleet file::

    clusters:
    - name: east
      scheduler: kai                     # default | kai | kueue | volcano | coscheduling
    - name: west
      scheduler:
        name: kueue
        queues: {team-a: team-a-lq}      # placer queue (placer.dev/queue) -> member's queue
        defaultQueue: default            # when the workload names no queue, or no mapping

or with the cluster label ``placer.dev/scheduler: NAME`` (fleet file ``labels:``, a snapshot's
cluster labels); a PlacementPolicy's ``spec.scheduler`` overrides both for the workloads it
selects. Settings, all optional:

============== ===================================================================
``queues``      placer queue -> the member's queue (KAI Queue, Kueue LocalQueue,
                Volcano Queue)
``defaultQueue`` the member's queue when none maps (kai ``default-queue``, kueue
                ``default``, volcano ``default``)
``schedulerName`` the pods' ``schedulerName`` (kai ``kai-scheduler``, volcano
                ``volcano``, coscheduling ``scheduler-plugins-scheduler``)
``scheduleTimeoutSeconds`` coscheduling: the PodGroup's ``scheduleTimeoutSeconds``
============== ===================================================================

:func:`scheduler_from_data` parses one ``scheduler:`` value; :func:`resolve_scheduler` picks
the one that applies. What placer writes for each is :mod:`placer.dispatch.handoff`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from placer.errors import InputError
from placer.model import ANNOTATION_PREFIX

__all__ = [
    "DEFAULT",
    "GANG_SCHEDULERS",
    "LABEL_QUEUE",
    "LABEL_SCHEDULER",
    "SCHEDULERS",
    "SchedulerSpec",
    "resolve_scheduler",
    "scheduler_from_data",
]

DEFAULT = "default"
SCHEDULERS = (DEFAULT, "kai", "kueue", "volcano", "coscheduling")
#: the schedulers that admit a gang whole (kueue admits the workload whole, quota-wise).
GANG_SCHEDULERS = ("kai", "volcano", "coscheduling")
#: a cluster label naming its scheduler.
LABEL_SCHEDULER = f"{ANNOTATION_PREFIX}scheduler"
#: the workload label naming its placer queue.
LABEL_QUEUE = f"{ANNOTATION_PREFIX}queue"

_DEFAULT_QUEUE = {"kai": "default-queue", "kueue": "default", "volcano": "default"}
_DEFAULT_SCHEDULER_NAME = {
    "kai": "kai-scheduler",
    "volcano": "volcano",
    "coscheduling": "scheduler-plugins-scheduler",
}
_SETTINGS = ("name", "queues", "defaultQueue", "schedulerName", "scheduleTimeoutSeconds")


@dataclass(frozen=True)
class SchedulerSpec:
    """A member's scheduler and its settings (see the module docstring)."""

    name: str = DEFAULT
    queues: Mapping[str, str] = field(default_factory=dict)
    default_queue: str = ""
    scheduler_name: str = ""
    schedule_timeout_seconds: int | None = None
    #: where it was said (fleet file field, cluster label, policy), for messages and records.
    source: str = ""

    @property
    def enforces_gangs(self) -> bool:
        return self.name in GANG_SCHEDULERS

    @property
    def pod_scheduler_name(self) -> str:
        """The ``schedulerName`` pods get (empty: left as written)."""
        return self.scheduler_name or _DEFAULT_SCHEDULER_NAME.get(self.name, "")

    def queue_for(self, placer_queue: str) -> str:
        """The member's queue for a workload of ``placer_queue`` (may be empty)."""
        if placer_queue and placer_queue in self.queues:
            return self.queues[placer_queue]
        return self.default_queue or _DEFAULT_QUEUE.get(self.name, "")


def scheduler_from_data(
    data: object, *, source: str, field: str, error: type[InputError]
) -> SchedulerSpec:
    """``NAME`` or ``{name: NAME, ...settings}``; a clear ``error`` naming ``field`` else."""
    where = f"{source}: {field}"
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, Mapping):
        raise error(
            f"must be a scheduler name ({' | '.join(SCHEDULERS)}) or a mapping with a name",
            source=source,
            field=field,
        )
    unknown = sorted(set(map(str, data)) - set(_SETTINGS))
    if unknown:
        raise error(
            f"unknown setting(s) {', '.join(unknown)} (known: {', '.join(_SETTINGS)})",
            source=source,
            field=field,
        )
    name = data.get("name")
    if name not in SCHEDULERS:
        raise error(
            f"{name!r} is not a scheduler placer knows (one of {', '.join(SCHEDULERS)})",
            source=source,
            field=f"{field}.name" if "name" in data and not isinstance(data, str) else field,
            hint="use default for kube-scheduler",
        )
    queues = data.get("queues") or {}
    if not isinstance(queues, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in queues.items()
    ):
        raise error(
            "must map placer queue names to the member's queue names",
            source=source,
            field=f"{field}.queues",
        )
    texts: dict[str, str] = {}
    for key in ("defaultQueue", "schedulerName"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise error("must be a non-empty string", source=source, field=f"{field}.{key}")
        texts[key] = value or ""
    timeout = data.get("scheduleTimeoutSeconds")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout <= 0
        or int(timeout) != timeout
    ):
        raise error(
            f"must be a whole number of seconds > 0, got {timeout!r}",
            source=source,
            field=f"{field}.scheduleTimeoutSeconds",
        )
    return SchedulerSpec(
        name=str(name),
        queues=dict(queues),
        default_queue=texts["defaultQueue"],
        scheduler_name=texts["schedulerName"],
        schedule_timeout_seconds=None if timeout is None else int(timeout),
        source=where,
    )


def resolve_scheduler(
    configured: SchedulerSpec | None,
    cluster_labels: Mapping[str, str],
    override: SchedulerSpec | None = None,
) -> SchedulerSpec:
    """The scheduler that applies: a policy's ``override``, else the fleet file's, else the
    cluster label's, else ``default``.

    A cluster label naming no known scheduler counts as ``default`` (labels come from many
    places; the fleet file and policies are checked when read).
    """
    if override is not None:
        return override
    if configured is not None:
        return configured
    label = cluster_labels.get(LABEL_SCHEDULER, "")
    if label in SCHEDULERS:
        return SchedulerSpec(name=label, source=f"cluster label {LABEL_SCHEDULER}")
    return SchedulerSpec()
