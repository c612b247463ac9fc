// The wrapper against a real gRPC server over HTTP/2 on loopback (connect-node's server side),
// which answers as memoryd does: google.rpc status details, x-request-id trailers. The end-to-end
// run against memoryd itself is the conformance scenario (tests/e2e/test_conformance.py).
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  backoffDelayMs,
  createMemorydClient,
  DEFAULT_RETRY,
  grpcCodeName,
  MemorydError,
  withRetries,
} from "../client.js";
import { BadRequestSchema, ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { MemoryService, WriteOutcome, type WriteRequest } from "../gen/memoryd/v1/memory_service_pb.js";
import { ViewAdminService } from "../gen/memoryd/v1/view_admin_service_pb.js";
import { ViewSchema } from "../gen/memoryd/v1/memory_pb.js";

const FAST = { initialBackoffMs: 1, maxBackoffMs: 5 };

// What the server saw, and how it should answer the next calls.
const seen = { writes: [] as WriteRequest[], authorization: [] as (string | null)[] };
let unavailableLeft = 0;
let recallDelayMs = 0;

function memorydError(code: Code, reason: string, requestId: string, violations: string[] = []): ConnectError {
  const details = [
    { desc: ErrorInfoSchema, value: { reason, domain: "memoryd", metadata: { request_id: requestId } } },
  ];
  const badRequest = violations.length
    ? [{ desc: BadRequestSchema, value: { fieldViolations: violations.map((field) => ({ field, description: "bad" })) } }]
    : [];
  return new ConnectError(`memoryd says ${reason}`, code, undefined, [...details, ...badRequest]);
}

function answerTrouble(context: HandlerContext): void {
  seen.authorization.push(context.requestHeader.get("authorization"));
  context.responseTrailer.set("x-request-id", "req-trailer");
  if (unavailableLeft > 0) {
    unavailableLeft--;
    throw memorydError(Code.Unavailable, "STORE_UNAVAILABLE", "req-unavailable");
  }
}

const server = http2.createServer(
  connectNodeAdapter({
    routes(router) {
      router.service(MemoryService, {
        write(request, context) {
          seen.writes.push(request);
          answerTrouble(context);
          if (!request.subject) throw memorydError(Code.InvalidArgument, "INVALID_REQUEST", "req-bad", ["subject", "items[0].text"]);
          return { results: request.items.map((_, i) => ({ memoryId: `m${i}`, outcome: WriteOutcome.CREATED, version: 1n })) };
        },
        async recall(request, context) {
          answerTrouble(context);
          if (recallDelayMs) await new Promise((resolve) => setTimeout(resolve, recallDelayMs));
          if (request.keys.includes("iban")) throw memorydError(Code.PermissionDenied, "VIEW_DENIED", "req-denied");
          return { memories: [] };
        },
      });
      router.service(ViewAdminService, {
        getView(request) {
          return { view: create(ViewSchema, { agent: request.agent, description: "from the test server" }) };
        },
      });
    },
  }),
);
let target = "";

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.close();
});
beforeEach(() => {
  seen.writes = [];
  seen.authorization = [];
  unavailableLeft = 0;
  recallDelayMs = 0;
});

