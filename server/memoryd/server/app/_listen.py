"""Binding a gRPC server's listen address: the port is this process's alone — except between
the processes of one ``memoryd serve --processes N``, which share it on purpose — and an
address a process cannot have is one line saying why.

gRPC's core sets ``SO_REUSEPORT`` on a listening socket unless told not to: a second server
on a port in use then binds it too, says it is listening, and the kernel hands each new
connection to either (a user saw 7 of 12 calls reach the wrong server). So every server memoryd
starts passes ``NO_PORT_SHARING``, and the second bind fails: two memoryd servers never share
a port.

The one deliberate exception is ``memoryd serve --processes N`` (``memoryd.cli``'s
``_processes``), one server per core for a deployment whose stores are external. Its parent
checks the address first, as any server does (``require_free_address``: a port held by another
memoryd or program is refused at once), then holds the port (``reserve_shared_port``: bound as
its children's sockets will be, never listening, so nothing is answered from it; port 0 becomes
one port for all of them) until the N children it starts have bound it with ``SHARED_PORT``;
the kernel then spreads new connections over them. Nothing else shares a port: another memoryd,
which never sets ``SO_REUSEPORT``, cannot bind theirs (only a program of the same user that
sets it itself could, as with any socket that does), and one that binds the port before they
do (the check is racy, as below) makes their binds fail.

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
from typing import Any

import grpc

__all__ = ["NO_PORT_SHARING", "SHARED_PORT", "ListenError", "SharedPort", "listen", "require_free_address",
           "reserve_shared_port"]

NO_PORT_SHARING = ("grpc.so_reuseport", 0)
SHARED_PORT = ("grpc.so_reuseport", 1)  # the children of `serve --processes` only

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


class SharedPort:
    """The port of one ``serve --processes``, held by its parent until its children listen:
    ``addr`` is the address they bind (host:port, the port picked when it was 0)."""

    def __init__(self, addr: str, sockets: list[socket.socket]) -> None:
        self.addr = addr
        self._sockets = sockets

    @property
    def port(self) -> int:
        return int(self.addr.rpartition(":")[2])

    def close(self) -> None:
        """Let go of the port: the children hold it now (or are gone)."""
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()


def reserve_shared_port(addr: str, setting: str) -> SharedPort:
    """Check ``addr`` as ``require_free_address`` does, then hold its port for the children of
    ``serve --processes`` (ListenError if it is not a host:port, or was taken meanwhile)."""
    host, _, port = addr.rpartition(":")
    if not port.isdigit():
        raise ListenError(addr, "several server processes share a TCP port", f"give {setting} as host:port")
    require_free_address(addr, setting)
    sockets: list[socket.socket] = []
    chosen = int(port)
    for family, kind, proto, _, address in _resolve(host, chosen):
        sock = socket.socket(family, kind, proto)
        # Bound as the children's gRPC sockets will be: sharing the port, and not kept off it by
        # the TIME_WAIT of a server stopped just before.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((address[0], chosen, *address[2:]))
        except OSError:
            sock.close()
            continue  # as gRPC: one of the addresses a name resolves to is enough
        chosen = sock.getsockname()[1]  # with port 0, the others take the port the first one got
        sockets.append(sock)
    if not sockets:
        raise _error(addr, errno.EADDRINUSE, setting)  # taken since the check
    return SharedPort(f"{host}:{chosen}", sockets)


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
        found = _resolve(host, int(port))
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


def _resolve(host: str, port: int) -> list[tuple[Any, ...]]:
    """The addresses a listener on host:port binds ('' or a wildcard: every interface)."""
    return socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
