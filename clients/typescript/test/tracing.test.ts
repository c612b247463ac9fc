// W3C trace context reaches the server from the caller's active OpenTelemetry span (its own
// process: node --test runs each file alone, so the global OpenTelemetry setup stays here).
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { context, propagation, trace, TraceFlags, type SpanContext } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { TraceState, W3CTraceContextPropagator } from "@opentelemetry/core";
import { createMemorydClient } from "../src/client.js";
import { TestServer } from "./support/grpc-server.js";

const server = new TestServer();
const span: SpanContext = {
  traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
  spanId: "00f067aa0ba902b7",
  traceFlags: TraceFlags.SAMPLED,
  traceState: new TraceState("memoryd=test,other=1"),
};
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const inSpan = <T>(fn: () => Promise<T>) => context.with(trace.setSpanContext(context.active(), span), fn);

before(async () => {
  await server.start();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
after(() => server.stop());
beforeEach(() => server.reset());

describe("trace context", () => {
  it("sends nothing when no span is active", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const client = createMemorydClient({ target: server.target });
    await client.recall({ subject: "alice" });
    client.close();
    assert.deepEqual(server.header("traceparent"), [null]);
    assert.deepEqual(server.header("tracestate"), [null]);
    propagation.disable();
  });

  it("sends the active span's traceparent and tracestate through the registered propagator, on every attempt", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const client = createMemorydClient({ target: server.target, token: "t", retry: { initialBackoffMs: 1 } });
    server.unavailableLeft = 1;
    await inSpan(() => client.write({ subject: "alice", items: [{ text: "x" }] }));
    await inSpan(() => client.views.listViews({}));
    client.close();
    assert.deepEqual(server.header("traceparent"), [TRACEPARENT, TRACEPARENT, TRACEPARENT]);
    assert.deepEqual(server.header("tracestate"), Array(3).fill("memoryd=test,other=1"));
    assert.deepEqual(server.header("authorization"), Array(3).fill("Bearer t"));
    propagation.disable();
  });

  it("writes W3C trace context itself when no propagator is registered", async () => {
    const client = createMemorydClient({ target: server.target });
    await inSpan(() => client.recall({ subject: "alice" }));
    await client.recall({ subject: "alice" }); // outside the span again
    client.close();
    assert.deepEqual(server.header("traceparent"), [TRACEPARENT, null]);
    assert.deepEqual(server.header("tracestate"), ["memoryd=test,other=1", null]);
  });

  it("follows the span that is active when each call starts", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const client = createMemorydClient({ target: server.target });
    const other = { ...span, spanId: "1111111111111111", traceFlags: TraceFlags.NONE, traceState: undefined };
    await Promise.all([
      inSpan(() => client.recall({ subject: "a" })),
      context.with(trace.setSpanContext(context.active(), other), () => client.recall({ subject: "b" })),
    ]);
    client.close();
    const bySubject = Object.fromEntries(
      server.seen.map((call) => [(call.request as { subject: string }).subject, call.metadata.get("traceparent")[0]]),
    );
    assert.deepEqual(bySubject, { a: TRACEPARENT, b: "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-00" });
    propagation.disable();
  });
});
