"""The guard's decisions about a caller as a whole, before any request is read: whether it may
call an admin service, whether it may call the memory service at all, and whether its view
may export.

The interceptor chain's caller-scope step asks ``check_admin`` for a ViewAdminService or
TokenAdminService call and ``guard_for`` for every other one; ExportMemories asks
``check_exportable`` before it reads anything.
"""

from __future__ import annotations

from memoryd.domain import PermissionDenied, View

from .._auth import Principal
from ._rules import Guard


def check_admin(principal: Principal) -> None:
    """Views and tokens are tenant-wide: administering them needs the admin role, on a
    credential not bound to a subject."""
    if not principal.is_admin:
        raise PermissionDenied("this call needs the admin role", reason="ROLE_REQUIRED")
    if principal.subject:
        raise PermissionDenied("a credential bound to a subject cannot administer the tenant",
                               reason="SUBJECT_NOT_ALLOWED")


def guard_for(principal: Principal, view: View | None) -> Guard:
    """The guard of one call by ``principal``'s agent, whose stored view is ``view``: an agent
    without a view is denied every call (deny by default), whatever its roles."""
    if view is None:
        raise PermissionDenied(f"agent '{principal.agent}' has no view in this tenant, so it may do nothing; "
                               "a tenant admin can give it one (ViewAdminService.PutView, or "
                               "'memoryd views apply')", reason="VIEW_MISSING")
    return Guard(principal, view)


def check_exportable(view: View) -> None:
    """Refuse a view whose field mask would leave memories that cannot be restored: an export
    needs category and text, and key unless the view reads only keyless (episodic) categories."""
    needed = {"category", "text"}
    if any(not rule.category.episodic for rule in view.read_rules):
        needed.add("key")
    missing = sorted(needed - view.visible_fields)
    if missing:
        raise PermissionDenied("exporting needs a view that shows " + ", ".join(sorted(needed))
                               + f"; this agent's view hides {', '.join(missing)}")
