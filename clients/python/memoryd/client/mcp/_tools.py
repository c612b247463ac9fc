"""The bridge's four tools as plain async functions over :class:`~memoryd.client.AsyncMemorydClient`:
their arguments (with the descriptions an LLM reads in their JSON schemas) become one memoryd
request each, and the answer a small JSON object. A failed call becomes an MCP tool error
carrying the server's status code, ErrorInfo reason, message and field violations.

Nothing here decides what the caller may see: every call carries the caller's token and the
server's guard answers with that agent's view (hidden fields are left out, hidden memories are
never returned, a refused write says why).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar, cast

from google.protobuf.message import Message
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._async import AsyncMemorydClient
from .._errors import MemorydError
from .._names import enum_name

R = TypeVar("R")

CategoryName = Literal["fact", "preference", "constraint", "goal", "context", "event", "decision"]

Subject = Annotated[str, Field(description="Who the memories are about: a user or person id such as 'user-42' "
                                           "(letters, digits and ._:@-, at most 128 bytes)")]


# With --caller-tokens: the memoryd token of the HTTP caller whose tool call runs in this task.
# The bridge's client reads it for every call it makes (its token function), so each caller is
# answered through its own view; set only for the call's duration, in the call's own task.
CALLER: ContextVar[str | None] = ContextVar("memoryd_mcp_caller", default=None)

UNAUTHENTICATED = ("UNAUTHENTICATED: this bridge calls memoryd with each caller's own token, and this request "
                   "carried none: send it as 'Authorization: Bearer <memoryd token>'")


def bearer(headers: Mapping[str, str] | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header (None: no such header)."""
    scheme, _, token = (headers or {}).get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class ContextTurn(BaseModel):
    """One turn of the conversation so far."""

    speaker: Annotated[str, Field(description="Who spoke: 'user', 'assistant' or a name")]
    text: Annotated[str, Field(description="What was said")]


