"""memoryd's MCP bridge (memoryd.client.mcp) driven by the MCP SDK's own client: over stdio,
spawning ``memoryd-mcp`` as an MCP host does, and once over streamable HTTP (``memoryd mcp``),
against the suite's real server. Every tool works, the agent's view holds through the bridge,
and failures come back as tool errors with the server's reason."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from memoryd.client import TLS, MemorydClient
from memoryd.v1 import memory_pb2 as pb

from ..support_tls import Authority
from ..support import MEMORYD, ServerProcess, free_port, full_view, put_view, rule, token_for, unique, wait_until

BRIDGE = str(Path(sys.executable).parent / "memoryd-mcp")

Bridge = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def bridge(server: ServerProcess, tmp_path: Path) -> Bridge:
    """``bridge(token, **variables)``: an MCP client session with a ``memoryd-mcp`` it spawned over
    stdio, configured as an MCP host configures it (environment variables only; the suite's
    server unless MEMORYD_ADDR says otherwise)."""

    @asynccontextmanager
    async def spawn(token: str, **variables: str) -> AsyncIterator[Client]:
        params = StdioServerParameters(command=BRIDGE, cwd=tmp_path,
                                       env={"MEMORYD_ADDR": server.target, "MEMORYD_TOKEN": token, **variables})
        with (tmp_path / "bridge.log").open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                yield client

    return spawn


@pytest.fixture
def token(channel: grpc.Channel, key_file: Path, tenant: str) -> str:
    put_view(channel, key_file, tenant, full_view("mcp-agent"))
    return token_for(key_file, tenant, "mcp-agent")


def answer(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's JSON answer (the structured content and the text agree)."""
    assert not result.is_error, result.content
    assert result.structured_content == json.loads(result.content[0].text)  # type: ignore[union-attr]
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return text


async def test_the_four_tools_are_listed_with_documented_input_schemas(bridge: Bridge, token: str):
    async with bridge(token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(tools) == ["forget", "list", "recall", "remember"]
    assert tools["remember"].input_schema["required"] == ["subject", "text"]
    assert tools["remember"].input_schema["properties"]["category"]["enum"] == [
        "fact", "preference", "constraint", "goal", "context", "event", "decision"]
    for tool in tools.values():
        assert tool.description
        assert all(p.get("description") for p in tool.input_schema["properties"].values()), tool.name


async def test_remember_recall_list_and_forget_through_stdio(bridge: Bridge, token: str, server: ServerProcess):
    async with bridge(token) as client:
        stored = answer(await client.call_tool("remember", {
            "subject": "alice", "text": "Alice is vegetarian and never eats meat", "category": "constraint",
            "key": "diet", "tags": ["food"]}))
        assert (stored["outcome"], stored["stored"], stored["indexed"]) == ("created", True, True)
        answer(await client.call_tool("remember", {"subject": "alice", "text": "Alice prefers window seats on trains",
                                                   "category": "preference", "key": "seat"}))

        recalled = answer(await client.call_tool("recall", {"subject": "alice", "query": "is Alice vegetarian?",
                                                            "top_k": 1}))
        assert [m["text"] for m in recalled["memories"]] == ["Alice is vegetarian and never eats meat"]
        first = recalled["memories"][0]
        assert (first["id"], first["category"], first["key"], first["tags"]) == (stored["memory_id"], "constraint",
                                                                                 "diet", ["food"])
        assert first["relevance"] > 0 and "close in meaning" in first["why"]
        assert "Alice is vegetarian" in recalled["block"] and recalled["nothing_relevant"] is False
        by_context = answer(await client.call_tool("recall", {"subject": "alice", "context": [
            {"speaker": "user", "text": "Book me a train to Lyon"}, {"speaker": "assistant", "text": "Which seat?"},
            {"speaker": "user", "text": "You know which seat I like on trains"}]}))
        assert "Alice prefers window seats on trains" in [m["text"] for m in by_context["memories"]]

        listed = answer(await client.call_tool("list", {"subject": "alice", "categories": ["preference"]}))
        assert [m["key"] for m in listed["memories"]] == ["seat"]
        page = answer(await client.call_tool("list", {"subject": "alice", "page_size": 1}))
        assert len(page["memories"]) == 1 and page["next_page_token"]

        forgotten = answer(await client.call_tool("forget", {"subject": "alice", "key": "diet"}))
        assert (forgotten["forgotten"], forgotten["verified"]) == (1, True)
        again = answer(await client.call_tool("recall", {"subject": "alice", "query": "is Alice vegetarian?",
                                                         "categories": ["constraint"]}))
        assert (again["memories"], again["block"], again["nothing_relevant"]) == ([], "", True)
        by_id = answer(await client.call_tool("forget", {"subject": "alice", "memory_id": page["memories"][0]["id"]}))
        assert by_id["forgotten"] == 1
    # What the bridge did is what the server holds, seen by a direct client with the same token.
    with MemorydClient(server.target, token=token) as direct:
        assert list(direct.memory_view(subject="alice").memories) == []


def _preference_reader(server: ServerProcess, channel: grpc.Channel, key_file: Path, tenant: str, token: str,
                       subject: str, drink: str, allergy: str) -> str:
    """A drink preference and an allergy (a constraint) of ``subject``, written with the full
    view's ``token``; and the token of a support bot that reads and writes preferences only."""
    with MemorydClient(server.target, token=token) as writer:
        writer.write(subject=subject, consistency=2, items=[
            pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key="drink", text=drink),
            pb.MemoryDraft(category=pb.CATEGORY_CONSTRAINT, key="health", text=allergy)])
    put_view(channel, key_file, tenant, full_view("support-bot", read_rules=[rule("preference")],
                                                  write_rules=[rule("preference")]))
    return token_for(key_file, tenant, "support-bot")


