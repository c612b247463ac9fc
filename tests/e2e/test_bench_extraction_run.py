"""`memoryd bench extraction` with its scripted model server, end to end on a real server. The
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

from memoryd.bench._extraction_set import DEFAULT_DIALOGUES, load_dialogues
from memoryd.bench._scripted_model import ScriptedModel
from memoryd.server._extraction_llm import transcript
from ..domain.test_bench_extraction import _parser


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


@pytest.mark.slow
def test_no_forbidden_string_is_stored_in_a_scripted_run(scripted_run):
    code, printed, document = scripted_run
    assert code == 0 and "forbidden leaks: 0" in printed
    assert document["forbidden_leaks"] == []
