"""``placer get``: the workloads of every catalog type on every member cluster.

    placer get [TYPE] [-A | -n NAMESPACE] [-w] [fleet options] [--catalog DIR]...
               [-o text|json|yaml]
    placer get queues --queues FILE [fleet options] [--catalog DIR]... [-o text|json|yaml]
    placer get queues [--hub-context NAME] [--kubeconfig PATH]... [--catalog DIR]... [-o ...]
    placer get reservations [-A | -n NS] [--hub-context NAME] [--kubeconfig PATH]... [-o ...]

One row per top-level workload (:mod:`placer.inventory.listing`): CLUSTER, NAMESPACE, NAME,
KIND, PHASE (the definition's status mapping), COMPONENTS (``leader(1), worker(2)``: desired
pods per component instance), GPU (desired GPUs), AGE. Without ``-A`` or ``-n`` the namespace
is ``default``. Exit 3 when no cluster could be reached (instead of "No workloads found").
TYPE is a kind, its plural, ``kind.group`` or a definition name (``jobset``,
``jobsets``, ``JobSet.jobset.x-k8s.io``). Clusters that cannot be read are warnings on
stderr; the others are shown. JSON: ``{"items": [...], "count": N}``, each item as
:meth:`placer.inventory.LiveWorkload.to_dict`.

``-w``/``--watch``: after the listing, follow the workloads as ``kubectl get -w`` does — a
watch on every member (:class:`placer.inventory.follow.Follower`), one line per change of a
row (a workload appears, its phase, components or GPUs change, it is deleted: PHASE
``Deleted``), until Ctrl-C (SIGINT) or SIGTERM, then exit 0. With ``-o json|yaml`` each change
is one document, the item with ``"event"`` (``ADDED``, ``MODIFIED``, ``DELETED``). A cluster
whose watch ends for good is a warning; when every watch has ended, exit 1.

``placer get queues`` shows the queues of ``--queues FILE`` with what the work placer placed on
the members (every namespace; finished work aside) uses of each: per queue and resource QUOTA,
LIMIT, ALLOCATED and OVER QUOTA (:func:`placer.queues.report.queue_rows`; JSON:
``{"queues": [...]}``). Without ``--queues`` it reads the placement controller's hub instead
(``--hub-context NAME``, else the kubeconfig's context marked as a hub): its ``Queue`` objects
and PriorityClasses, and its workloads — ALLOCATED by those with a placement record that have
not finished (an elastic one at the count its copy runs, read from its member when the
kubeconfigs have that context), PENDING what those waiting ask, and per queue PREEMPTED, how
many wait after an eviction (:func:`placer.controller.preemption.hub_queue_rows`). A hub with
no Queue (placer's Queue CRD not installed, or no Queue object) lists none, exit 0, with a hint
on stderr saying how to create them; an API error (unreachable, 403...) is an error naming the
hub's context.

``placer get reservations`` shows the reservations the placement controller holds for waiting
gangs, from its hub (the same ``--hub-context`` rule): :mod:`placer.cli._reservations`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    require_reachable,
    unusable_warnings,
)
from placer.cli._output import add_output_option, print_data, print_table
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.errors import UsageError

__all__ = ["add_namespace_options", "register", "run"]


def add_namespace_options(parser: argparse.ArgumentParser, *, all_namespaces: bool) -> None:
    """``-n/--namespace`` (and ``-A/--all-namespaces`` when asked)."""
    parser.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: default)")
    if all_namespaces:
        parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "get",
        help="list workloads of every catalog type across all member clusters",
        description=(
            "List the workloads of every catalog type (or of TYPE) on every member cluster, "
            "with phase, components and GPUs."
        ),
    )
    parser.add_argument(
        "type",
        nargs="?",
        metavar="TYPE",
        help="workload type (default: all); or queues (docs/queues.md), or reservations "
        "(docs/reservations.md)",
    )
    add_namespace_options(parser, all_namespaces=True)
    parser.add_argument(
        "--queues",
        metavar="FILE",
        help="with TYPE queues: the Queue YAML whose usage to show (docs/queues.md)",
    )
    parser.add_argument(
        "--hub-context",
        metavar="NAME",
        help="with TYPE queues (and no --queues) or reservations: the controller's hub whose "
        "Queues or reservations to show (default: the kubeconfig's context marked as a hub)",
    )
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after listing, print one line per change (phase, components, GPUs, deletion) "
        "until interrupted (Ctrl-C)",
    )
    add_fleet_options(parser)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from placer.fleet import member_clients
    from placer.inventory import list_workloads, resolve_type_on

    if args.type in ("queues", "queue"):
        return _queues(args)
    if args.type in ("reservations", "reservation"):
        from placer.cli._reservations import get_reservations

        if args.queues or args.watch:
            raise UsageError("--queues and -w do not go with `placer get reservations`")
        if args.all_namespaces and args.namespace:
            raise UsageError("give either -A or -n NAMESPACE, not both")
        return get_reservations(args, hub_context(args, "reservations"))
    if args.queues or args.hub_context:
        raise UsageError(
            "--queues and --hub-context go with `placer get queues` (--hub-context also with "
            "`placer get reservations`)"
        )
    if args.all_namespaces and args.namespace:
        raise UsageError("give either -A or -n NAMESPACE, not both")
    namespace = None if args.all_namespaces else (args.namespace or "default")
    catalog = load_catalog(args)
    config = fleet_config_from_args(args)
    # a watch per kind and cluster is one open connection each
    pool = len(catalog.definitions) + 2 if args.watch else None
    with member_clients(config, pool_size=pool) as clients:
        definitions = resolve_type_on(args.type, catalog, clients) if args.type else None
        inventory = list_workloads(clients, catalog, namespace=namespace, definitions=definitions)
        warnings = unusable_warnings(config, clients)
        warnings += list(inventory.warnings)
        reached = [name for name in clients if name not in inventory.unreachable]
        if not reached:
            for warning in warnings:
                print(f"warning: {warning}", file=sys.stderr)
            require_reachable(config.names, reached, "no workload could be listed")
        rows = [_row(w) for w in inventory.workloads]
        if args.output != "text":
            items = [w.to_dict() for w in inventory.workloads]
            print_data({"items": items, "count": len(items), "warnings": warnings}, args.output)
        elif rows:
            print_table([HEADER, *rows])
        elif not args.watch:
            where = "any namespace" if namespace is None else f"namespace {namespace}"
            print(f"No workloads found in {where}.", file=sys.stderr)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if not args.watch:
            return 0
        reachable = {name: client for name, client in clients.items() if name in reached}
        return _watch(args, reachable, catalog, namespace, definitions, inventory, rows)


HEADER = ["CLUSTER", "NAMESPACE", "NAME", "KIND", "PHASE", "COMPONENTS", "GPU", "AGE"]
#: the narrowest columns of ``-w`` lines (wider when the first listing's cells are).
WATCH_WIDTHS = (10, 12, 16, 10, 9, 22, 4, 4)


def _row(workload: Any, phase: str | None = None) -> list[str]:
    from placer.inventory import age, components_text

    return [
        workload.cluster,
        workload.namespace or "<none>",
        workload.name,
        workload.kind,
        phase or ",".join(workload.phases),
        components_text(workload),
        workload.gpu_text,
        age(workload.metadata.get("creationTimestamp")),
    ]


def _watch(
    args: argparse.Namespace,
    clients: Any,
    catalog: Any,
    namespace: str | None,
    definitions: Any,
    inventory: Any,
    shown: list[list[str]],
) -> int:
    """``-w``: follow the changes until a signal (module docstring)."""
    from placer.inventory.follow import DELETED, Change, Follower

    widths = [
        max(WATCH_WIDTHS[i], *(len(row[i]) for row in [HEADER, *shown])) for i in range(len(HEADER))
    ]
    header = [not shown]
    stop = threading.Event()

    def changed(change: Change) -> None:
        try:
            if args.output != "text":
                item = {"event": change.type, **change.workload.to_dict()}
                print_data(item, args.output)
            else:
                phase = "Deleted" if change.type == DELETED else None
                if header[0]:
                    print(_line(HEADER, widths))
                    header[0] = False
                print(_line(_row(change.workload, phase), widths))
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (| head): stop following
            stop.set()

    def problem(cluster: str, text: str) -> None:
        print(f"warning: cluster {cluster}: {text}", file=sys.stderr, flush=True)

    follower = Follower(
        clients,
        catalog,
        namespace=namespace,
        definitions=definitions,
        on_change=changed,
        on_problem=problem,
        shown=inventory.workloads,
    )
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        follower.start()
        while not stop.wait(0.5):
            if not follower.alive():
                print("error: every watch has ended", file=sys.stderr)
                return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        follower.stop()
    return 0


def _queues(args: argparse.Namespace) -> int:
    """``placer get queues``: the queues' use by the work placer placed on the members."""
    from placer.cli.submit import placed_work
    from placer.fleet import member_clients
    from placer.queues import Usage, load_queues, membership
    from placer.queues.report import queue_rows

    if not args.queues:
        return _hub_queues(args)
    if args.hub_context:
        raise UsageError("give either --queues FILE or --hub-context NAME, not both")
    queues = load_queues(args.queues)
    config = fleet_config_from_args(args)
    with member_clients(config) as clients:
        for warning in unusable_warnings(config, clients):
            print(f"warning: {warning}", file=sys.stderr)
        require_reachable(config.names, list(clients), "no queue usage could be read")
        running = placed_work(clients, args.catalog)
    usage = Usage(queues)
    for item in running:
        usage.add(
            membership(item.workload, queues).queue, item.workload.total_requests(), item.cluster
        )
    return _print_queues(args, queue_rows(queues, usage))


