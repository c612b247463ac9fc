"""``memoryd keys`` (rotate and retire the server's secrets) and ``memoryd token revoke``.

Key files are read by servers once at start: a rotation or a retirement takes effect on each
server when it restarts. A revocation is stored in Postgres and applies on every running
server within about a second.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from memoryd.domain import Unauthenticated

from .._context import instant
from .._errors import CliError

RESTART = "servers use it once restarted"


def add_key_commands(commands: Any) -> None:
    keys = commands.add_parser("keys", help="the server's secrets: rotate and retire signing keys, the page secret")
    sub = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")
    rotate = sub.add_parser("rotate", help="a new current signing key (the old one stays accepted until retired) "
                                           "and page secret; with --signing or --pages, only that one")
    rotate.add_argument("--signing", action="store_true", help="rotate the token signing key")
    rotate.add_argument("--pages", action="store_true", help="rotate the page-token secret")
    rotate.set_defaults(run=_rotate)
    retire = sub.add_parser("retire", help="stop accepting tokens signed by an earlier signing key")
    retire.add_argument("kid", help="the key id, as 'memoryd keys list' prints it")
    retire.set_defaults(run=_retire)
    listing = sub.add_parser("list", help="the secrets' versions (never the secrets)")
    listing.set_defaults(run=_list)


def add_token_revoke(token_commands: Any) -> None:
    revoke = token_commands.add_parser(
        "revoke", help="refuse one token from now on (every server, within about a second), keeping the key")
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("--token", help="the token: its tenant, id and expiry are read from it")
    which.add_argument("--jti", help="the token's id (its jti claim); needs --tenant")
    revoke.add_argument("--tenant", help="with --jti: the token's tenant")
    revoke.add_argument("--until", type=instant, default=None,
                        help="with --jti: the token's expiry, after which the entry is dropped (default: kept)")
    revoke.add_argument("--reason", default="", help="recorded with the entry and in the audit log")
    revoke.set_defaults(run=_revoke)


def _rotate(args: argparse.Namespace) -> int:
    from memoryd.server import KeyFiles, load, rotate_page_secret, rotate_signing_key

    files = KeyFiles.of(load(args.config))
    both = not (args.signing or args.pages)
    if args.signing or both:
        old, new = rotate_signing_key(files)
        print(f"signing key {new} is current ({RESTART}); tokens of {old} are accepted until "
              f"'memoryd keys retire {old}'")
    if args.pages or both:
        version = rotate_page_secret(files)
        print(f"page secret v{version} is current ({RESTART}); page tokens of v{version - 1} are still accepted")
    return 0


def _retire(args: argparse.Namespace) -> int:
    from memoryd.server import KeyFiles, load, retire_signing_key

    retire_signing_key(KeyFiles.of(load(args.config)), args.kid)
    print(f"retired signing key {args.kid}: its tokens are refused once the servers restart")
    return 0


def _list(args: argparse.Namespace) -> int:
    from memoryd.server import KeyFiles, describe_keys, load

    for line in describe_keys(KeyFiles.of(load(args.config))):
        print(line)
    return 0


async def _revoke(args: argparse.Namespace) -> int:
    from memoryd.server import KeyFiles, TokenVerifier, load, load_secrets, open_database
    from memoryd.storage import PostgresRevocations

    config = load(args.config)
    if args.token:
        if args.tenant or args.until:
            raise CliError("--tenant and --until go with --jti; a --token carries both")
        verifier = TokenVerifier(load_secrets(KeyFiles.of(config)).verification_keys)
        try:
            principal = verifier.verify(args.token.strip())
        except Unauthenticated as exc:
            if exc.reason == "TOKEN_EXPIRED":
                print("the token has expired already: no server accepts it, nothing to revoke")
                return 0
            raise CliError("the token is not one this deployment accepts (malformed, badly signed or of a retired "
                           "key): nothing to revoke", "revoke by id instead: --tenant T --jti ID") from None
        tenant, token_id = principal.tenant, principal.token_id
        until: datetime | None = datetime.fromtimestamp(principal.token_expires, UTC)
    else:
        if not args.tenant:
            raise CliError("--jti needs --tenant (the deny list is kept per tenant)")
        tenant, token_id, until = args.tenant, args.jti, args.until
    async with open_database(config) as (_, db):
        added = await PostgresRevocations(db).revoke(tenant, token_id, until, revoked_by="memoryd-cli",
                                                     reason=args.reason)
    state = "revoked" if added else "was already revoked:"
    print(f"{state} token {token_id} of tenant {tenant}; servers refuse it within about a second")
    return 0


