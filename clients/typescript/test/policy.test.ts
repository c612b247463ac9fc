// The client follows clients/conformance/policy.json, the one policy every memoryd client shares:
// its constants and method table are read against the file, and then every method is called
// against a real gRPC server that answers UNAVAILABLE, counting the attempts the server saw.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, beforeEach, describe, it } from "node:test";
import type { DescService } from "@bufbuild/protobuf";
import { createMemorydClient, WatchStream, type MemorydClient } from "../src/client.js";
import { MemoryService } from "../src/gen/memoryd/v1/memory_service_pb.js";
import { ViewAdminService } from "../src/gen/memoryd/v1/view_admin_service_pb.js";
import {
  backoffDelayMs,
  DEFAULT_RETRY,
  DEFAULT_TIMEOUT_MS,
  KEEPALIVE,
  keepaliveOf,
  METHOD_RETRY,
  RETRY_CODES,
  WATCH_HEARTBEAT_MS,
  WATCH_STALL_FACTOR,
} from "../src/policy.js";
import { TestServer } from "./support/grpc-server.js";

interface Policy {
  deadline_seconds: number;
  retry: {
    codes: string[];
    max_attempts: number;
    initial_backoff_seconds: number;
    max_backoff_seconds: number;
    multiplier: number;
    jitter: number;
  };
  methods: Record<string, { retry: string }>;
  page_iterators: string[];
  watch: { heartbeat_seconds: number; stall_factor: number };
  keepalive: { time_seconds: number; timeout_seconds: number; permit_without_calls: boolean };
}

// build/test/policy.test.js → clients/conformance/policy.json
const policy = JSON.parse(readFileSync(new URL("../../../conformance/policy.json", import.meta.url), "utf8")) as Policy;

const SERVICES: DescService[] = [MemoryService, ViewAdminService];
const exposed = SERVICES.flatMap((service) => service.methods.map((method) => `${service.typeName}/${method.name}`));
// TokenAdminService is for operators (`memoryd token issue`); this client does not wrap it.
const forClients = Object.keys(policy.methods).filter((name) => !name.startsWith("memoryd.v1.TokenAdminService/"));

