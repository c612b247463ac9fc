"""The gRPC handlers. Thin by rule: take the validated command and the caller scope, call
one scope method, return its answer. No SQL, no store, no policy here (a test checks that
this module imports no store)."""

from __future__ import annotations

import grpc

from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

from ._interceptors import current_command
from ._scope import current_admin_scope, current_scope


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

    async def ExportMemories(self, request: svc.ExportMemoriesRequest,
                             context: grpc.aio.ServicerContext) -> svc.ExportMemoriesResponse:
        return await current_scope().export(current_command())

    async def ImportMemories(self, request: svc.ImportMemoriesRequest,
                             context: grpc.aio.ServicerContext) -> svc.ImportMemoriesResponse:
        return await current_scope().import_archive(current_command(), context.time_remaining())

    async def GetExtractionJob(self, request: svc.GetExtractionJobRequest,
                               context: grpc.aio.ServicerContext) -> svc.GetExtractionJobResponse:
        return await current_scope().extraction_job(current_command())

    async def ResolveConflict(self, request: svc.ResolveConflictRequest,
                              context: grpc.aio.ServicerContext) -> svc.ResolveConflictResponse:
        return await current_scope().resolve_conflict(current_command())


class ViewAdminService(admin_grpc.ViewAdminServiceServicer):
    """Tenant admins manage their tenant's views (the admin role is checked by the caller scope)."""

    async def PutView(self, request: admin.PutViewRequest, context: grpc.aio.ServicerContext) -> admin.PutViewResponse:
        return await current_admin_scope().put_view(current_command())

    async def GetView(self, request: admin.GetViewRequest, context: grpc.aio.ServicerContext) -> admin.GetViewResponse:
        return await current_admin_scope().get_view(current_command())

    async def ListViews(self, request: admin.ListViewsRequest,
                        context: grpc.aio.ServicerContext) -> admin.ListViewsResponse:
        return await current_admin_scope().list_views(current_command())

    async def DeleteView(self, request: admin.DeleteViewRequest,
                         context: grpc.aio.ServicerContext) -> admin.DeleteViewResponse:
        return await current_admin_scope().delete_view(current_command())