async def test_a_view_that_hides_a_category_hides_it_through_the_bridge(bridge: Bridge, channel: grpc.Channel,
                                                                        key_file: Path, tenant: str, token: str,
                                                                        server: ServerProcess):
    reader = _preference_reader(server, channel, key_file, tenant, token, "bob", "Bob drinks green tea every morning",
                                "Bob is allergic to peanuts")
    with MemorydClient(server.target, token=reader) as direct:
        directly_listed = sorted(m.text for m in direct.memory_view(subject="bob").memories)
        directly_recalled = [s.memory.text for s in direct.recall(subject="bob", query="is Bob allergic to peanuts?",
                                                                  render_block=True).memories]
    async with bridge(reader) as client:
        listed = answer(await client.call_tool("list", {"subject": "bob"}))
        recalled = answer(await client.call_tool("recall", {"subject": "bob", "query": "is Bob allergic to peanuts?"}))
        asked = error_text(await client.call_tool("list", {"subject": "bob", "categories": ["constraint"]}))
        refused = error_text(await client.call_tool("remember", {
            "subject": "bob", "text": "Bob is allergic to cats", "category": "constraint"}))
        erase = answer(await client.call_tool("forget", {"subject": "bob", "key": "health"}))
    assert sorted(m["text"] for m in listed["memories"]) == directly_listed == ["Bob drinks green tea every morning"]
    assert [m["text"] for m in recalled["memories"]] == directly_recalled
    assert "peanut" not in json.dumps(recalled) and "peanut" not in json.dumps(listed)
    # Asking for the hidden category by name is refused, as the server refuses it.
    assert "PERMISSION_DENIED (VIEW_DENIED)" in asked and "peanut" not in asked
    assert refused.startswith("Error executing tool remember: PERMISSION_DENIED (VIEW_DENIED)")
    # Forgetting what the view does not read forgets nothing, and says nothing of it.
    assert erase["forgotten"] == 0
    with MemorydClient(server.target, token=token) as writer:
        assert [m.text for m in writer.memory_view(subject="bob").memories if m.key == "health"] == [
            "Bob is allergic to peanuts"]


async def test_server_errors_come_back_as_tool_errors_with_their_reason(bridge: Bridge, token: str):
    async with bridge(token) as client:
        invalid = error_text(await client.call_tool("remember", {"subject": "not a subject!", "text": "x"}))
        missing = error_text(await client.call_tool("recall", {"subject": "alice"}))
        unknown = answer(await client.call_tool("forget", {"subject": "alice",
                                                           "memory_id": "00000000-0000-4000-8000-000000000000"}))
    assert "INVALID_ARGUMENT (INVALID_REQUEST)" in invalid and "subject:" in invalid and "request_id" in invalid
    assert "INVALID_ARGUMENT" in missing
    assert unknown["forgotten"] == 0
    async with bridge("not-a-token") as client:
        unauthenticated = error_text(await client.call_tool("list", {"subject": "alice"}))
    assert "UNAUTHENTICATED (TOKEN_INVALID)" in unauthenticated and "MEMORYD_TOKEN" in unauthenticated


async def test_bad_tool_input_gets_a_clear_error_before_any_call(bridge: Bridge, token: str):
    async with bridge(token) as client:
        no_subject = error_text(await client.call_tool("remember", {"text": "Lyon"}))
        bad_category = error_text(await client.call_tool("remember", {"subject": "a", "text": "x", "category": "mood"}))
        too_many = error_text(await client.call_tool("recall", {"subject": "a", "query": "x", "top_k": 1000}))
        both = error_text(await client.call_tool("forget", {"subject": "a", "memory_id": "m", "key": "k"}))
    assert "subject" in no_subject and "required" in no_subject.lower()
    assert "category" in bad_category and "'fact'" in bad_category
    assert "top_k" in too_many and "100" in too_many
    assert "exactly one of memory_id or key" in both