def _print_queues(args: argparse.Namespace, rows: list[dict[str, Any]]) -> int:
    if args.output != "text":
        print_data({"queues": rows}, args.output)
        return 0
    hub = bool(rows) and "preempted" in rows[0]
    table = [["QUEUE", "PARENT", "RESOURCE", "QUOTA", "LIMIT", "ALLOCATED", "OVER QUOTA"]]
    if hub:
        table[0] += ["PENDING", "PREEMPTED"]
    for row in rows:
        for resource, values in row["resources"].items():
            line = [
                row["name"],
                row["parent"] or "-",
                resource,
                _number(values["quota"]),
                "-" if values["limit"] is None else _number(values["limit"]),
                _number(values["allocated"]),
                _number(values["overQuota"]),
            ]
            if hub:
                line += [_number(values["pending"]), str(row["preempted"])]
            table.append(line)
    print_table(table)
    return 0


def _hub_queues(args: argparse.Namespace) -> int:
    """``placer get queues`` against the controller's hub (module docstring)."""
    from placer.controller.hubconfig import PRIORITY_CLASS_KIND, QUEUE_KIND, queues_from_hub
    from placer.controller.preemption import hub_queue_rows
    from placer.controller.records import is_opted_in, record_of, recorded_workload
    from placer.definitions import decompose
    from placer.errors import KubeError, NotFoundError, PlacerError
    from placer.kube import load_kubeconfigs, open_client
    from placer.objects import is_deleting
    from placer.solver.fairshare import Running

    kubeconfigs = load_kubeconfigs(args.kubeconfig)
    context = hub_context(args, "queues")
    catalog = load_catalog(args)
    client = open_client(kubeconfigs, context, name=context)
    try:
        try:
            queue_objects = client.list(*QUEUE_KIND).items
        except NotFoundError:
            queue_objects = None  # the CRD is not installed: no queues, which is no error
        if not queue_objects:
            print(_no_queues_hint(context, installed=queue_objects is not None), file=sys.stderr)
            if args.output != "text":
                print_data({"queues": []}, args.output)
            return 0
        try:
            classes = client.list(*PRIORITY_CLASS_KIND).items
        except KubeError:
            classes = []
        found = queues_from_hub(queue_objects, classes)
        for name, problem in sorted(found.problems.items()):
            print(f"warning: Queue {name} is left out: {problem}", file=sys.stderr)
        if found.queues is None:
            raise UsageError(
                f"the hub {context} has no valid Queue", hint="kubectl apply one (docs/queues.md)"
            )
        running, waiting, counted = [], [], []
        for definition in catalog.definitions:
            target = definition.target
            if target is None:
                continue
            try:
                items = client.list(target.api_version, target.kind).items
            except NotFoundError:
                continue  # the hub does not serve that kind
            for obj in items:
                record = record_of(obj)
                if record is None and (not is_opted_in(obj) or is_deleting(obj)):
                    continue
                if record is not None and record.terminal:
                    continue
                try:
                    workload = decompose(obj, catalog, source="hub").workload
                except PlacerError:
                    continue
                if record is not None and record.replicas:  # its counts, from the hub
                    counted.append(Running(recorded_workload(workload, record), record.cluster))
                elif record is not None:
                    running.append(Running(workload, record.cluster))
                else:
                    waiting.append((workload, obj))
        running = counted + _at_running_counts(running, kubeconfigs, catalog)
    finally:
        client.close()
    return _print_queues(args, hub_queue_rows(found.queues, running, waiting))


