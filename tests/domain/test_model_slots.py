"""A model endpoint's slots (the claims on PostgreSQL: tests/storage/test_model_slots.py)."""

from __future__ import annotations

import pytest

from memoryd.storage import ModelSlots

URL = "http://127.0.0.1:8080/v1/chat/completions"


def test_a_model_needs_a_slot() -> None:
    with pytest.raises(ValueError):
        ModelSlots(URL, 0)