describe("createMemorydClient", () => {
  it("retries a Write after UNAVAILABLE with one generated idempotency key", async () => {
    const client = createMemorydClient({ target, token: "t0ken", retry: FAST });
    unavailableLeft = 2;
    const response = await client.write({ subject: "alice", items: [{ text: "likes tea" }] });
    client.close();
    assert.equal(response.results[0]?.memoryId, "m0");
    assert.equal(seen.writes.length, 3);
    const keys = new Set(seen.writes.map((w) => w.idempotencyKey));
    assert.equal(keys.size, 1);
    assert.match([...keys][0]!, /^[0-9a-f-]{36}$/);
    assert.deepEqual(seen.authorization, ["Bearer t0ken", "Bearer t0ken", "Bearer t0ken"]);
  });

  it("keeps the caller's idempotency key", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    await client.write({ subject: "alice", idempotencyKey: "mine", items: [{ text: "x" }] });
    client.close();
    assert.equal(seen.writes[0]?.idempotencyKey, "mine");
    assert.deepEqual(seen.authorization, [null]);
  });

  it("gives up after maxAttempts and reports UNAVAILABLE", async () => {
    const client = createMemorydClient({ target, retry: { ...FAST, maxAttempts: 3 } });
    unavailableLeft = 10;
    await assert.rejects(client.recall({ subject: "alice", keys: ["x"] }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "UNAVAILABLE");
      assert.equal(error.reason, "STORE_UNAVAILABLE");
      assert.ok(error.retryable);
      return true;
    });
    client.close();
    assert.equal(unavailableLeft, 7);
  });

  it("does not retry PERMISSION_DENIED and decodes ErrorInfo", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    await assert.rejects(client.recall({ subject: "alice", keys: ["iban"] }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.code, Code.PermissionDenied);
      assert.equal(error.codeName, "PERMISSION_DENIED");
      assert.equal(error.reason, "VIEW_DENIED");
      assert.equal(error.domain, "memoryd");
      assert.equal(error.requestId, "req-denied");
      assert.equal(error.message, "memoryd says VIEW_DENIED");
      return true;
    });
    client.close();
    assert.equal(seen.authorization.length, 1);
  });

  it("names every bad field of INVALID_ARGUMENT", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    await assert.rejects(client.write({ subject: "", items: [{ text: "" }] }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "INVALID_ARGUMENT");
      assert.deepEqual(error.violations.map((v) => v.field), ["subject", "items[0].text"]);
      return true;
    });
    client.close();
  });

  it("applies the default deadline", async () => {
    const client = createMemorydClient({ target, timeoutMs: 50, retry: FAST });
    recallDelayMs = 500;
    await assert.rejects(client.recall({ subject: "alice" }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "DEADLINE_EXCEEDED");
      return true;
    });
    client.close();
  });

  it("reaches ViewAdminService under views", async () => {
    const client = createMemorydClient({ target });
    const response = await client.views.getView({ agent: "support-bot" });
    client.close();
    assert.equal(response.view?.agent, "support-bot");
  });
});

describe("retry policy", () => {
  it("backs off exponentially with full jitter, capped", () => {
    const policy = { ...DEFAULT_RETRY, initialBackoffMs: 100, maxBackoffMs: 1000, multiplier: 2 };
    assert.equal(backoffDelayMs(1, policy, () => 0.999999), 99);
    assert.equal(backoffDelayMs(3, policy, () => 0.999999), 399);
    assert.equal(backoffDelayMs(10, policy, () => 0.999999), 999);
    assert.equal(backoffDelayMs(3, policy, () => 0), 0);
  });

  it("does not sleep past the deadline", async () => {
    let clock = 0;
    let attempts = 0;
    const unavailable = new ConnectError("down", Code.Unavailable);
    const policy = { maxAttempts: 100, initialBackoffMs: 1000, maxBackoffMs: 1000, multiplier: 1 };
    await assert.rejects(
      withRetries(
        async () => {
          attempts++;
          throw unavailable;
        },
        policy,
        2500,
        async (ms) => {
          clock += ms;
        },
        () => clock,
      ),
      MemorydError,
    );
    assert.ok(attempts >= 1 && attempts <= 100);
    assert.ok(clock < 2500);
  });

  it("spells codes as gRPC does", () => {
    assert.equal(grpcCodeName(Code.Canceled), "CANCELLED");
    assert.equal(grpcCodeName(Code.ResourceExhausted), "RESOURCE_EXHAUSTED");
    assert.equal(grpcCodeName(Code.Unauthenticated), "UNAUTHENTICATED");
  });
});
