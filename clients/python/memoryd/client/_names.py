"""How the programs built on the client (the ``memoryd`` commands' tables, ``memoryd-mcp``) name
an enum value to a person or a model: without the type's prefix, in lower case."""

from __future__ import annotations

from google.protobuf.message import Message


def enum_name(message: Message, field: str) -> str:
    """``message.field``'s value named without its enum's prefix, in lower case
    (``CATEGORY_FACT`` → ``fact``, ``WRITE_OUTCOME_CREATED`` → ``created``; 0 → ``unspecified``)."""
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    assert enum is not None, field
    prefix = enum.values[0].name.removesuffix("UNSPECIFIED")
    return str(enum.values_by_number[getattr(message, field)].name).removeprefix(prefix).lower()
