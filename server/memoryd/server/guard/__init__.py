"""The guard: the one place that decides what a caller may do. It only decides.

- ``_callers``: whether a principal may call at all — an admin service (``check_admin``), the
  memory service with its agent's view (``guard_for``, which builds the call's ``Guard``) —
  and whether a view may export (``check_exportable``);
- ``_rules``: the ``Guard`` of one call turns the request into read filters, admitted writes
  (their trust and whether they are blind), erase scopes, change checks and the score mask;
- ``_tokens``: what a token minted through IssueToken may carry (``token_grant``).

Every ``PermissionDenied`` the server raises is raised here (tests/domain/test_architecture.py
checks it). The guard works on domain types alone: it imports no protobuf, gRPC or contract,
does no I/O, and builds no answer. ``memoryd.server.present`` builds every response from what
the guard decided (``Guard.visible``, ``Guard.score_mask``, ``WriteItem``); each decision is
unit-tested in tests/domain/test_guard_decisions.py.
"""

from ._callers import check_admin, check_exportable, guard_for
from ._rules import Guard, WriteItem, write_item
from ._tokens import DEFAULT_LIFETIME_SECONDS, TokenGrant, TokenRequest, token_grant

__all__ = ["DEFAULT_LIFETIME_SECONDS", "Guard", "TokenGrant", "TokenRequest", "WriteItem", "check_admin",
           "check_exportable", "guard_for", "token_grant", "write_item"]
