"""``placer controller``: run the placement controller against a hub cluster.

    placer controller --hub-context NAME [--hub-kubeconfig PATH] [fleet options]
                      [--policy FILE]... [--catalog DIR]... [--metrics-port N]
                      [--batch-window SECONDS] [--grace-period SECONDS] [--hub-name NAME] ...

The hub is one kubeconfig context (``--hub-kubeconfig``, else the fleet's kubeconfig files);
the members are the fleet options as for every other command, except that without
``--context`` the hub's own context is not a member. A member that is the hub (same server) is
refused: its objects and their copies would have the same names.

Runs until SIGTERM or SIGINT (graceful: the running cycle finishes, the Lease is released);
exits 1 when it loses leadership (Kubernetes restarts it as a candidate), 0 after a signal.
Logs are JSON lines on stderr (``--log-format text`` for people).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from placer.cli._decision import (
    add_policy_option,
    add_rebalance_options,
    add_reserve_horizon_options,
    add_reserve_preempt_options,
    rebalance_policy,
    shared_reservation_policy,
)
from placer.cli._fleet import add_fleet_options, fleet_config_from_args
from placer.cli._types import address, count, port, seconds, seconds_or_zero
from placer.errors import PlacerError, UsageError
from placer.fleet import FleetConfig
from placer.fleet.config import DEFAULT_TIMEOUT
from placer.policy import PlacementPolicy, load_policies
from placer.solver import SOLVERS

__all__ = ["DEFAULT_RESERVATION_GRACE", "register", "run"]

#: seconds past its start a reservation holds while its gang cannot start (``--reservation-grace``).
DEFAULT_RESERVATION_GRACE = 60.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "controller",
        help="run the placement controller on a hub cluster",
        description=(
            "Watch a hub cluster for workloads that opt in (label placer.dev/queue, or "
            "selected by a PlacementPolicy on the hub), place them in batches on the member "
            "clusters, mirror their status back, fail over lost members."
        ),
    )
    hub = parser.add_argument_group("hub")
    hub.add_argument("--hub-context", required=True, metavar="NAME", help="the hub's context")
    hub.add_argument(
        "--hub-kubeconfig",
        action="append",
        default=[],
        metavar="PATH",
        help="kubeconfig holding the hub context (default: the fleet's kubeconfig files)",
    )
    hub.add_argument(
        "--hub-name",
        metavar="NAME",
        help="this hub's name on member copies (label placer.dev/hub; default: the context)",
    )
    add_fleet_options(parser)
    placing = parser.add_argument_group("placement")
    add_policy_option(
        placing,
        help="PlacementPolicy YAML, applied before the hub's PlacementPolicies (repeatable)",
    )
    placing.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="DIR",
        help="extra Workload Map definitions (repeatable; the hub's Karta objects win)",
    )
    placing.add_argument(
        "--batch-window",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds pending workloads are collected before a cycle decides them (default 1)",
    )
    placing.add_argument(
        "--grace-period",
        type=seconds_or_zero,
        default=300.0,
        metavar="SECONDS",
        help="seconds a member may be unreachable before its workloads move (default 300)",
    )
    placing.add_argument(
        "--resync-interval",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds between capacity and health checks while idle (default 30)",
    )
    placing.add_argument(
        "--capacity",
        choices=("watch", "list"),
        default="watch",
        help="how the members' capacity is known: watch (informer caches, no list per "
        "cycle) or list (every cycle lists every member); default watch",
    )
    placing.add_argument("--solver", choices=SOLVERS, default="cpsat", help="default cpsat")
    placing.add_argument(
        "--time-limit",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="solver seconds per cycle (default 1)",
    )
    placing.add_argument(
        "--no-preemption",
        action="store_true",
        help="with Queues on the hub, never evict placed work for pending work (reclaim and "
        "preempt are on by default)",
    )
    add_rebalance_options(placing, "with Queues on the hub (not with --no-preemption)")
    placing.add_argument(
        "--max-batch",
        type=count(1, 1_000_000),
        default=2000,
        metavar="N",
        help="workloads per cycle at most",
    )
    placing.add_argument(
        "--in-flight-ttl",
        "--ledger-ttl",
        dest="ledger_ttl",
        type=seconds,
        default=600.0,
        metavar="SECONDS",
        help="seconds an in-flight placement is charged at most while its pods do not appear "
        "(default 600; as placer submit's --in-flight-ttl; --ledger-ttl is its older name)",
    )
    placing.add_argument(
        "--no-create-namespace",
        "--no-create-namespaces",
        dest="no_create_namespaces",
        action="store_true",
        help="never create a workload's namespace on a member (a missing one fails there; as "
        "placer submit's --no-create-namespace; --no-create-namespaces is its older name)",
    )
    placing.add_argument(
        "--workers",
        type=count(1, 256),
        default=8,
        metavar="N",
        help="threads writing records (default 8)",
    )
    add_reservation_options(parser.add_argument_group("reservations (docs/reservations.md)"))
    ops = parser.add_argument_group("operations")
    ops.add_argument(
        "--metrics-port",
        type=port,
        default=8080,
        metavar="N",
        help="port of /metrics, /healthz, /readyz and /v1/* (default 8080; 0 = any free port)",
    )
    ops.add_argument(
        "--bind", type=address, default="0.0.0.0", metavar="ADDRESS", help="default 0.0.0.0"
    )
    ops.add_argument(
        "--identity", metavar="NAME", help="name in the Lease (default: $POD_NAME or host-pid)"
    )
    ops.add_argument(
        "--lease-namespace",
        default="placer-system",
        metavar="NS",
        help="namespace of the leader-election Lease on the hub (default placer-system)",
    )
    ops.add_argument(
        "--lease-name",
        default="placer-controller",
        metavar="NAME",
        help="name of the Lease (default placer-controller)",
    )
    ops.add_argument(
        "--lease-duration",
        type=seconds,
        default=15.0,
        metavar="SECONDS",
        help="how long a Lease not renewed stays taken (default 15)",
    )
    ops.add_argument(
        "--renew-deadline",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="the leader stops acting if it cannot renew for this long (default 10)",
    )
    ops.add_argument(
        "--retry-period",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="seconds between tries to take or renew the Lease (default 2)",
    )
    ops.add_argument(
        "--no-leader-election",
        action="store_true",
        help="act without a Lease (only for a single replica)",
    )
    ops.add_argument(
        "--log-format",
        choices=("json", "text"),
        default="json",
        help="one JSON object per line, or text for people (default json)",
    )
    ops.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="default info",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from placer.controller import (
        BackoffSettings,
        Controller,
        ControllerSettings,
        Endpoints,
        HttpServer,
        LeaseSettings,
        Metrics,
    )
    from placer.controller.logs import configure_logging
    from placer.controller.settings import default_identity, hub_id
    from placer.definitions import Catalog
    from placer.kube import ClientSettings, load_kubeconfigs, open_client

    policies: list[PlacementPolicy] = []
    for path in args.policy:
        policies.extend(load_policies(path))
    catalog = Catalog.load(args.catalog)
    hub_sets = load_kubeconfigs(args.hub_kubeconfig or args.kubeconfig)
    hub_info = hub_sets.context(args.hub_context)
    fleet = _members(fleet_config_from_args(args), args, hub_info.server)
    kept = args.reserve_horizon_cluster
    if kept is not None and kept not in fleet.names:
        raise UsageError(
            f"--reserve-horizon-cluster {kept}: no such member (members: "
            f"{', '.join(fleet.names) or 'none'})",
            hint="name one of the members, or leave it out to keep the one with the most GPUs",
        )
    try:
        settings = ControllerSettings(
            hub=args.hub_name or hub_id(args.hub_context),
            identity=args.identity or default_identity(os.environ),
            batch_window=args.batch_window,
            max_batch=args.max_batch,
            grace_period=args.grace_period,
            resync_interval=args.resync_interval,
            capacity=args.capacity,
            ledger_ttl=args.ledger_ttl,
            solve_time_limit=args.time_limit,
            solver=args.solver,
            preemption=not args.no_preemption,
            workers=args.workers,
            create_namespaces=not args.no_create_namespaces,
            gather_timeout=min(args.timeout, DEFAULT_TIMEOUT),
            lease=LeaseSettings(
                name=args.lease_name,
                namespace=args.lease_namespace,
                duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            ),
            backoff=BackoffSettings(),
            leader_election=not args.no_leader_election,
            reservations=reservation_policy(args),
            rebalance=rebalance_policy(
                args, not args.no_preemption, "with preemption: not with --no-preemption"
            ),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level, fmt=args.log_format)
    hub = open_client(
        hub_sets,
        args.hub_context,
        name="hub",
        settings=ClientSettings(pool_size=settings.hub_connections, user_agent="placer-controller"),
    )
    metrics = Metrics(process=True)
    controller = Controller(
        hub, fleet, settings, catalog=catalog, policies=policies, metrics=metrics
    )
    try:
        server = HttpServer(
            Endpoints(
                healthy=controller.healthy,
                ready=controller.ready,
                metrics=metrics.exposition,
                fleet=controller.fleet_document,
                placements=controller.placements_document,
            ),
            host=args.bind,
            port=args.metrics_port,
        ).start()
    except OSError as exc:  # the port is taken, the address is not this host's...
        hub.close()
        raise PlacerError(
            f"cannot serve /metrics on {args.bind}:{args.metrics_port}: {exc.strerror or exc}",
            hint="choose a free port with --metrics-port (0 = any free port) or an address of "
            "this host with --bind",
        ) from None
    logging.getLogger("placer.controller").info(
        "serving /metrics, /healthz, /readyz and /v1/* on %s",
        server.url,
        extra={"event": "serving"},
    )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        return controller.run(stop)
    finally:
        server.stop()
        hub.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def add_reservation_options(group: Any) -> None:
    """The ``--reserve-*`` flags (the names ``placer simulate`` uses)."""
    group.add_argument(
        "--reserve-after",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="a gang waiting this long gets a reservation: the cluster and nodes where it "
        "starts earliest, which other work then uses only if it is expected to be done by "
        "then (backfill); default: no reservations",
    )
    group.add_argument(
        "--reserve-priority",
        type=int,
        default=None,
        metavar="P",
        help="with --reserve-after: a gang of priority P or more gets one at once",
    )
    group.add_argument(
        "--reserve-min-gpus",
        type=float,
        default=None,
        metavar="N",
        help="with --reserve-after: only gangs asking at least N GPUs get one (default 0)",
    )
    group.add_argument(
        "--max-reservations",
        type=count(1, 1000, "a number of reservations"),
        default=None,
        metavar="N",
        help="with --reserve-after: reservations held at once (default 1)",
    )
    group.add_argument(
        "--reservation-grace",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="with --reserve-after: how long past its start a reservation holds while its gang "
        "still cannot start, before it is planned again (default 60)",
    )
    add_reserve_preempt_options(group, ", never a queue's in-quota work for another queue")
    add_reserve_horizon_options(group)


def reservation_policy(args: argparse.Namespace) -> Any:
    """The ``--reserve-*`` flags as a ReservationPolicy (``None`` without --reserve-after)."""
    others = {
        "--reserve-priority": args.reserve_priority,
        "--reserve-min-gpus": args.reserve_min_gpus,
        "--max-reservations": args.max_reservations,
        "--reservation-grace": args.reservation_grace,
        "--reserve-preempt-after": args.reserve_preempt_after,
        "--reserve-preempt-slack": args.reserve_preempt_slack,
        "--reserve-horizon": args.reserve_horizon,
        "--reserve-horizon-cluster": args.reserve_horizon_cluster,
    }
    if args.reserve_after is None:
        given = [flag for flag, value in others.items() if value is not None]
        if given:
            raise UsageError(
                f"{', '.join(given)} needs --reserve-after",
                hint="--reserve-after SECONDS turns reservations on (docs/reservations.md)",
            )
        return None
    return shared_reservation_policy(
        args,
        min_gpus=args.reserve_min_gpus or 0.0,
        max_reservations=args.max_reservations or 1,
        grace_s=DEFAULT_RESERVATION_GRACE
        if args.reservation_grace is None
        else args.reservation_grace,
    )


def _members(config: FleetConfig, args: argparse.Namespace, hub_server: str) -> FleetConfig:
    """The member clusters: the fleet options, without the hub."""
    sources: Sequence[Any] = config.clusters
    if not args.context and not args.fleet:
        sources = [s for s in sources if s.name != args.hub_context]
    for source in sources:
        if source.kubeconfig is None:
            continue
        try:
            server = source.kubeconfig.context(source.context).server
        except Exception:  # reported as the member's problem when it is used
            continue
        if _same_server(server, hub_server):
            raise UsageError(
                f"member {source.name} is the hub itself ({server})",
                hint="the hub's objects and their copies would have the same names; "
                "leave the hub out of the members",
            )
    if not sources:
        raise UsageError(
            "no member cluster besides the hub",
            hint="give the members with --kubeconfig/--context or --fleet",
        )
    return replace(config, clusters=tuple(sources))  # (with the fleet file's accelerators)


def _same_server(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")
