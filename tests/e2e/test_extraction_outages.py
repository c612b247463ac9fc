"""Extraction when the model misbehaves for a while: down, overloaded, slow, or looping until
``max_tokens``. Nothing the user said is lost to it, and the model is not hammered."""

from __future__ import annotations

import json

from memoryd.v1 import memory_service_pb2 as svc

from ..support import unique
from ..support_fake_openai import Cut
from .test_extraction import dropped, extract, extraction_server, finished, item, turn


def test_an_answer_cut_off_by_a_loop_keeps_its_complete_items_and_counts_the_cut(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory) as rig:
        agent = rig.agent()
        subject = unique("subject")
        kept = [item("Alice lives in Lyon", "fact", "home_city"), item("Alice adopted a cat named Mochi")]
        loop = json.dumps(item("Alice adopted a cat named Mochi in Lyon"))
        content = json.dumps({"items": kept})[:-2] + ", " + loop[:loop.index("in Lyon")]  # cut inside a text
        rig.fake.script_chat(Cut(content))
        done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon and adopted Mochi, a cat")))
        assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED and done.attempts == 1
        assert dropped(done) == {"cut_off": 1}
        assert sorted(m.text for m in agent.list_all(subject)) == ["Alice adopted a cat named Mochi",
                                                                   "Alice lives in Lyon"]
