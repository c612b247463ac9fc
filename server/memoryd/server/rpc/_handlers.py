"""The gRPC handlers. Thin by rule: validate the typed request, take the caller the chain
authorised, run the RPC's use case. No SQL, no store, no policy here (a test checks that
this module imports no store)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from memoryd.domain import Internal
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import token_admin_service_pb2 as tokens
from memoryd.v1 import token_admin_service_pb2_grpc as tokens_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from .. import usecases
from ._interceptors import Context
from ._caller import current_admin, current_caller
from .._config import Limits
from ..usecases import CallContext, Services
from ..usecases import validate_export, validate_import
from ..validation import (
    validate_agent,
    validate_end_session,
    validate_erase,
    validate_get_extraction_job,
    validate_history,
    validate_issue_token,
    validate_list_views,
    validate_memory_view,
    validate_put_view,
    validate_recall,
    validate_resolve_conflict,
    validate_resume_session,
    validate_watch,
    validate_write,
)


class MemoryService(svc_grpc.MemoryServiceServicer):
    def __init__(self, services: Services, limits: Limits) -> None:
        self._services = services
        self._limits = limits

    def _context(self, context: Context) -> CallContext:
        caller = current_caller()
        guard = caller.guard
        return CallContext(guard, self._services.store.session(guard.tenant, guard.agent), self._services,
                           caller.tag, context.time_remaining())

    async def Write(self, request: svc.WriteRequest, context: Context) -> svc.WriteResponse:
        # 100 items with 16 KiB Structs take ~130 ms to validate: on a worker thread, not the loop.
        command = await asyncio.to_thread(validate_write, request, self._limits)
        return await usecases.write(self._context(context), command)

    async def Recall(self, request: svc.RecallRequest, context: Context) -> svc.RecallResponse:
        return await usecases.recall(self._context(context), validate_recall(request, self._limits))

    async def Erase(self, request: svc.EraseRequest, context: Context) -> svc.EraseResponse:
        return await usecases.erase(self._context(context), validate_erase(request, self._limits))

    async def MemoryView(self, request: svc.MemoryViewRequest,
                         context: Context) -> svc.MemoryViewResponse:
        return await usecases.memory_view(self._context(context), validate_memory_view(request, self._limits))

    async def GetHistory(self, request: svc.GetHistoryRequest,
                         context: Context) -> svc.GetHistoryResponse:
        return await usecases.history(self._context(context), validate_history(request, self._limits))

    async def ExportMemories(self, request: svc.ExportMemoriesRequest,
                             context: Context) -> svc.ExportMemoriesResponse:
        return await usecases.export(self._context(context), validate_export(request, self._limits))

    async def ImportMemories(self, request: svc.ImportMemoriesRequest,
                             context: Context) -> svc.ImportMemoriesResponse:
        return await usecases.import_archive(self._context(context), validate_import(request, self._limits))

    async def GetExtractionJob(self, request: svc.GetExtractionJobRequest,
                               context: Context) -> svc.GetExtractionJobResponse:
        return await usecases.extraction_job(self._context(context), validate_get_extraction_job(request, self._limits))

    async def ResolveConflict(self, request: svc.ResolveConflictRequest,
                              context: Context) -> svc.ResolveConflictResponse:
        return await usecases.resolve_conflict(self._context(context),
                                               validate_resolve_conflict(request, self._limits))

    async def Watch(self, request: svc.WatchRequest, context: Context) -> AsyncIterator[svc.WatchResponse]:
        caller = current_caller()
        if caller.renew is None:
            raise Internal("no way to renew the caller: the handler ran outside the interceptor chain")
        async for message in usecases.watch(self._context(context), validate_watch(request, self._limits),
                                            caller.renew, lambda: context.send_initial_metadata(())):
            yield message

    async def EndSession(self, request: svc.EndSessionRequest, context: Context) -> svc.EndSessionResponse:
        return await usecases.end_session(self._context(context), validate_end_session(request, self._limits))

    async def ResumeSession(self, request: svc.ResumeSessionRequest,
                            context: Context) -> svc.ResumeSessionResponse:
        return await usecases.resume_session(self._context(context), validate_resume_session(request, self._limits))


class ViewAdminService(admin_grpc.ViewAdminServiceServicer):
    """Tenant admins manage their tenant's views (the admin role is checked by the chain)."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits

    async def PutView(self, request: admin.PutViewRequest, context: Context) -> admin.PutViewResponse:
        return await current_admin().put_view(validate_put_view(request, self._limits))

    async def GetView(self, request: admin.GetViewRequest, context: Context) -> admin.GetViewResponse:
        return await current_admin().get_view(validate_agent(request, self._limits))

    async def ListViews(self, request: admin.ListViewsRequest,
                        context: Context) -> admin.ListViewsResponse:
        return await current_admin().list_views(validate_list_views(request, self._limits))

    async def DeleteView(self, request: admin.DeleteViewRequest,
                         context: Context) -> admin.DeleteViewResponse:
        return await current_admin().delete_view(validate_agent(request, self._limits))


class TokenAdminService(tokens_grpc.TokenAdminServiceServicer):
    """Tenant admins mint tokens for their tenant (the admin role is checked by the chain,
    what a token may carry by the guard)."""

    def __init__(self, services: Services, limits: Limits) -> None:
        self._services = services
        self._limits = limits

    async def IssueToken(self, request: tokens.IssueTokenRequest,
                         context: Context) -> tokens.IssueTokenResponse:
        scope = current_admin()
        mint = self._services.tokens
        if mint is None:
            raise Internal("no token mint: the server was started without one")
        return await usecases.issue_token(usecases.AdminCall(scope.principal, scope.tag, mint),
                                          validate_issue_token(request, self._limits))
