"""`memoryd bench extraction` with its scripted model server, end to end on a real server: the
embedded run on the shipped set, and a run with --addr against a server this test starts. The
matching, leak and summary arithmetic and the shipped set: tests/domain/test_bench_extraction.py."""

from __future__ import annotations

import contextlib
import io
import json
import urllib.error
import urllib.request
from datetime import UTC
from typing import Any

import pytest

import asyncio
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from memoryd.bench.extraction._extraction_set import DEFAULT_DIALOGUES, load_dialogues
from memoryd.bench.extraction._scripted_model import ScriptedModel
from memoryd.server.ingest._extraction_llm import transcript
from memoryd.storage import migrate
from ..domain.test_bench_extraction import _parser
from ..support import ServerProcess, server_env, token_for, unique


def test_the_scripted_model_answers_the_dialogue_whose_turns_the_server_sends():
    dialogues = load_dialogues(DEFAULT_DIALOGUES)
    wanted = dialogues[-1]
    turns = wanted.turns  # the domain's own Turn, as the server reads them
    with ScriptedModel(dialogues) as model:
        def post(user: str) -> tuple[int, dict[str, Any]]:
            body = json.dumps({"model": "m", "messages": [{"role": "system", "content": "extract"},
                                                          {"role": "user", "content": user}]}).encode()
            request = urllib.request.Request(model.base_url + "/chat/completions", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                with error:
                    return error.code, json.loads(error.read())

        # The server writes relative dates out in the transcript ("后天(2026-06-12)"): still found.
        status, answer = post(transcript(turns, UTC))
        assert status == 200
        assert json.loads(answer["choices"][0]["message"]["content"]) == {"items": wanted.scripted_answer}
        status, _ = post("[t1] (2026-01-01 00:00 Thu) user: something no dialogue says")
        assert status == 400 and model.requests == 2 and model.unmatched == 1


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench-extraction") / "out.json"
    args = _parser().parse_args(["bench", "extraction", "--scripted", "--wait", "120", "--json", str(out),
                                 "--no-progress"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = args.run(args)
    return code, printed.getvalue(), json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.slow
def test_a_scripted_run_on_the_whole_set_reports_recall_precision_and_drops(scripted_run):
    code, printed, document = scripted_run
    assert code == 0, printed
    for label in ("recall", "precision", "forbidden leaks:", "dropped, all jobs:", "seconds per job"):
        assert label in printed, label
    assert set(document["by_language"]) == {"en", "zh"} and document["all"]["dialogues"] == 12
    assert 0 < document["all"]["recall"] <= 1 and 0 < document["all"]["precision"] <= 1
    assert document["jobs"]["failed"] == [] and document["model"]["requests"] == 12
    dropped = document["dropped"]
    assert dropped.get("pii") and dropped.get("instruction_like"), dropped
    assert any(reason.startswith("invalid_") for reason in dropped), dropped
    assert document["seconds_per_job"]["max"] >= document["seconds_per_job"]["p50"] > 0
    assert document["server"]["embedded"] is True and isinstance(document["leaks_by_kind"], dict)


@pytest.mark.slow
def test_no_forbidden_string_is_stored_in_a_scripted_run(scripted_run):
    """Anywhere the API returns it: the scripted answers put a passport number, e-mail addresses
    and phone numbers in entities and tags (issue 38), which the server must screen too."""
    code, printed, document = scripted_run
    assert code == 0 and "forbidden leaks: 0" in printed
    assert document["forbidden_leaks"] == []


# A word no screen of memoryd drops (not a number, not an instruction, not a passing state), so
# what the bench finds here does not depend on the server's filters: only on where it reads.
CODEWORD = "Quillfeather"
CAT = {"id": "en-cat", "language": "en",
       "turns": [{"turn_id": "t1", "speaker": "user", "text": f"My cat {CODEWORD} only eats fish.",
                  "time": "2026-11-18T09:00:00Z"},
                 {"turn_id": "t2", "speaker": "assistant", "text": "Noted!", "time": "2026-11-18T09:01:00Z"},
                 {"turn_id": "t3", "speaker": "user", "text": "Her vet is in Lyon.", "time": "2026-11-18T09:02:00Z"}],
       "expected": [{"category": "fact", "key": "pet", "must": ["cat"]}],
       "forbidden": [CODEWORD],
       "recall_queries": ["cat"],
       "scripted_answer": [
           {"category": "fact", "key": "pet", "text": f"The user has a cat named {CODEWORD}.", "importance": 0.6,
            "confidence": 0.9, "stability": "stable", "sensitive": "none", "entities": [],
            "source_turn_ids": ["t1"], "tags": []},
           {"category": "preference", "key": "pet_food", "text": "The user's cat only eats fish.",
            "importance": 0.5, "confidence": 0.9, "stability": "stable", "sensitive": "none",
            "entities": [CODEWORD], "source_turn_ids": ["t1"], "tags": []},
           {"category": "fact", "key": f"{CODEWORD.lower()}_vet", "text": "The user's cat's vet is in Lyon.",
            "importance": 0.5, "confidence": 0.9, "stability": "stable", "sensitive": "none",
            "entities": ["Lyon"], "source_turn_ids": ["t3"], "tags": []}]}


@pytest.fixture(scope="module")
def running_server(postgres, key_file, tmp_path_factory) -> Iterator[tuple[ServerProcess, Path, Path]]:
    """A server someone started, with its own database and extraction model (the scripted one,
    answering the CAT set): (server, the set, the key file its admin tokens are signed with)."""
    folder = tmp_path_factory.mktemp("bench-extraction-addr")
    dialogues = folder / "cat.json"
    dialogues.write_text(json.dumps({"format": "memoryd-extraction-set", "version": 1, "dialogues": [CAT]}))
    name = unique("db").replace("-", "_")
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = make_conninfo(postgres.owner_dsn, dbname=name)
    asyncio.run(migrate(dsn))
    with ScriptedModel(load_dialogues(dialogues)) as model:
        env = server_env(MEMORYD_DATA_DIR=str(folder / "data"), MEMORYD_POSTGRES_DSN=dsn,
                         MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_EXTRACTION_URL=model.base_url,
                         MEMORYD_EXTRACTION_MODEL="scripted", MEMORYD_EXTRACTION_API_KEY="")
        process = ServerProcess(env, folder / "server.log").start()
        try:
            yield process, dialogues, key_file
        finally:
            assert process.stop() == 0
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _run(argv: list[str], out: Path) -> tuple[int, str, dict[str, Any]]:
    args = _parser().parse_args(["bench", "extraction", *argv, "--json", str(out), "--no-progress"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = args.run(args)
    return code, printed.getvalue(), json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.slow
def test_with_addr_the_run_uses_that_server_and_finds_a_forbidden_string_in_every_field_it_was_stored_in(
        running_server, tmp_path, monkeypatch):
    server, dialogues, key_file = running_server
    admin = token_for(key_file, unique("tenant"), "ops-admin", roles=("admin",))
    monkeypatch.setenv("MEMORYD_ADMIN_TOKEN", admin)
    code, printed, document = _run(["--addr", server.target, "--dialogues", str(dialogues), "--wait", "60"],
                                   tmp_path / "out.json")
    assert code == 0, printed
    assert document["server"] == {"embedded": False, "addr": server.target, "tls": False}
    assert document["jobs"]["succeeded"] == 1 and document["all"]["matched"] == 1
    # The word was stored as a text, as a tag (the entity), and in a key: each is found where it
    # is, in MemoryView, every version, Recall's memories and the prompt block (which shows texts).
    assert document["leaked_strings"] == 1
    assert set(document["leaks_by_kind"]) == {"text", "tags", "key", "history", "recall", "block"}, document
    values = {(leak["kind"], leak["value"]) for leak in document["forbidden_leaks"]}
    assert ("tags", f"entity:{CODEWORD.lower()}") in values and ("key", f"{CODEWORD.lower()}_vet") in values
    assert "forbidden leaks: 1 strings" in printed and "the server's own at" in printed

    # A second run on the same tenant writes to subjects of its own: it scores only what it stored.
    code, printed, again = _run(["--addr", server.target, "--dialogues", str(dialogues), "--wait", "60"],
                                tmp_path / "again.json")
    assert code == 0 and again["all"]["stored"] == document["all"]["stored"]
