"""The MCP bridge's options and messages, alone: how ``memoryd-mcp`` / ``memoryd mcp`` read their
options and environment into settings, what a user without the SDK is told, and how a failed
memoryd call reads as a tool error (the bridge against a real server: tests/clients/test_mcp.py)."""

from __future__ import annotations

import argparse
import os
import sys

import grpc
import pytest

from memoryd.client import InvalidArgument
from memoryd.client.cli import OptionError, connection_options, token_options
from memoryd.client.mcp import bridge_options, run, settings_from


@pytest.fixture(autouse=True)
def _no_memoryd_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The options read the environment when the parser is built: start each test from none."""
    for variable in [v for v in os.environ if v.startswith("MEMORYD_")]:
        monkeypatch.delenv(variable)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(parents=[connection_options(), token_options(admin=False), bridge_options()])
    return parser.parse_args(list(argv))


def test_the_bridge_reads_the_variables_every_memoryd_command_reads(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMORYD_ADDR", "0.0.0.0:6001")  # a listen address, as in a container: dialled on loopback
    monkeypatch.setenv("MEMORYD_TOKEN", " agent-token\n")
    monkeypatch.setenv("MEMORYD_TLS_CA", "/etc/memoryd/ca.pem")
    monkeypatch.setenv("MEMORYD_TLS_SERVER_NAME", "memoryd.internal")
    settings = settings_from(_parse())
    assert (settings.target, settings.token, settings.transport) == ("127.0.0.1:6001", "agent-token", "stdio")
    assert settings.tls is not None and (str(settings.tls.ca_cert), settings.tls.server_name) == (
        "/etc/memoryd/ca.pem", "memoryd.internal")


def test_with_caller_tokens_the_bridge_needs_no_token_of_its_own_and_ignores_one():
    settings = settings_from(_parse("--transport", "streamable-http", "--caller-tokens"))
    assert settings.caller_tokens and settings.token == ""
    # A token given as well is not used for anyone: each caller's own is.
    assert settings_from(_parse("--token", "t", "--transport", "streamable-http", "--caller-tokens")).token == ""


def test_the_bearer_header_is_read_as_http_sends_it():
    from memoryd.client.mcp._tools import bearer

    assert bearer({"authorization": "Bearer abc.def"}) == "abc.def"
    assert bearer({"authorization": "bearer  abc "}) == "abc"
    assert [bearer(h) for h in ({}, None, {"authorization": "Basic abc"}, {"authorization": "Bearer "})] == [None] * 4


def test_streamable_http_takes_host_and_port(monkeypatch: pytest.MonkeyPatch):
    settings = settings_from(_parse("--token", "t", "--transport", "streamable-http", "--http-addr", "[::1]:9000"))
    assert (settings.transport, settings.http_host, settings.http_port) == ("streamable-http", "::1", 9000)
    with pytest.raises(OptionError, match="not HOST:PORT"):
        settings_from(_parse("--token", "t", "--http-addr", "8765"))


def test_without_a_token_the_bridge_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch, tmp_path):
    with pytest.raises(OptionError, match="no token") as refused:
        settings_from(_parse("--token-file", str(tmp_path / "none.token")))
    assert "memoryd token issue" in refused.value.hint


def test_without_the_sdk_the_bridge_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    # As if `pip install memoryd-client` without [mcp] (also when another test loaded the SDK already).
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "memoryd.client.mcp._server", raising=False)
    monkeypatch.delitem(sys.modules, "memoryd.client.mcp._tools", raising=False)
    with pytest.raises(OptionError) as refused:
        run(settings_from(_parse("--token", "t")))
    assert "memoryd-client[mcp]" in refused.value.hint


def test_a_failed_call_reads_as_one_line_with_its_reason_each_field_once_and_the_request_id():
    from memoryd.client.mcp._tools import describe

    error = InvalidArgument("invalid request: subject: is required", code=grpc.StatusCode.INVALID_ARGUMENT,
                            reason="INVALID_REQUEST", request_id="r-1",
                            violations={"subject": "is required", "items[0].text": "is required"})
    assert describe(error) == ("INVALID_ARGUMENT (INVALID_REQUEST): invalid request: subject: is required; "
                               "items[0].text: is required [request_id r-1]")
