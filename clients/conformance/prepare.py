"""Prepare a conformance run against a running memoryd: store the callers' views, issue their
tokens, write the config file the runners read.

    python clients/conformance/prepare.py --target 127.0.0.1:50051 --key-file .memoryd/keys/signing.pem \
        --out /tmp/conformance.json

The tenant is fresh for every run, so runs never see each other's memories.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path

import grpc

from memoryd.server import issue_token, load_signing_key
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

WRITER, MASKED, STRANGER = "conformance-writer", "conformance-masked", "conformance-stranger"


def _views() -> list[pb.View]:
    every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in pb.Category.values() if c]
    fields = [f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable"]
    # Keys are not bound to categories: a "*" preference rule would let the masked agent look
    # up any key (the scenario's "iban" too), so its preference rule names the keys it reads.
    masked_rules = [pb.ViewRule(category=pb.CATEGORY_PREFERENCE, key_patterns=["primary_*"]),
                    pb.ViewRule(category=pb.CATEGORY_EVENT, key_patterns=["*"])]
    return [
        pb.View(agent=WRITER, read_rules=every, write_rules=every, may_erase=True, visible_fields=fields,
                description="conformance: full access"),
        # A session snapshot shows which session (session_id), what was asked vs inferred
        # (provenance) and in what order (updated_at): a view must show those to resume one.
        pb.View(agent=MASKED, read_rules=masked_rules,
                visible_fields=["id", "key", "text", "category", "provenance", "session_id", "updated_at"],
                description="conformance: preferences and events, seven fields"),
    ]


def prepare(target: str, key_file: Path, *, tenant: str = "") -> dict[str, object]:
    """Store the views on ``target`` and return the runners' config."""
    key = load_signing_key(key_file)
    tenant = tenant or f"conformance-{uuid.uuid4().hex[:10]}"
    admin_token = issue_token(key, tenant=tenant, agent="conformance-admin", roles=("admin",), ttl_seconds=3600)
    with grpc.insecure_channel(target) as channel:
        stub = admin_grpc.ViewAdminServiceStub(channel)
        for view in _views():
            stub.PutView(admin.PutViewRequest(view=view), metadata=(("authorization", f"Bearer {admin_token}"),),
                         timeout=30)

    def token(agent: str) -> str:
        return issue_token(key, tenant=tenant, agent=agent, ttl_seconds=3600)

    return {
        "target": target,
        "tokens": {"writer": token(WRITER), "masked": token(MASKED), "stranger": token(STRANGER), "anonymous": ""},
        "vars": {"subject": f"conformance-{uuid.uuid4().hex[:8]}", "masked_agent": MASKED},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--key-file", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.write_text(json.dumps(prepare(args.target, args.key_file), indent=2))


if __name__ == "__main__":
    main()
