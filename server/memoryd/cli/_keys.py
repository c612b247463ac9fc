"""``memoryd keys``: rotate and retire the server's secrets.

Key files are read by servers once at start: a rotation or a retirement takes effect on each
server when it restarts.
"""

from __future__ import annotations

import argparse
from typing import Any

from memoryd.server import KeyFiles, describe_keys, load, retire_signing_key, rotate_page_secret, rotate_signing_key

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


def _rotate(args: argparse.Namespace) -> int:
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
    retire_signing_key(KeyFiles.of(load(args.config)), args.kid)
    print(f"retired signing key {args.kid}: its tokens are refused once the servers restart")
    return 0


def _list(args: argparse.Namespace) -> int:
    for line in describe_keys(KeyFiles.of(load(args.config))):
        print(line)
    return 0
