"""Views at run time: the registry every call reads its agent's view from, and the view
administration service's work.
"""

from ._view_admin import AdminScope, ViewRegistry

__all__ = ["AdminScope", "ViewRegistry"]