def _at_running_counts(running: list[Any], kubeconfigs: Any, catalog: Any) -> list[Any]:
    """Placed elastic workloads whose hub record lacks their counts (placed by a controller
    before it recorded them) at the replica count their copy runs, read from their member
    when the kubeconfigs have its context; else at their minimum, with a warning."""
    from placer.definitions import decompose
    from placer.dispatch.scaling import running_workload
    from placer.errors import PlacerError
    from placer.kube import open_client
    from placer.solver.fairshare import Running

    clients: dict[str, Any] = {}
    out = []
    try:
        for item in running:
            workload, cluster = item.workload, item.cluster
            if workload.elastic:
                ref = workload.ref
                try:
                    if cluster not in clients:
                        clients[cluster] = open_client(kubeconfigs, cluster, name=cluster)
                    copy = clients[cluster].get(
                        ref.api_version, ref.kind, ref.name, namespace=ref.namespace
                    )
                    workload = running_workload(decompose(copy, catalog), workload)
                except PlacerError as err:
                    print(
                        f"warning: {ref} counted at its minimum replicas: its copy on "
                        f"{cluster} was not read ({err})",
                        file=sys.stderr,
                    )
            out.append(Running(workload, cluster))
    finally:
        for member in clients.values():
            member.close()
    return out


