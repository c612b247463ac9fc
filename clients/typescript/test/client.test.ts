// The client against a real gRPC server on loopback (grpc-js, test/support/grpc-server.ts) that
// answers as memoryd does. The end-to-end run against memoryd itself is the conformance scenario
// (tests/e2e/test_conformance.py) and tests/toolchains/test_typescript.py.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { createMemorydClient, grpcCodeName, MemorydError } from "../src/client.js";
import { ViewSchema, type Memory } from "../src/gen/memoryd/v1/memory_pb.js";
import {
  MemoryViewRequestSchema,
  WriteOutcome,
  type MemoryViewRequest,
  type RecallRequest,
  type WriteRequest,
} from "../src/gen/memoryd/v1/memory_service_pb.js";
import type { ListViewsRequest } from "../src/gen/memoryd/v1/view_admin_service_pb.js";
import { StatusError, TestServer, unavailable } from "./support/grpc-server.js";

const FAST = { initialBackoffMs: 1, maxBackoffMs: 5 };
const server = new TestServer();
let target = "";

before(async () => {
  target = (await server.start()).target;
});
after(() => server.stop());
beforeEach(() => {
  server.reset();
  server.handlers.set("memoryd.v1.MemoryService/Write", (request: WriteRequest) => {
    if (!request.subject) {
      throw new StatusError(grpc.status.INVALID_ARGUMENT, "bad write", {
        reason: "INVALID_REQUEST",
        requestId: "req-bad",
        violations: ["subject", "items[0].text"],
      });
    }
    return { results: request.items.map((_, i) => ({ memoryId: `m${i}`, outcome: WriteOutcome.CREATED, version: 1n })) };
  });
  server.handlers.set("memoryd.v1.MemoryService/Recall", (request: RecallRequest) => {
    if (request.keys.includes("iban")) {
      throw new StatusError(grpc.status.PERMISSION_DENIED, "memoryd says VIEW_DENIED", {
        reason: "VIEW_DENIED",
        requestId: "req-denied",
      });
    }
    return { memories: [] };
  });
});

const writes = () => server.seen.filter((call) => call.method.endsWith("/Write")).map((call) => call.request as WriteRequest);

describe("retries", () => {
  it("retries a Write after UNAVAILABLE with one generated idempotency key", async () => {
    const client = createMemorydClient({ target, token: "t0ken", retry: FAST });
    server.unavailableLeft = 2;
    const response = await client.write({ subject: "alice", items: [{ text: "likes tea" }] });
    client.close();
    assert.equal(response.results[0]?.memoryId, "m0");
    assert.equal(writes().length, 3);
    const keys = new Set(writes().map((w) => w.idempotencyKey));
    assert.equal(keys.size, 1);
    assert.match([...keys][0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(server.header("authorization"), ["Bearer t0ken", "Bearer t0ken", "Bearer t0ken"]);
  });

  it("keeps the caller's idempotency key and sends no authorization without a token", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    await client.write({ subject: "alice", idempotencyKey: "mine", items: [{ text: "x" }] });
    client.close();
    assert.equal(writes()[0]?.idempotencyKey, "mine");
    assert.deepEqual(server.header("authorization"), [null]);
  });

  it("gives up after four attempts and reports UNAVAILABLE", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    server.unavailableLeft = 10;
    await assert.rejects(client.recall({ subject: "alice", keys: ["x"] }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "UNAVAILABLE");
      assert.equal(error.reason, "STORE_UNAVAILABLE");
      assert.ok(error.retryable);
      return true;
    });
    client.close();
    assert.equal(server.seen.length, 4);
  });

  it("tries ResolveConflict, ImportMemories and a versioned PutView once", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    const once = [
      () => client.resolveConflict({ subject: "alice", memoryId: "m1" }),
      () => client.importMemories({ subject: "alice" }),
      () => client.views.putView({ view: { agent: "bot" }, expectedVersion: 3n }),
    ];
    for (const call of once) {
      server.reset();
      server.unavailableLeft = 10;
      await assert.rejects(call(), (error: unknown) => error instanceof MemorydError && error.codeName === "UNAVAILABLE");
      assert.equal(server.seen.length, 1, server.seen[0]?.method);
    }
    client.close();
  });

  it("retries a PutView without an expected version", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    server.unavailableLeft = 2;
    await client.views.putView({ view: { agent: "bot" } });
    client.close();
    assert.equal(server.seen.length, 3);
  });

  it("waits the server's RetryInfo delay when it is longer than the backoff", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    server.unavailableLeft = 1;
    server.unavailableDetails = { retryDelayMs: 300 };
    const started = Date.now();
    await client.recall({ subject: "alice" });
    client.close();
    assert.equal(server.seen.length, 2);
    assert.ok(Date.now() - started >= 290, `retried after ${Date.now() - started} ms`);
  });

  it("stops retrying when the caller's overall signal fires during the pause", async () => {
    const client = createMemorydClient({ target, retry: { initialBackoffMs: 5000, maxBackoffMs: 5000, jitter: 0 } });
    const overall = new AbortController();
    server.handlers.set("memoryd.v1.MemoryService/Recall", () => {
      setTimeout(() => overall.abort(), 200); // the answer is back by then; the client is pausing
      throw unavailable();
    });
    const started = Date.now();
    await assert.rejects(
      client.recall({ subject: "alice" }, { signal: overall.signal }),
      (error: unknown) => error instanceof MemorydError && error.codeName === "UNAVAILABLE",
    );
    client.close();
    assert.equal(server.seen.length, 1);
    assert.ok(Date.now() - started < 4000, `gave up after ${Date.now() - started} ms, not during the 5 s pause`);
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
      assert.equal(error.retryable, false);
      return true;
    });
    client.close();
    assert.equal(server.seen.length, 1);
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
});