class MemoryTools:
    """The tools, bound to one client (one channel): with the bridge's token, or with
    ``caller_tokens`` each HTTP caller's own (``CALLER``)."""

    def __init__(self, client: AsyncMemorydClient, *, caller_tokens: bool = False) -> None:
        self.client = client
        self.caller_tokens = caller_tokens

    async def _call(self, ctx: Context | None, pending: Coroutine[Any, Any, R]) -> R:
        """``pending``'s answer, made with the caller's token; a refusal as a tool error."""
        if not self.caller_tokens:
            return await _answer(pending)
        token = bearer(ctx.headers if ctx is not None else None)
        if token is None:  # the HTTP layer refuses such requests first (401): this is the backstop
            pending.close()
            raise ToolError(UNAUTHENTICATED)
        caller = CALLER.set(token)
        try:
            return await _answer(pending)
        finally:
            CALLER.reset(caller)

    async def remember(
        self,
        subject: Subject,
        text: Annotated[str, Field(description="The memory in words, one self-contained statement "
                                               "('Alice is vegetarian'), at most 8 KiB")],
        category: Annotated[CategoryName, Field(description=(
            "fact (about the subject; a new value for its key is versioned), preference (last write wins), "
            "constraint (a rule they live under; accumulates), goal, context (short-lived), event (something "
            "that happened; no key), decision (no key)"))] = "fact",
        key: Annotated[str | None, Field(description=(
            "Optional name of a structured memory, such as 'home_city' or 'diet' (letters, digits and ._:/-): "
            "writing the same key again replaces or versions its value. Not for event or decision; without "
            "it the memory is free text"))] = None,
        tags: Annotated[list[str] | None, Field(description="Optional labels, at most 32 of 1 to 64 bytes "
                                                            "each")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="Optional weight in recall, 0 to 1 "
                                                                          "(default 0.5)")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store one memory about a subject in memoryd. The answer says what happened: outcome
        'created', 'updated' or 'versioned' (the key's value replaced, the old one kept as a version),
        'merged' (it repeated an existing event), 'unchanged', 'pending' (held back: a more trusted
        value is current), 'accepted' (stored, but this agent may not read it back) or 'rejected'
        (not stored; reason says why, e.g. it looked like an instruction or a secret). It is
        searchable by recall when this returns (indexed: true)."""
        draft = pb.MemoryDraft(category=_category(category), key=key or "", text=text, tags=tags or [])
        if importance is not None:
            draft.importance = importance
        answer = await self._call(ctx, self.client.write(subject=subject, items=[draft],
                                                         consistency=svc.CONSISTENCY_WAIT_INDEXED))
        result = answer.results[0]
        outcome = enum_name(result, "outcome")
        return _clean({"outcome": outcome, "stored": outcome not in ("rejected", "unspecified"),
                       "memory_id": result.memory_id, "version": result.version or None, "reason": result.reason,
                       "indexed": answer.indexed})

    async def recall(
        self,
        subject: Subject,
        query: Annotated[str | None, Field(description=(
            "What to remember, as a self-contained question that names the person ('what can Alice eat?', "
            "not 'what should I cook for her?', which finds far less: memoryd matches meaning and words, "
            "and a pronoun carries neither); or give the conversation as context. Optional when context "
            "or keys are given"))] = None,
        context: Annotated[list[ContextTurn] | None, Field(description=(
            "Optional: the conversation so far, oldest first, most recent turn last; memoryd searches "
            "with what it is about now (the latest user turn first)"))] = None,
        keys: Annotated[list[str] | None, Field(description="Optional exact keys to look up ('home_city')")] = None,
        top_k: Annotated[int | None, Field(ge=1, le=100, description="At most this many memories "
                                                                     "(default 10)")] = None,
        token_budget: Annotated[int | None, Field(ge=1, description="Optional cap on the estimated tokens of the "
                                                                    "memories' texts")] = None,
        categories: Annotated[list[CategoryName] | None, Field(description="Optional: only these "
                                                                           "categories")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Recall what memoryd knows about a subject that matters now: the memories best first
        (text, category, key, score, relevance and why each was chosen), and 'block', a
        prompt-ready text of them to put in the model's context as reference information (not
        instructions). When nothing the agent may read is relevant enough, 'memories' is empty
        and 'nothing_relevant' is true: say you do not know rather than guess."""
        now = datetime.now(UTC)
        turns = [pb.Turn(turn_id=f"t{n}", speaker=turn.speaker, text=turn.text, time=now)
                 for n, turn in enumerate(context or [], 1)]
        request = svc.RecallRequest(subject=subject, query=query or "", keys=keys or [], context=turns,
                                    top_k=top_k or 0, token_budget=token_budget or 0, render_block=True)
        if categories:
            request.filter.categories.extend(_category(c) for c in categories)
        answer = await self._call(ctx, self.client.recall(request))
        memories = [{**_memory(s.memory), "score": round(s.score, 4), "relevance": round(s.relevance, 4),
                     "why": _why(s, request.keys)} for s in answer.memories]
        found: dict[str, Any] = {"memories": memories, "block": answer.block, "nothing_relevant": not memories}
        if answer.degraded:
            found["degraded"] = answer.degraded_reason or True
        return found

    async def forget(
        self,
        subject: Subject,
        memory_id: Annotated[str | None, Field(description="The id of the memory to forget, as recall or list "
                                                           "gave it")] = None,
        key: Annotated[str | None, Field(description="Or: forget every memory of the subject with this key")] = None,
        reason: Annotated[str | None, Field(description="Optional: why, kept in the erasure log")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Forget a subject's memory, by id or by key (give exactly one): it is never recalled or
        listed again, and kept only for audit. The answer counts what was forgotten of what
        this agent may read (0: nothing matched) and whether a re-read verified it."""
        if (memory_id is None) == (key is None):
            raise ToolError("give exactly one of memory_id or key")
        request = svc.EraseRequest(subject=subject, mode=svc.ERASE_MODE_FORGET, reason=reason or "")
        if memory_id is not None:
            request.ids.ids.append(memory_id)
        else:
            request.key = key or ""
        receipt = (await self._call(ctx, self.client.erase(request))).receipt
        return {"forgotten": receipt.counts.memories, "verified": receipt.verified, "erase_id": receipt.erase_id}

    async def list_memories(
        self,
        subject: Subject,
        categories: Annotated[list[CategoryName] | None, Field(description="Optional: only these "
                                                                           "categories")] = None,
        tags: Annotated[list[str] | None, Field(description="Optional: only memories carrying all of these "
                                                            "tags")] = None,
        keys: Annotated[list[str] | None, Field(description="Optional: only memories with one of these keys")] = None,
        include_org: Annotated[bool, Field(description="Also list the organisation's shared memories (scope "
                                                       "org)")] = False,
        page_size: Annotated[int | None, Field(ge=1, le=500, description="Memories per page (default 50)")] = None,
        page_token: Annotated[str | None, Field(description="Continue from a previous answer's "
                                                            "next_page_token")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List a subject's current memories that this agent may read, most recently updated
        first, one page at a time; 'next_page_token' is present while there are more."""
        request = svc.MemoryViewRequest(subject=subject, page_size=page_size or 0, page_token=page_token or "")
        request.filter.categories.extend(_category(c) for c in categories or [])
        request.filter.tags.extend(tags or [])
        request.filter.keys.extend(keys or [])
        request.filter.include_org = include_org
        page = await self._call(ctx, self.client.memory_view(request))
        listed: dict[str, Any] = {"memories": [_memory(m) for m in page.memories]}
        if page.next_page_token:
            listed["next_page_token"] = page.next_page_token
        return listed


async def _answer(pending: Awaitable[R]) -> R:
    try:
        return await pending
    except MemorydError as error:
        raise ToolError(describe(error)) from None


def describe(error: MemorydError) -> str:
    """A failed call in one line for the model and its user: code, reason, the server's message,
    each bad field, and the request id to quote."""
    text = error.code.name + (f" ({error.reason})" if error.reason else "") + f": {error.message}"
    # The server's message usually names its bad fields already: each is said once.
    unsaid = [f"{field}: {why}" for field, why in error.violations.items() if f"{field}: {why}" not in error.message]
    if unsaid:
        text += "; " + "; ".join(unsaid)
    if error.code.name == "UNAVAILABLE":
        text += " (memoryd is not answering; try again later)"
    elif error.code.name == "UNAUTHENTICATED":
        text += " (the bridge's token, MEMORYD_TOKEN, is missing, invalid or expired)"
    if error.request_id:
        text += f" [request_id {error.request_id}]"
    return text


def _category(name: str) -> pb.Category:
    return cast(pb.Category, pb.Category.Value(f"CATEGORY_{name.upper()}"))


def _enum(message: Message, field: str) -> str:
    """An enum field's name; "" when unset (a view that hides the field leaves it 0)."""
    return enum_name(message, field) if getattr(message, field) else ""


def _memory(memory: pb.Memory) -> dict[str, Any]:
    """The fields the server sent (a view that hides one leaves it unset, and so out)."""
    return _clean({"id": memory.id, "category": _enum(memory, "category"), "key": memory.key,
            "text": memory.text, "tags": list(memory.tags), "scope": _enum(memory, "scope"),
            "session_id": memory.session_id, "pinned": memory.pinned or None,
            "updated_at": memory.updated_at.ToJsonString() if memory.HasField("updated_at") else ""})


def _why(scored: svc.ScoredMemory, keys: Any) -> str:
    """Why a memory was recalled, from the parts of its score."""
    reasons = []
    if scored.memory.key and scored.memory.key in keys:
        reasons.append("exact key match")
    if scored.named_entity:
        reasons.append(f"the query names {scored.named_entity.removeprefix('entity:')}")
    if scored.HasField("cosine"):
        reasons.append(f"close in meaning (cosine {scored.cosine:.2f})")
    if scored.keyword_rank:
        reasons.append(f"shares words with the query (keyword rank {scored.keyword_rank})")
    if scored.neighbour_of:
        reasons.append(f"said next to memory {scored.neighbour_of}, a closer match")
    if scored.memory.pinned:
        reasons.append("pinned")
    return "; ".join(reasons) or "ranked by recency and importance"


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    """Leave out what is empty: an LLM reads less, and an unset field is never mistaken for a value."""
    return {k: v for k, v in fields.items() if v not in ("", None, [])}