def _no_queues_hint(context: str, *, installed: bool) -> str:
    """What ``placer get queues`` says about a hub without Queues (it lists none, exit 0)."""
    crd = (
        ""
        if installed
        else " (it does not serve placer's Queue: install the CRD with "
        "kubectl apply -f deploy/crds/queues.placer.dev.yaml)"
    )
    return (
        f"hub {context}: no Queue{crd}; create queues with kubectl apply -f FILE, a Queue "
        "YAML as in docs/queues.md (e.g. deploy/examples/queues/queues.yaml)"
    )


def hub_context(args: argparse.Namespace, what: str) -> str:
    """The placement controller's hub: ``--hub-context``, else the kubeconfig's one context
    marked as a hub (``placer get queues`` and ``placer get reservations``)."""
    from placer.kube import ROLE_HUB, load_kubeconfigs

    if args.hub_context:
        return str(args.hub_context)
    hubs = [c.name for c in load_kubeconfigs(args.kubeconfig).contexts() if c.role == ROLE_HUB]
    if len(hubs) != 1:
        instead = " or --queues FILE" if what == "queues" else ""
        raise UsageError(
            f"`placer get {what}` needs {'--queues FILE, or ' if instead else ''}a hub: "
            + ("no context is marked as a hub" if not hubs else f"hubs {', '.join(hubs)}"),
            hint=f"give --hub-context NAME (the placement controller's hub){instead}",
        )
    return hubs[0]


def _number(value: float) -> str:
    return f"{value:g}"


def _line(cells: list[str], widths: list[int], padding: int = 3) -> str:
    """A row padded to the first table's column widths (longer cells push the rest right)."""
    last = len(cells) - 1
    return "".join(c if i == last else c.ljust(widths[i] + padding) for i, c in enumerate(cells))
