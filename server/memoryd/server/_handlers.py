"""The gRPC handlers. Thin by rule: take the validated command and the caller scope, call
one scope method, return its answer. No SQL, no store, no policy here (a test checks that
this module imports no store)."""

from __future__ import annotations

import grpc

from memoryd.domain import NotImplementedYet
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ._interceptors import current_command
from ._scope import current_scope


class MemoryService(svc_grpc.MemoryServiceServicer):
    async def Write(self, request: svc.WriteRequest, context: grpc.aio.ServicerContext) -> svc.WriteResponse:
        return await current_scope().write(current_command(), context.time_remaining())

    async def Recall(self, request: svc.RecallRequest, context: grpc.aio.ServicerContext) -> svc.RecallResponse:
        return await current_scope().recall(current_command())

    async def Erase(self, request: svc.EraseRequest, context: grpc.aio.ServicerContext) -> svc.EraseResponse:
        return await current_scope().erase(current_command())

    async def MemoryView(self, request: svc.MemoryViewRequest,
                         context: grpc.aio.ServicerContext) -> svc.MemoryViewResponse:
        return await current_scope().list(current_command())

    async def GetHistory(self, request: svc.GetHistoryRequest,
                         context: grpc.aio.ServicerContext) -> svc.GetHistoryResponse:
        return await current_scope().history(current_command())


_VIEWS_LATER = "per-agent views are not stored by this server version; every agent has full access to its tenant"


class ViewAdminService(admin_grpc.ViewAdminServiceServicer):
    """Admin-only (checked by the caller scope); views arrive in a later version."""

    async def PutView(self, request: admin.PutViewRequest, context: grpc.aio.ServicerContext) -> admin.PutViewResponse:
        raise NotImplementedYet(_VIEWS_LATER)

    async def GetView(self, request: admin.GetViewRequest, context: grpc.aio.ServicerContext) -> admin.GetViewResponse:
        raise NotImplementedYet(_VIEWS_LATER)

    async def ListViews(self, request: admin.ListViewsRequest,
                        context: grpc.aio.ServicerContext) -> admin.ListViewsResponse:
        raise NotImplementedYet(_VIEWS_LATER)

    async def DeleteView(self, request: admin.DeleteViewRequest,
                         context: grpc.aio.ServicerContext) -> admin.DeleteViewResponse:
        raise NotImplementedYet(_VIEWS_LATER)
