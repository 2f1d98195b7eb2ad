"""``placer fleet show`` and ``placer fleet up``.

* ``fleet show SNAPSHOT | [fleet options] [-o text|json|yaml] [--nodes]``: one row per cluster
  (reachable or why not, nodes, free/allocatable GPU, CPU, memory, the largest free GPU block
  on one node, pending pods, the scheduler placer hands gangs to there, GPU models), or one
  row per node with ``--nodes``. JSON as
  :mod:`placer.fleet.summary` documents.
* ``fleet up [SNAPSHOT] [--hub NAME] --kubeconfig-out PATH [--fleet-out PATH]``: the virtual
  fleet — one loopback HTTPS API server per cluster of the snapshot, seeded so that gathering
  from it gives the snapshot's capacity back; one kubeconfig context per cluster. Every catalog
  kind is served, and applied workloads get pods bound to nodes and a Running status
  (:mod:`placer.virtual.realism`; ``--no-pods`` turns that off). ``--hub NAME`` adds an empty
  hub cluster for ``placer controller`` (:mod:`placer.virtual.hub`: the catalog's kinds and
  placer's CRDs served, no nodes, no pods), its context marked as a hub so that commands
  reaching members leave it out, and made the current context (kubectl talks to the hub);
  without SNAPSHOT only the hub is served. Runs until
  SIGINT/SIGTERM, then stops the servers and removes nothing the user asked for.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    has_fleet_options,
    report_unreachable,
    require_reachable,
    unusable_warnings,
)
from placer.cli._output import add_output_option, print_data, print_table
from placer.cli._types import output_file, seconds_or_zero
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.errors import InputError, UsageError
from placer.fleet import gather_fleet
from placer.fleet.config import FleetConfig
from placer.fleet.summary import cluster_rows, fleet_summary, node_rows
from placer.model import Fleet
from placer.schedulers import SchedulerSpec
from placer.snapshot import load_snapshot

__all__ = ["register", "run_show", "run_up"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fleet",
        help="show the fleet's capacity, or run a virtual fleet from a snapshot",
        description="Fleet capacity: `placer fleet show`, `placer fleet up`.",
    )
    commands = parser.add_subparsers(dest="fleet_command", metavar="COMMAND")

    show = commands.add_parser(
        "show",
        help="capacity per cluster, from a snapshot or gathered live",
        description=(
            "Show free and allocatable capacity per cluster, from SNAPSHOT or gathered live "
            "from the fleet options."
        ),
    )
    show.add_argument("snapshot", nargs="?", metavar="SNAPSHOT", help="snapshot file")
    add_fleet_options(show)
    show.add_argument(
        "--server",
        metavar="URL",
        help="ask a running `placer controller` (its /v1/fleet) instead of the clusters",
    )
    add_output_option(show)
    show.add_argument("--nodes", action="store_true", help="one row per node (text output)")
    show.set_defaults(func=run_show)

    up = commands.add_parser(
        "up",
        help="serve a snapshot as a virtual fleet of loopback API servers (and a hub)",
        description=(
            "Start one loopback HTTPS API server per cluster of SNAPSHOT, seeded with its "
            "nodes and pods, and with --hub an empty hub cluster for `placer controller`; "
            "write a kubeconfig with one context per cluster, and run until interrupted."
        ),
    )
    up.add_argument(
        "snapshot", nargs="?", metavar="SNAPSHOT", help="snapshot file (optional with --hub)"
    )
    up.add_argument(
        "--hub",
        metavar="NAME",
        help="also serve an empty hub cluster named NAME for `placer controller --hub-context "
        "NAME`: the catalog's kinds and placer's CRDs (PlacementPolicy, Karta), no nodes; its "
        "context is the current one, and commands reaching members leave it out",
    )
    up.add_argument(
        "--kubeconfig-out",
        type=output_file,
        required=True,
        metavar="PATH",
        help="kubeconfig file to write",
    )
    up.add_argument(
        "--fleet-out",
        type=output_file,
        metavar="PATH",
        help="also write a fleet file (kubeconfig, context, labels, taints per cluster)",
    )
    up.add_argument(
        "--no-pods",
        dest="pods",
        action="store_false",
        help="serve the catalog's kinds but do not materialise pods of applied workloads",
    )
    up.add_argument(
        "--arrival-window",
        type=seconds_or_zero,
        default=0.0,
        metavar="SECONDS",
        help="bind the pods of workloads applied within SECONDS of each other together, "
        "interleaved as their controllers would create them (default 0: as each arrives); "
        "shows two gangs deadlocking under kube-scheduler (docs/handoff.md)",
    )
    up.set_defaults(func=run_up)

    check = commands.add_parser(
        "check",
        help="whether placer's identity has the rights it needs on each member",
        description=(
            "Ask each member cluster (SelfSubjectAccessReview) whether the identity of its "
            "kubeconfig context may make every request placer makes for USE: read (fleet "
            "show, plan, get, describe), submit, or controller (the rights of "
            "deploy/member/rbac.yaml). With --hub-context NAME, also the hub: the rights the "
            "placement controller needs there (deploy/rbac.yaml). Exit 0 when every cluster "
            "has them, 1 when one lacks a right or could not be checked, 3 when none was "
            "reached."
        ),
    )
    check.add_argument(
        "--for",
        dest="use",
        choices=("read", "submit", "controller"),
        default="submit",
        metavar="USE",
        help="what the identity is for: read, submit (default) or controller",
    )
    check.add_argument(
        "--hub-context",
        metavar="NAME",
        help="also check the placement controller's rights on this hub context of the "
        "kubeconfig (deploy/rbac.yaml); the members are then those of the other contexts",
    )
    add_fleet_options(check)
    add_catalog_option(check)
    add_output_option(check)
    check.set_defaults(func=run_check)
    parser.set_defaults(func=lambda _args: _missing_command(parser))


def _missing_command(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run_show(args: argparse.Namespace) -> int:
    if args.snapshot and has_fleet_options(args):
        raise UsageError("give either SNAPSHOT or fleet options, not both")
    fleet: Fleet
    schedulers: dict[str, SchedulerSpec] = {}
    if args.server:
        if args.snapshot or has_fleet_options(args):
            raise UsageError("--server cannot be combined with SNAPSHOT or fleet options")
        from placer.controller.client import fetch_fleet

        fleet = fetch_fleet(args.server, timeout=args.timeout)
        report_unreachable(fleet)
    elif args.snapshot:
        fleet = load_snapshot(args.snapshot)
    else:
        config = fleet_config_from_args(args)
        schedulers = config.schedulers
        fleet = gather_fleet(config)
        report_unreachable(fleet)
    if not args.snapshot:
        reached = [c.name for c in fleet.clusters if c.reachable]
        require_reachable(fleet.names, reached, "no capacity could be gathered")
    if args.output != "text":
        print_data(fleet_summary(fleet, schedulers), args.output)
        return 0
    print_table(node_rows(fleet) if args.nodes else cluster_rows(fleet, schedulers))
    for cluster in fleet.clusters:
        if not cluster.reachable and args.snapshot:
            print(f"{cluster.name}: unreachable: {cluster.reason}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    from placer.fleet import member_clients
    from placer.fleet.access import WORKERS, check_access

    catalog = load_catalog(args)
    config = _members_to_check(args)
    reports = []
    if config.clusters or not args.hub_context:
        with member_clients(config, pool_size=WORKERS) as clients:
            for warning in unusable_warnings(config, clients):
                print(f"warning: {warning}", file=sys.stderr)
            reports = check_access(clients, catalog, args.use)
    if args.hub_context:
        reports.append(_check_hub(args, catalog))
    require_reachable(
        [c.name for c in config.clusters] + ([args.hub_context] if args.hub_context else []),
        [r.cluster for r in reports if r.reachable],
        "no rights could be checked",
    )
    if args.output != "text":
        print_data({"use": args.use, "clusters": [r.to_dict() for r in reports]}, args.output)
    else:
        rows: list[list[str]] = [["CLUSTER", "USE", "CHECKED", "MISSING", "STATUS"]]
        for r in reports:
            counted = not r.error
            rows.append(
                [
                    r.cluster,
                    r.use,
                    str(r.checked) if counted else "-",
                    str(len(r.missing)) if counted else "-",
                    "ok" if r.ok else (r.error or "missing rights"),
                ]
            )
        print_table(rows)
        for report in reports:
            for right in report.missing:
                print(f"{report.cluster}: cannot {right} ({right.why})")
            if report.not_served:
                print(
                    f"{report.cluster}: not served, not checked: {', '.join(report.not_served)}",
                    file=sys.stderr,
                )
    checked = {r.cluster for r in reports}
    unchecked = [c.name for c in config.clusters if c.name not in checked]
    return 0 if all(r.ok for r in reports) and not unchecked else 1


def _members_to_check(args: argparse.Namespace) -> FleetConfig:
    """The members of ``fleet check``: the fleet options' clusters but the hub; none when the
    kubeconfig holds only the hub ``--hub-context`` names (and other hubs)."""
    from placer.kube import ROLE_HUB, load_kubeconfigs

    hub = args.hub_context
    if hub and not args.fleet and not args.context:
        if args.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        contexts = load_kubeconfigs(args.kubeconfig).contexts()
        if all(c.role == ROLE_HUB or c.name == hub for c in contexts):
            return FleetConfig(clusters=())
    config = fleet_config_from_args(args)
    return replace(config, clusters=tuple(c for c in config.clusters if c.name != hub))


def _check_hub(args: argparse.Namespace, catalog: Any) -> Any:
    """The controller's rights on the hub ``--hub-context`` names (its row of the report)."""
    from placer.controller.hubaccess import check_hub_access
    from placer.kube import ClientSettings, load_kubeconfigs, open_client

    settings = ClientSettings(request_timeout=args.timeout, connect_timeout=args.timeout)
    name = str(args.hub_context)
    client = open_client(load_kubeconfigs(args.kubeconfig), name, name=name, settings=settings)
    try:
        return check_hub_access(name, client, catalog)
    finally:
        client.close()


