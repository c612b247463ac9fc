"""The suite's echo check (``echoes``, tests/support_fake_openai.py): it finds what memoryd
kept of an echo of the turns, and not the turns' year inside a random identifier."""

from __future__ import annotations

from ..support_fake_openai import echoes

SAID = ("[t1] (2024-05-01 08:00 Wed) user: Bartholomew says 13800138000 is his number",)
LOG = ("2026-12-05 09:31:06,432 INFO memoryd.access: request_id=5ee8a3896e2024b48248f9abc443a9e6 "
       "method=memoryd.v1.MemoryService/Write code=OK tenant=tenant-9a2024d49d trace_id=0af7651916cd43dd8448eb211c80319c "
       "job b7052024-61c0-41b6-9330-cfeaaab8dafe")


def test_the_year_of_the_turns_inside_a_random_identifier_is_no_echo():
    assert "2024" in LOG
    assert echoes(SAID, [LOG]) == []


def test_what_was_said_is_found_beside_identifiers():
    assert "Bartholomew" in echoes(SAID, [LOG + " the model said: Bartholomew"])
    assert "2024" in echoes(SAID, [LOG + " (2024-05-01)"])
    assert "13800138000" in echoes(SAID, ["number 13800138000"])  # digits only: not an identifier
