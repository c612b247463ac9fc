"""Binding a gRPC server's listen address: the port is this process's alone, and an address it
cannot have is one line saying why.

gRPC's core sets ``SO_REUSEPORT`` on a listening socket unless told not to: a second server
on a port in use then binds it too, says it is listening, and the kernel hands each new
connection to either (a user saw 7 of 12 calls reach the wrong server). Every server memoryd
starts passes ``NO_PORT_SHARING``, so the second bind fails; two memoryd servers never share a
port, and there is no mode in which they do.

gRPC says only "Failed to bind" (its reason goes to its own log). A probe bind of the same
address, with the option gRPC's socket has, tells a port in use from a privileged port or an
address that is not this machine's. ``require_free_address`` probes before a process starts
its stores, so a taken port is refused at once rather than after the start-up. The probe is
racy, so the gRPC bind (``listen``) still decides, and probes again only to word its error (a
process that loses such a race shows gRPC's own log line above its one).
"""

from __future__ import annotations

import errno
import os
import socket

import grpc

__all__ = ["NO_PORT_SHARING", "ListenError", "listen", "require_free_address"]

NO_PORT_SHARING = ("grpc.so_reuseport", 0)

# errno -> (why, what to do with the setting named {setting})
_REASONS = {
    errno.EADDRINUSE: ("the port is in use (by another memoryd or another program)",
                       "stop what listens there, or give this one another address with {setting} "
                       "(two memoryd servers never share a port)"),
    errno.EACCES: ("permission denied (a port below 1024 needs privileges)",
                   "choose a port above 1023 with {setting}"),
    errno.EADDRNOTAVAIL: ("the host is not an address of this machine",
                          "listen on 127.0.0.1, 0.0.0.0 or one of this machine's addresses ({setting})"),
}


class ListenError(OSError):
    """An address a memoryd process cannot listen on; ``hint`` names the setting to change
    (the command line prints both, as for every error it knows the fix of)."""

    def __init__(self, addr: str, reason: str, hint: str) -> None:
        super().__init__(f"cannot listen on {addr}: {reason}")
        self.hint = hint


def require_free_address(addr: str, setting: str) -> None:
    """Raise ListenError if a probe cannot bind ``addr`` now (``setting`` configures it)."""
    failure = _probe(addr)
    if failure is not None:
        raise _error(addr, failure, setting)


def listen(server: grpc.aio.Server, addr: str, setting: str,
           credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind ``server`` (made with ``NO_PORT_SHARING``) to ``addr``; the port, or ListenError."""
    try:
        port = server.add_secure_port(addr, credentials) if credentials else server.add_insecure_port(addr)
    except RuntimeError:  # grpcio >= 1.50 raises; older ones returned 0
        port = 0
    if port == 0:
        failure = _probe(addr)
        if failure is None:
            raise ListenError(addr, "gRPC could not bind it", f"check {setting}")
        raise _error(addr, failure, setting)
    return port


def _error(addr: str, failure: int, setting: str) -> ListenError:
    reason, hint = _REASONS.get(failure, (os.strerror(failure), "check {setting}"))
    return ListenError(addr, reason, hint.format(setting=setting))


def _probe(addr: str) -> int | None:
    """The errno binding ``addr`` fails with now, by a probe socket like gRPC's; None when it
    can be bound, or when a probe cannot tell (a Unix socket, port 0)."""
    host, _, port = addr.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return None
    try:
        found = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return errno.EADDRNOTAVAIL
    failures = []
    for family, kind, proto, _, address in found:
        with socket.socket(family, kind, proto) as probe:
            # As gRPC's own socket: a port whose last connections are in TIME_WAIT is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                failures.append(exc.errno or errno.EINVAL)
    # gRPC listens if one of the addresses a name resolves to binds ('localhost' without IPv6);
    # one of them in use is refused all the same: the other server would answer some calls.
    if errno.EADDRINUSE in failures:
        return errno.EADDRINUSE
    return failures[0] if failures and len(failures) == len(found) else None