def run_up(args: argparse.Namespace) -> int:
    from placer.virtual.fleet import VirtualFleet
    from placer.virtual.realism import realism_setup

    if not args.snapshot and not args.hub:
        raise UsageError("give a SNAPSHOT to serve, or --hub NAME (or both)")
    if args.fleet_out and not args.snapshot:
        raise UsageError("--fleet-out lists member clusters: give the SNAPSHOT to serve")
    fleet = load_snapshot(args.snapshot) if args.snapshot else Fleet(())
    if args.hub and args.hub in fleet.names:
        raise UsageError(
            f"--hub {args.hub}: the snapshot has a cluster of that name",
            hint="name the hub differently (e.g. --hub hub)",
        )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        with VirtualFleet(
            fleet, setup=realism_setup(pods=args.pods, window=args.arrival_window), hub=args.hub
        ) as virtual:
            try:
                path = virtual.write_kubeconfig(Path(args.kubeconfig_out))
                if args.fleet_out:
                    virtual.write_fleet_file(Path(args.fleet_out), kubeconfig=path)
            except OSError as exc:
                raise InputError(
                    f"cannot write: {exc.strerror or exc}",
                    source=str(exc.filename or args.kubeconfig_out),
                    hint="choose a path in a folder you can write",
                ) from None
            for name, url in virtual.urls.items():
                if name == args.hub:
                    print(f"hub {name}: {url} (the current context)", flush=True)
                    continue
                cluster = virtual.fleet.cluster(name)
                state = "" if cluster.reachable else " (stopped: unreachable in the snapshot)"
                print(f"cluster {name}: {url}{state}", flush=True)
            print(f"kubeconfig: {path}", flush=True)
            if args.fleet_out:
                print(f"fleet file: {args.fleet_out}", flush=True)
            print("serving; press Ctrl-C to stop", flush=True)
            stop.wait()
            print("stopping", file=sys.stderr, flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