async def test_the_bridge_speaks_mutual_tls_from_the_variables_the_cli_reads(bridge: Bridge, tls_server: ServerProcess,
                                                                             ca: Authority, key_file: Path,
                                                                             tmp_path: Path):
    tenant = unique("tenant")
    ca_file = tls_server.env["MEMORYD_TLS_CLIENT_CA_FILE"]
    admin, agent = ca.agent(tenant, "ops-admin"), ca.agent(tenant, "mcp-agent")
    (tmp_path / "agent.pem").write_bytes(agent.cert_pem)
    (tmp_path / "agent-key.pem").write_bytes(agent.key_pem)
    with MemorydClient(tls_server.target, token=token_for(key_file, tenant, "ops-admin", roles=("admin",)),
                       tls=TLS(ca_cert=ca_file, client_cert=admin.cert_pem, client_key=admin.key_pem,
                               server_name="localhost")) as operator:
        operator.put_view(view=full_view("mcp-agent"))
    # No token: the agent's certificate names it.
    async with bridge("", MEMORYD_ADDR=tls_server.target, MEMORYD_TLS_CA=ca_file, MEMORYD_TLS_SERVER_NAME="localhost",
                      MEMORYD_TLS_CLIENT_CERT=str(tmp_path / "agent.pem"),
                      MEMORYD_TLS_CLIENT_KEY=str(tmp_path / "agent-key.pem")) as client:
        stored = answer(await client.call_tool("remember", {"subject": "dave", "text": "Dave drinks tea",
                                                            "category": "preference", "key": "drink"}))
        recalled = answer(await client.call_tool("recall", {"subject": "dave", "keys": ["drink"]}))
    assert stored["outcome"] == "created"
    assert [m["text"] for m in recalled["memories"]] == ["Dave drinks tea"]


def test_the_bridge_without_a_token_stops_with_a_clear_error(server: ServerProcess, tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "MEMORYD_ADDR": server.target}
    done = subprocess.run([BRIDGE], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("memoryd-mcp: error: no token: --token and MEMORYD_TOKEN are empty")
    assert "hint: " in done.stderr and "Traceback" not in done.stderr


async def test_memoryd_mcp_over_streamable_http(server: ServerProcess, token: str, tmp_path: Path):
    port = free_port()
    with (tmp_path / "http.log").open("w") as log:
        process = subprocess.Popen([*MEMORYD, "mcp", "--addr", server.target, "--token", token, "--transport",
                                    "streamable-http", "--http-addr", f"127.0.0.1:{port}"],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        wait_until(lambda: _listening(port) or process.poll() is not None, timeout=60, what="the bridge listens")
        assert process.poll() is None, (tmp_path / "http.log").read_text()
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            answer(await client.call_tool("remember", {"subject": "carol", "text": "Carol lives in Lyon",
                                                       "key": "home_city"}))
            recalled = answer(await client.call_tool("recall", {"subject": "carol", "keys": ["home_city"]}))
    finally:
        process.terminate()
        process.wait(30)
    assert [(m["text"], m["why"]) for m in recalled["memories"]] == [("Carol lives in Lyon", "exact key match")]


async def test_with_caller_tokens_each_http_caller_is_answered_through_its_own_view(
        server: ServerProcess, channel: grpc.Channel, key_file: Path, tenant: str, token: str, tmp_path: Path):
    reader = _preference_reader(server, channel, key_file, tenant, token, "erin", "Erin drinks oolong",
                                "Erin is allergic to shellfish")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    # A bridge with no token of its own: each caller brings one.
    with (tmp_path / "http.log").open("w") as log:
        process = subprocess.Popen([BRIDGE, "--addr", server.target, "--transport", "streamable-http", "--http-addr",
                                    f"127.0.0.1:{port}", "--caller-tokens"], env={"PATH": "/usr/bin:/bin"},
                                   cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    async def listed(caller: str) -> CallToolResult:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {caller}"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await client.call_tool("list", {"subject": "erin"})

    try:
        wait_until(lambda: _listening(port) or process.poll() is not None, timeout=60, what="the bridge listens")
        assert process.poll() is None, (tmp_path / "http.log").read_text()
        everything = answer(await listed(token))
        narrow = answer(await listed(reader))
        forged = error_text(await listed("not-a-token"))
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                        headers={"Accept": "application/json, text/event-stream"})
    finally:
        process.terminate()
        process.wait(30)
    assert sorted(m["text"] for m in everything["memories"]) == ["Erin drinks oolong", "Erin is allergic to shellfish"]
    assert [m["text"] for m in narrow["memories"]] == ["Erin drinks oolong"]
    assert "shellfish" not in json.dumps(narrow)
    assert "UNAUTHENTICATED (TOKEN_INVALID)" in forged
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in anonymous.json()["message"]


def test_caller_tokens_are_refused_over_stdio(tmp_path: Path):
    done = subprocess.run([BRIDGE, "--caller-tokens"], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("memoryd-mcp: error: --caller-tokens needs --transport streamable-http")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
