"""``memoryd token issue``: mint a bearer token.

Through a running server (TokenAdminService.IssueToken) with an admin token, so the signing key
stays on the server; the tenant is then the admin token's, and the server records the issuance
in the tenant's audit log. With ``--tenant`` it signs locally with the server's signing key
file instead (``_admin``): how the first admin token of a deployment is made.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration

from memoryd.client import MemorydError
from memoryd.v1 import token_admin_service_pb2 as token_admin

from .._connect import client_for, connection_options, token_options
from .._errors import report_failure

DENIED_HINT = ("minting needs an admin token not bound to a subject (--token, MEMORYD_ADMIN_TOKEN or --token-file); "
               "the first one comes from `memoryd token issue --tenant T --agent A --role admin` where the signing "
               "key is")


def add_token_issue(token_commands: Any, *, locally: Callable[[argparse.Namespace], int]) -> None:
    """``token issue``; ``locally`` signs with the key file (for ``--tenant``)."""
    issue = token_commands.add_parser(
        "issue", help="print a new bearer token, minted by a server with an admin token (or, with --tenant, "
                      "signed here with the server's key file)",
        parents=[connection_options(), token_options(admin=True)],
        description="Mint a bearer token through the server at --addr (TokenAdminService.IssueToken), as the "
                    "admin token's holder: the token is for the admin's own tenant, carries only roles the admin "
                    "may grant (its own, and agent), and expires no later than the admin token; the server records "
                    "the issuance in the tenant's audit log. With --tenant, sign it here with the server's signing "
                    "key file instead (no server needed, the connection options are not used): how the first admin "
                    "token is made.")
    issue.add_argument("--agent", required=True, help="the agent the token names")
    issue.add_argument("--role", action="append", choices=["agent", "admin"],
                       help="a role the token carries (repeatable; default: agent)")
    issue.add_argument("--subject", default="", help="bind the token to one subject")
    issue.add_argument("--ttl", default=None, help="lifetime such as 15m, 1h, 7d (default: 1h; through a server "
                                                   "at most 30d and no later than the admin token's expiry)")
    issue.add_argument("--reason", default="", help="recorded with the issuance in the audit log (through a server)")
    issue.add_argument("--tenant", help="sign locally with the signing key file of the configuration, for this "
                                        "tenant, instead of asking a server (bootstrapping)")
    issue.add_argument("--json", action="store_true", help="print the token with what it grants (id, tenant, agent, "
                                                         "roles, subject, expiry) as JSON")
    issue.set_defaults(run=lambda args: locally(args) if args.tenant else _through_server(args))


def _through_server(args: argparse.Namespace) -> int:
    from memoryd.server import TOKEN_ROLE, parse_ttl

    roles = [TOKEN_ROLE.to_proto[r] for r in dict.fromkeys(args.role or [])]
    request = token_admin.IssueTokenRequest(agent=args.agent, roles=roles, subject=args.subject, reason=args.reason)
    if args.ttl is not None:
        request.lifetime.CopyFrom(Duration(seconds=parse_ttl(args.ttl)))
    with client_for(args, admin=True) as client:
        try:
            # Never retried (memoryd.client retries no IssueToken): a second attempt would
            # mint, and audit, a second token.
            minted = client.issue_token(request)
        except MemorydError as failure:
            report_failure(failure, args.addr, denied_hint=DENIED_HINT)
            return 1
    print(json_format.MessageToJson(minted, preserving_proto_field_name=True, indent=2) if args.json else minted.token)
    return 0


def print_token(token: str, *, as_json: bool) -> None:
    """A locally signed token, or with ``as_json`` the same shape as a server's answer."""
    from memoryd.server import TOKEN_ROLE

    if not as_json:
        print(token)
        return
    body = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    roles = [TOKEN_ROLE.to_proto[r] for r in claims["roles"]]
    minted = token_admin.IssueTokenResponse(token=token, token_id=claims["jti"], tenant=claims["tnt"],
                                            agent=claims["agt"], roles=roles, subject=claims.get("sub", ""))
    minted.issued_at.FromSeconds(claims["iat"])
    minted.expires_at.FromSeconds(claims["exp"])
    print(json_format.MessageToJson(minted, preserving_proto_field_name=True, indent=2))