describe("deadlines", () => {
  it("gives each attempt 30 seconds by default", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    server.unavailableLeft = 1;
    await client.views.getView({ agent: "bot" });
    client.close();
    assert.equal(server.seen.length, 2);
    for (const call of server.seen) {
      // 30 s at the client; what is left on arrival (the machine may be busy) is a little less.
      assert.ok(call.deadlineMs > 25_000 && call.deadlineMs <= 30_000, `deadline ${call.deadlineMs} ms away`);
    }
  });

  it("applies a call's own timeoutMs and does not retry DEADLINE_EXCEEDED", async () => {
    const client = createMemorydClient({ target, retry: FAST });
    await client.getHistory({ subject: "alice" }); // the connection is up before the timed call
    server.handlers.set("memoryd.v1.MemoryService/Recall", () => new Promise((resolve) => setTimeout(() => resolve({}), 1500)));
    const started = Date.now();
    await assert.rejects(client.recall({ subject: "alice" }, { timeoutMs: 300 }), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "DEADLINE_EXCEEDED");
      return true;
    });
    client.close();
    assert.ok(Date.now() - started < 1400, `gave up after ${Date.now() - started} ms`);
    assert.equal(server.seen.filter((call) => call.method.endsWith("/Recall")).length, 1);
  });
});

describe("token provider", () => {
  it("is asked before every attempt, so a refreshed token is used without a new client", async () => {
    let issued = 0;
    const client = createMemorydClient({ target, retry: FAST, token: async () => `token-${++issued}` });
    server.unavailableLeft = 2;
    await client.recall({ subject: "alice" });
    await client.views.listViews({});
    client.close();
    assert.deepEqual(server.header("authorization"), [
      "Bearer token-1",
      "Bearer token-2",
      "Bearer token-3",
      "Bearer token-4",
    ]);
  });

  it("sends no authorization when it returns an empty token", async () => {
    const client = createMemorydClient({ target, token: () => "" });
    await client.recall({ subject: "alice" });
    client.close();
    assert.deepEqual(server.header("authorization"), [null]);
  });

  it("lets the provider's own failure through and calls nothing", async () => {
    const client = createMemorydClient({ target, retry: FAST, token: () => Promise.reject(new Error("vault sealed")) });
    await assert.rejects(client.recall({ subject: "alice" }), /vault sealed/);
    client.close();
    assert.equal(server.seen.length, 0);
  });
});

describe("page iterators", () => {
  const memories = Array.from({ length: 7 }, (_, i) => ({ id: `m${i}`, key: `k${i}`, text: `memory ${i}` }));

  it("iterMemories walks every MemoryView page", async () => {
    server.handlers.set("memoryd.v1.MemoryService/MemoryView", (request: MemoryViewRequest) => {
      const start = request.pageToken ? Number(request.pageToken) : 0;
      const end = start + request.pageSize;
      return { memories: memories.slice(start, end), nextPageToken: end < memories.length ? String(end) : "" };
    });
    const client = createMemorydClient({ target, token: "t", retry: FAST });
    const request = create(MemoryViewRequestSchema, { subject: "alice", pageSize: 3 });
    server.unavailableLeft = 0;
    const seen: Memory[] = [];
    for await (const memory of client.iterMemories(request)) {
      seen.push(memory);
      if (seen.length === 3) server.unavailableLeft = 1; // a page fetch fails once mid-walk and is retried
    }
    client.close();
    assert.deepEqual(seen.map((m) => m.id), memories.map((m) => m.id));
    const pages = server.seen.map((call) => (call.request as MemoryViewRequest).pageToken);
    assert.deepEqual(pages, ["", "3", "3", "6"]);
    assert.ok(server.seen.every((call) => (call.request as MemoryViewRequest).subject === "alice"));
    assert.equal(request.pageToken, "", "the caller's request is not changed by paging");
  });

  it("views.iterViews walks every ListViews page", async () => {
    const agents = ["a", "b", "c", "d", "e"];
    server.handlers.set("memoryd.v1.ViewAdminService/ListViews", (request: ListViewsRequest) => {
      const start = agents.indexOf(request.pageToken || "a");
      const page = agents.slice(start, start + request.pageSize);
      return { views: page.map((agent) => ({ agent })), nextPageToken: agents[start + request.pageSize] ?? "" };
    });
    const client = createMemorydClient({ target });
    const seen: string[] = [];
    for await (const view of client.views.iterViews({ pageSize: 2 })) seen.push(view.agent);
    client.close();
    assert.deepEqual(seen, agents);
    assert.equal(server.seen.length, 3);
  });

  it("a single empty page ends the walk", async () => {
    const client = createMemorydClient({ target });
    const seen = [];
    for await (const view of client.views.iterViews()) seen.push(view);
    client.close();
    assert.deepEqual(seen, []);
    assert.equal(server.seen.length, 1);
  });
});

describe("surface", () => {
  it("reaches ViewAdminService under views", async () => {
    server.handlers.set("memoryd.v1.ViewAdminService/GetView", (request: { agent: string }) => ({
      view: create(ViewSchema, { agent: request.agent, description: "from the test server" }),
    }));
    const client = createMemorydClient({ target });
    const response = await client.views.getView({ agent: "support-bot" });
    client.close();
    assert.equal(response.view?.agent, "support-bot");
  });

  it("spells codes as gRPC does", () => {
    assert.equal(grpcCodeName(Code.Canceled), "CANCELLED");
    assert.equal(grpcCodeName(Code.ResourceExhausted), "RESOURCE_EXHAUSTED");
    assert.equal(grpcCodeName(Code.Unauthenticated), "UNAUTHENTICATED");
  });
});
