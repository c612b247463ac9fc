"""What the index holds for one memory and where: the text that is embedded, the filterable
facts kept beside the vector (``IndexedMemory``), the collection of an embedding model and the
partition of a tenant. Pure: no Milvus call.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime


def embedding_text(key: str, text: str) -> str:
    """What is embedded: the key (in words) and the value for structured memories."""
    return f"{key.replace('_', ' ')}: {text}" if key else text


@dataclass(frozen=True)
class IndexedMemory:
    """The filterable facts about one memory that the index keeps beside its vector. The
    key and tags are their labels (hex, "" for no key): the index holds no key or tag name."""

    id: str
    subject: str
    scope: str
    session_id: str
    category: str
    key: str
    tags: tuple[str, ...]
    updated_at: datetime
    valid_until: datetime | None


def collection_name(model_id: str, routing: str) -> str:
    """Readable, and unique per model id: the slug alone would merge "a-b" with "a_b"."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", model_id).strip("_").lower()[:160]
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:8]
    return f"memoryd_{slug}_{digest}" + ("_pk" if routing == "partition_key" else "")


def partition_name(tenant: str) -> str:
    return "t_" + hashlib.sha256(tenant.encode()).hexdigest()[:24]
