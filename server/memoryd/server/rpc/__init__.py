"""The gRPC surface: the interceptor chain (declared once, in order), the thin handlers, the
caller the chain leaves for them, and the one mapping of domain errors to gRPC statuses.
"""

from ._handlers import MemoryService, TokenAdminService, ViewAdminService
from ._interceptors import Call, ChainInterceptor, Interceptor, build_chain

__all__ = ["Call", "ChainInterceptor", "Interceptor", "MemoryService", "TokenAdminService",
           "ViewAdminService", "build_chain"]
