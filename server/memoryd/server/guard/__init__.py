"""The guard: the one place that decides what a caller may do and what it is told.

``Guard`` (``_rules``) turns the principal and the agent's view into read filters, admitted
writes (with their trust and whether they are blind), erase scopes and the score mask;
``token_grant`` (``_tokens``) decides what a token minted through IssueToken may carry.
Nothing else decides permissions; ``memoryd.server.present`` builds every response field from
a stored memory by asking it.
"""

from ._rules import Guard, WriteItem, write_item
from ._tokens import TokenGrant, token_grant

__all__ = ["Guard", "TokenGrant", "WriteItem", "token_grant", "write_item"]
