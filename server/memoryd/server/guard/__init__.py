"""The guard: the one place that decides what a caller may do and what it is told.

``Guard`` (``_rules``) turns the principal and the agent's view into read filters, admitted
writes (with their trust and whether they are blind), erase scopes and the score mask;
``token_grant`` (``_tokens``) decides what a token minted through IssueToken may carry;
``present`` (``_present``) builds every response message from stored things through it.
Nothing else decides permissions or builds a response field from a stored memory.
"""

from . import _present as present
from ._block import BLOCK_FOOTER, BLOCK_HEADER, render_block
from ._rules import Guard, WriteItem, write_item
from ._tokens import TokenGrant, token_grant

__all__ = ["BLOCK_FOOTER", "BLOCK_HEADER", "Guard", "TokenGrant", "WriteItem", "present", "render_block", "token_grant",
           "write_item"]
