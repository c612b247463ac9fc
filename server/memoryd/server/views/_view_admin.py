"""Views at run time: the registry every call reads its agent's view from, and the admin
handle ViewAdminService works through.

The registry keeps each (tenant, agent) view for a short time (``view_cache_seconds``,
default 1 s) so a call does not pay a Postgres round trip for it. A change made through this
server takes effect at once; one made through another replica takes effect here within that
time.
"""

from __future__ import annotations

import time

from memoryd.domain import AuditTag, NotFound, View, ViewChange, ViewStore
from memoryd.v1 import view_admin_service_pb2 as admin

from .. import present
from .._auth import Principal
from ..credentials import PageTokens
from ..telemetry import current_trace_id
from ..validation import AgentCommand, ListViewsCommand, PutViewCommand

MAX_CACHED_VIEWS = 10_000


class ViewRegistry:
    def __init__(self, store: ViewStore, ttl_seconds: float = 1.0) -> None:
        self.store = store
        self._ttl = ttl_seconds
        self._cache: dict[tuple[str, str], tuple[float, View | None]] = {}

    async def view_for(self, tenant: str, agent: str) -> View | None:
        """The agent's current view, or None: the agent may do nothing."""
        now = time.monotonic()
        hit = self._cache.get((tenant, agent))
        if hit is not None and hit[0] > now:
            return hit[1]
        view = await self.store.get(tenant, agent)
        if self._ttl > 0:
            if len(self._cache) >= MAX_CACHED_VIEWS:
                self._cache.clear()
            self._cache[(tenant, agent)] = (now + self._ttl, view)
        return view

    def forget(self, tenant: str, agent: str) -> None:
        self._cache.pop((tenant, agent), None)

    async def ensure(self, tenant: str, view: View, *, changed_by: str) -> bool:
        """Store ``view`` only if the agent never had one: an admin's later change — a
        deletion included — is never undone by a restart."""
        created = await self.store.put_first(tenant, changed_by, view)
        self.forget(tenant, view.agent)
        return created


class AdminScope:
    """A tenant admin's handle on the tenant's views (the admin role is checked before); the
    scope of a TokenAdminService call too, which uses only its principal and tag."""

    def __init__(self, principal: Principal, registry: ViewRegistry, pages: PageTokens, request_id: str) -> None:
        self.principal = principal
        self._registry = registry
        self._store = registry.store
        self._pages = pages
        self._tag = AuditTag(request_id, current_trace_id())

    @property
    def tag(self) -> AuditTag:
        """The audit tag every event of this admin call carries."""
        return self._tag

    async def put_view(self, cmd: PutViewCommand) -> admin.PutViewResponse:
        tenant = self.principal.tenant
        change: ViewChange = await self._store.put(tenant, self.principal.agent, cmd.view,
                                                   expected_version=cmd.expected_version,
                                                   tag=self._tag)
        self._registry.forget(tenant, cmd.view.agent)
        return admin.PutViewResponse(view=present.view(change.view), changed=change.changed)

    async def get_view(self, cmd: AgentCommand) -> admin.GetViewResponse:
        view = await self._store.get(self.principal.tenant, cmd.agent)
        if view is None:
            raise NotFound(f"agent '{cmd.agent}' has no view")
        return admin.GetViewResponse(view=present.view(view))

    async def list_views(self, cmd: ListViewsCommand) -> admin.ListViewsResponse:
        binding = {"t": self.principal.tenant, "a": self.principal.agent, "k": "views"}
        after = str(self._pages.decode(cmd.page_token, binding)["g"]) if cmd.page_token else ""
        views, more = await self._store.list(self.principal.tenant, after, cmd.page_size)
        response = admin.ListViewsResponse(views=[present.view(v) for v in views])
        if more and views:
            response.next_page_token = self._pages.encode(binding, {"g": views[-1].agent})
        return response

    async def delete_view(self, cmd: AgentCommand) -> admin.DeleteViewResponse:
        tenant = self.principal.tenant
        deleted = await self._store.delete(tenant, self.principal.agent, cmd.agent, tag=self._tag)
        self._registry.forget(tenant, cmd.agent)
        return admin.DeleteViewResponse(deleted=deleted)
