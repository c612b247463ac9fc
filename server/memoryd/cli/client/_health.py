"""``memoryd health``: ask a server's grpc.health.v1 service whether it is serving.

Meant for container health checks and Kubernetes exec probes: no configuration, no token
(the health service answers without one), exit 0 when SERVING and 1 otherwise, one line.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .._connect import connection_options, dialable, open_channel
from .._errors import report, report_rpc_error


def add_health_command(commands: Any) -> None:
    health = commands.add_parser("health", help="check that a server answers its gRPC health service "
                                                "(exit 0 when SERVING; for probes)", parents=[connection_options()])
    health.add_argument("--service", default="",
                        help="a service name such as memoryd.v1.MemoryService, or liveness (the process answers, "
                             "for liveness probes) (default: the whole server, for readiness)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    health.add_argument("-q", "--quiet", action="store_true", help="print nothing when serving")
    health.add_argument("--json", action="store_true", help="print the answer as JSON (service, address, status)")
    health.set_defaults(run=_health)


def _health(args: argparse.Namespace) -> int:
    with open_channel(args) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
        except grpc.RpcError as error:
            report_rpc_error(error, dialable(args.addr))
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        report(f"{args.service or 'memoryd'} at {dialable(args.addr)} is {status}",
               "it is starting (a server waits up to index_ready_wait_seconds for Milvus) or shutting down, "
               "or (a worker) cannot reach PostgreSQL or Milvus or its loop has stalled: see its log")
        return 1
    if args.json:
        print(json.dumps({"service": args.service, "addr": dialable(args.addr), "status": status}))
    elif not args.quiet:
        print(f"{args.service or 'memoryd'} at {dialable(args.addr)}: {status}")
    return 0
