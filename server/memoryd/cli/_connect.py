"""How the client commands reach a server: the connection options (address, TLS, mutual TLS)
and the token options — defined once in ``memoryd.client.cli``, shared with ``memoryd-mcp``, and
used here as the argparse parents of every command that talks to a server — and one way to open
the channel and read the token from them (the options and their variables are listed there).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from memoryd.client import MemorydClient, RetryPolicy
from memoryd.client.cli import connection_options, dialable, read_token, tls_settings, token_options

__all__ = ["client_for", "connection_options", "dialable", "open_channel", "read_token", "tls_settings",
           "token_options"]


def open_channel(args: argparse.Namespace, options: list[tuple[str, Any]] | None = None) -> grpc.Channel:
    """A channel to ``--addr``: plain, TLS, or mutual TLS, as the options say."""
    target = dialable(args.addr)
    tls = tls_settings(args)
    if tls is None:
        return grpc.insecure_channel(target, options=options or [])
    return grpc.secure_channel(target, tls.channel_credentials(), options=[*(options or []), *tls.channel_options()])


@contextmanager
def client_for(args: argparse.Namespace, *, admin: bool = False, options: list[tuple[str, Any]] | None = None,
               timeout: float = 30.0) -> Iterator[MemorydClient]:
    """``memoryd.client`` on the channel ``--addr`` and the TLS options describe, with the
    token ``read_token`` finds. One attempt per call: a person at a terminal sees an outage at
    once and decides whether to retry."""
    token = read_token(args, admin=admin)
    with open_channel(args, options) as channel, \
            MemorydClient(channel=channel, token=token or None, timeout=timeout,
                          retry=RetryPolicy(max_attempts=1)) as client:
        yield client
