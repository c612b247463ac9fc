// The resuming WatchStream against a real gRPC server on loopback (grpc-js) that scripts what
// each open of the stream does: the cursor each re-open carries, when the client re-opens
// (UNAVAILABLE, a clean end, silence) and when it gives up (any other error).
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createMemorydClient, MemorydError, type WatchStream } from "../src/client.js";
import { MemoryChangeKind, type WatchRequest, type WatchResponse } from "../src/gen/memoryd/v1/memory_service_pb.js";
import { StatusError, TestServer, unavailable } from "./support/grpc-server.js";

const WATCH = "memoryd.v1.MemoryService/Watch";
const FAST = { initialBackoffMs: 1, maxBackoffMs: 5 };
const server = new TestServer();
let target = "";

before(async () => {
  target = (await server.start()).target;
});
after(() => server.stop());
beforeEach(() => server.reset());

const change = (cursor: string, text: string) => ({
  cursor,
  event: { case: "change" as const, value: { kind: MemoryChangeKind.CREATED, memory: { text } } },
});
const heartbeat = (cursor: string) => ({ cursor, event: { case: "heartbeat" as const, value: {} } });
/** held keeps a stream open until the client cancels it. */
const held = (call: grpc.ServerWritableStream<unknown, unknown>) =>
  new Promise<void>((resolve) => call.on("cancelled", () => resolve()));
const cursors = () => server.seen.filter((s) => s.method === WATCH).map((s) => (s.request as WatchRequest).cursor);

/** take reads n messages from the stream, then closes it. */
async function take(stream: WatchStream, n: number): Promise<WatchResponse[]> {
  const got: WatchResponse[] = [];
  for await (const message of stream) {
    got.push(message);
    if (got.length === n) break;
  }
  return got;
}

describe("watch", () => {
  it("re-opens after UNAVAILABLE from the last cursor, heartbeats included, asking for the token again", async () => {
    let opens = 0;
    server.streams.set(WATCH, async (_request, send, call) => {
      opens++;
      if (opens === 1) {
        send(change("c1", "first"));
        send(heartbeat("c2"));
        throw unavailable();
      }
      send(change("c3", "second"));
      await held(call);
    });
    const tokens = ["t1", "t2"];
    const client = createMemorydClient({ target, token: () => tokens.shift() ?? "", retry: FAST });
    const stream = client.watch({ subject: "trip-7" });
    const got = await take(stream, 2);
    client.close();
    assert.deepEqual(got.map((m) => m.cursor), ["c1", "c3"]); // the heartbeat is not yielded
    assert.deepEqual(cursors(), ["", "c2"]);
    assert.equal(stream.cursor, "c3");
    assert.deepEqual(server.header("authorization"), ["Bearer t1", "Bearer t2"]);
    assert.deepEqual(server.seen.map((s) => Number.isFinite(s.deadlineMs)), [false, false]); // no deadline
  });

  it("re-opens a stream that ended without an error, and one that went silent", async () => {
    let opens = 0;
    server.streams.set(WATCH, async (_request, send, call) => {
      opens++;
      if (opens === 1) return send(change("c1", "ended after this"));
      if (opens === 2) {
        send(change("c2", "silent after this"));
        return held(call);
      }
      send(change("c3", "after the silence"));
      await held(call);
    });
    const client = createMemorydClient({ target, retry: FAST, heartbeatIntervalMs: 30 });
    const got = await take(client.watch({ subject: "trip-7", cursor: "c0" }), 3);
    client.close();
    assert.deepEqual(got.map((m) => m.cursor), ["c1", "c2", "c3"]);
    assert.deepEqual(cursors(), ["c0", "c1", "c2"]);
    // After the silence, a connection of its own: the client's may be the half-open one.
    const [first, second, third] = server.seen.map((s) => s.peer);
    assert.equal(first, second);
    assert.notEqual(third, second);
  });

  it("yields heartbeats when asked", async () => {
    server.streams.set(WATCH, async (_request, send, call) => {
      send(heartbeat("h1"));
      send(change("c2", "x"));
      await held(call);
    });
    const client = createMemorydClient({ target });
    const got = await take(client.watch({ subject: "trip-7" }, { heartbeats: true }), 2);
    client.close();
    assert.deepEqual(got.map((m) => m.event.case), ["heartbeat", "change"]);
  });

  it("throws any other error as a MemorydError and does not re-open", async () => {
    server.streams.set(WATCH, async () => {
      throw new StatusError(grpc.status.FAILED_PRECONDITION, "cursor too old", { reason: "CURSOR_EXPIRED" });
    });
    const client = createMemorydClient({ target, retry: FAST });
    const stream = client.watch({ subject: "trip-7", cursor: "old" });
    await assert.rejects(stream.next(), (error: unknown) => {
      assert.ok(error instanceof MemorydError);
      assert.equal(error.codeName, "FAILED_PRECONDITION");
      assert.equal(error.reason, "CURSOR_EXPIRED");
      return true;
    });
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
    client.close();
    assert.deepEqual(cursors(), ["old"]);
  });

  it("waitOpen resolves once the server answered the headers, and close ends the iteration", async () => {
    server.streams.set(WATCH, async (_request, _send, call) => {
      call.sendMetadata(new grpc.Metadata());
      await held(call);
    });
    const client = createMemorydClient({ target });
    const stream = client.watch({ subject: "trip-7" });
    assert.equal(await stream.waitOpen(10_000), true);
    const ended = take(stream, 1);
    stream.close();
    assert.deepEqual(await ended, []);
    client.close();
    assert.equal(cursors().length, 1);
  });
});