describe("policy.json", () => {
  it("sets the deadline of one attempt", () => {
    assert.equal(DEFAULT_TIMEOUT_MS, policy.deadline_seconds * 1000);
  });

  it("sets the keepalive pings every connection of a client makes", () => {
    const want = {
      pingIntervalMs: policy.keepalive.time_seconds * 1000,
      pingTimeoutMs: policy.keepalive.timeout_seconds * 1000,
      pingIdleConnection: policy.keepalive.permit_without_calls,
    };
    assert.deepEqual({ ...KEEPALIVE }, want);
    assert.deepEqual(keepaliveOf(undefined), want);
    assert.deepEqual(keepaliveOf({ pingIntervalMs: 60_000 }), { ...want, pingIntervalMs: 60_000 });
    assert.deepEqual(keepaliveOf(false), {});
  });

  it("sets the retried codes, attempts and backoff", () => {
    assert.deepEqual([...RETRY_CODES], policy.retry.codes);
    assert.deepEqual(
      { ...DEFAULT_RETRY },
      {
        maxAttempts: policy.retry.max_attempts,
        initialBackoffMs: policy.retry.initial_backoff_seconds * 1000,
        maxBackoffMs: policy.retry.max_backoff_seconds * 1000,
        multiplier: policy.retry.multiplier,
        jitter: policy.retry.jitter,
      },
    );
  });

  it("has a retry rule for every method the client exposes, the same as the policy's", () => {
    assert.deepEqual([...exposed].sort(), forClients.sort(), "the client's methods and the policy's");
    const rules = Object.fromEntries(exposed.map((name) => [name, METHOD_RETRY[name]]));
    const wanted = Object.fromEntries(exposed.map((name) => [name, policy.methods[name]?.retry]));
    assert.deepEqual(rules, wanted);
  });

  it("has an iterator for every paged method the policy names", () => {
    const client = createMemorydClient({ target: "127.0.0.1:1" });
    const iterators: Record<string, unknown> = {
      "memoryd.v1.MemoryService/MemoryView": client.iterMemories,
      "memoryd.v1.ViewAdminService/ListViews": client.views.iterViews,
    };
    client.close();
    for (const method of policy.page_iterators) assert.equal(typeof iterators[method], "function", method);
  });

  it("streams exactly the methods it resumes, through a resuming watch with the policy's heartbeat and stall factor", () => {
    const streams = MemoryService.methods.filter((m) => m.methodKind !== "unary").map((m) => `${MemoryService.typeName}/${m.name}`);
    assert.deepEqual(streams, forClients.filter((name) => policy.methods[name]?.retry === "resume"));
    assert.equal(WATCH_HEARTBEAT_MS, policy.watch.heartbeat_seconds * 1000);
    assert.equal(WATCH_STALL_FACTOR, policy.watch.stall_factor);
    const client = createMemorydClient({ target: "127.0.0.1:1" });
    const watch = client.watch({ subject: "alice" });
    assert.ok(watch instanceof WatchStream);
    watch.close();
    client.close();
  });

  it("backs off min(max, initial * multiplier^(n-1)) scaled by a factor in [1 - jitter, 1]", () => {
    const ceilings = [100, 200, 400, 800, 1600, 2000, 2000];
    for (const [i, ceiling] of ceilings.entries()) {
      const retry = i + 1;
      assert.equal(backoffDelayMs(retry, DEFAULT_RETRY, () => 0), ceiling, `retry ${retry}, factor 1`);
      assert.equal(backoffDelayMs(retry, DEFAULT_RETRY, () => 1), ceiling * (1 - policy.retry.jitter), `retry ${retry}, lowest factor`);
    }
    for (let n = 0; n < 1000; n++) {
      const delay = backoffDelayMs(3, DEFAULT_RETRY);
      assert.ok(delay >= 400 * (1 - policy.retry.jitter) && delay <= 400, String(delay));
    }
  });
});

describe("attempts per method against a server that answers UNAVAILABLE", () => {
  const server = new TestServer();
  let client: MemorydClient;
  before(async () => {
    await server.start();
    client = createMemorydClient({ target: server.target, retry: { initialBackoffMs: 1, maxBackoffMs: 2 } });
  });
  after(() => {
    client.close();
    server.stop();
  });
  beforeEach(() => server.reset());

  // A request for each method that the method's own rule looks at (PutView is called both ways below).
  const call = (name: string, request: object = {}) => {
    const [service, method] = name.split("/") as [string, string];
    const desc = SERVICES.find((s) => s.typeName === service)!.methods.find((m) => m.name === method)!;
    const target = (service === ViewAdminService.typeName ? client.views : client) as unknown as Record<
      string,
      (request: object) => Promise<unknown>
    >;
    return target[desc.localName]!(request);
  };

  // A stream is not a call to count attempts of: the watch tests cover how Watch re-opens.
  const unary = forClients.filter((name) => policy.methods[name]?.retry !== "resume");
  const cases = unary.map((name) => [name, policy.methods[name]!] as const).flatMap(([name, { retry }]) =>
    retry === "unless_expected_version"
      ? [
          { name, request: {}, retried: true, label: `${name} without expected_version` },
          { name, request: { expectedVersion: 7n }, retried: false, label: `${name} with expected_version` },
        ]
      : [{ name, request: {}, retried: retry === "always", label: name }],
  );

  for (const { name, request, retried, label } of cases) {
    it(`${label}: ${retried ? `up to ${policy.retry.max_attempts} attempts` : "one attempt"}`, async () => {
      server.unavailableLeft = 100;
      await assert.rejects(call(name, request), { codeName: "UNAVAILABLE" });
      assert.deepEqual(
        server.seen.map((seen) => seen.method),
        Array(retried ? policy.retry.max_attempts : 1).fill(name),
      );
    });
  }
});
