"""``memoryd health``: ask a server's grpc.health.v1 service whether it is serving.

Meant for container health checks and Kubernetes exec probes: no configuration, no token
(the health service answers without one), exit 0 when SERVING and 1 otherwise, one line.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ._errors import report, report_rpc_error


def add_health_command(commands: Any) -> None:
    health = commands.add_parser("health", help="check that a server answers its gRPC health service "
                                                "(exit 0 when SERVING; for probes)")
    health.add_argument("--addr", default=os.environ.get("MEMORYD_ADDR", "127.0.0.1:50051"),
                        help="host:port of the server (default: $MEMORYD_ADDR or 127.0.0.1:50051)")
    health.add_argument("--service", default="",
                        help="a service name such as memoryd.v1.MemoryService (default: the whole server)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    health.add_argument("--ca-file", type=Path, help="speak TLS, trusting this CA")
    health.add_argument("--cert-file", type=Path, help="client certificate (when the server requires one)")
    health.add_argument("--key-file", type=Path, help="the client certificate's key")
    health.add_argument("--server-name", default="", help="the name the server's certificate carries, when "
                                                          "it is not the host of --addr (e.g. a probe on loopback)")
    health.add_argument("-q", "--quiet", action="store_true", help="print nothing when serving")
    health.set_defaults(run=_health)


def _channel(args: argparse.Namespace) -> grpc.Channel:
    if args.ca_file is None:
        return grpc.insecure_channel(_dialable(args.addr))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=args.ca_file.read_bytes(),
        private_key=args.key_file.read_bytes() if args.key_file else None,
        certificate_chain=args.cert_file.read_bytes() if args.cert_file else None)
    options = [("grpc.ssl_target_name_override", args.server_name)] if args.server_name else []
    return grpc.secure_channel(_dialable(args.addr), credentials, options=options)


def _dialable(addr: str) -> str:
    # A listen address such as 0.0.0.0:50051 or [::]:50051 (MEMORYD_ADDR in a container) is
    # checked on loopback.
    host, _, port = addr.rpartition(":")
    return f"127.0.0.1:{port}" if host in ("0.0.0.0", "[::]", "") else addr


def _health(args: argparse.Namespace) -> int:
    with _channel(args) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
        except grpc.RpcError as error:
            report_rpc_error(error, _dialable(args.addr))
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        report(f"{args.service or 'memoryd'} at {_dialable(args.addr)} is {status}",
               "it is starting or shutting down, or (a worker) cannot reach PostgreSQL or Milvus or its "
               "loop has stalled: see its log")
        return 1
    if not args.quiet:
        print(f"{args.service or 'memoryd'} at {_dialable(args.addr)}: {status}")
    return 0
