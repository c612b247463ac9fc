// The conformance runner (clients/conformance/README.md): node build/conformance/runner.js SCENARIO CONFIG.
// Prints one `ok <n> <name>` or `FAIL <n> <name>: <why>` line per step; exits 0 only if all passed.
import { readFileSync } from "node:fs";
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import {
  createMemorydClient,
  grpcCodeName,
  MemorydError,
  toMemorydError,
  type MemorydClient,
  type WatchStream,
} from "../src/client.js";
import { MemoryService, WatchResponseSchema, type WatchResponse } from "../src/gen/memoryd/v1/memory_service_pb.js";

interface Step {
  name: string;
  caller: string;
  rpc: string;
  request: JsonValue;
  /** open, next, none and close drive a watch (clients/conformance/README.md, "Watch steps"). */
  open?: string;
  next?: string;
  none?: string;
  close?: string;
  seconds?: number;
  expect?: {
    code?: string;
    reason?: string;
    violations?: string[];
    equals?: Record<string, JsonValue>;
    texts?: Record<string, string[]>;
    fields_within?: Record<string, string[]>;
  };
  save?: Record<string, string>;
}

interface Config {
  target: string;
  tokens: Record<string, string>;
  vars: Record<string, string>;
}

type Vars = Record<string, string>;

function substitute(value: JsonValue, vars: Vars): JsonValue {
  if (typeof value === "string") {
    return value.replace(/\$\{([^}]+)\}/g, (whole, name: string) => {
      if (!(name in vars)) throw new Error(`no value for ${whole}`);
      return vars[name]!;
    });
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, vars));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, vars)]));
  }
  return value;
}

/** lookup reads a dot/[i] path; `x.length` counts a repeated field; absent is null. */
function lookup(root: JsonValue, path: string): JsonValue {
  let current: JsonValue | undefined = root;
  for (const part of path.split(".")) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!match) throw new Error(`bad path ${path}`);
    const [, name, indices] = match;
    if (name === "length" && (Array.isArray(current) || current === null || current === undefined)) {
      current = Array.isArray(current) ? current.length : 0;
      continue;
    }
    if (name) {
      current =
        current !== null && typeof current === "object" && !Array.isArray(current) ? current[name!] : undefined;
    }
    for (const index of indices!.matchAll(/\[(\d+)\]/g)) {
      current = Array.isArray(current) ? current[Number(index[1])] : undefined;
    }
  }
  return current === undefined ? null : current;
}

function same(a: JsonValue, b: JsonValue): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical(value[key]!)]),
    );
  }
  return value;
}

function sortedMultiset(values: JsonValue[]): string {
  return JSON.stringify(values.map((v) => JSON.stringify(v)).sort());
}

function checkResponse(step: Step, response: JsonValue, vars: Vars): string[] {
  const problems: string[] = [];
  const expect = step.expect ?? { code: "OK" };
  for (const [path, raw] of Object.entries(expect.equals ?? {})) {
    const expected = substitute(raw, vars);
    const actual = lookup(response, path);
    if (!same(actual, expected)) problems.push(`${path} is ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`);
  }
  for (const [path, raw] of Object.entries(expect.texts ?? {})) {
    const expected = substitute(raw, vars) as JsonValue[];
    const list = lookup(response, path);
    const texts = (Array.isArray(list) ? list : []).map((element) => lookup(element, "text"));
    if (sortedMultiset(texts) !== sortedMultiset(expected)) {
      problems.push(`texts of ${path} are ${JSON.stringify(texts)}, want ${JSON.stringify(expected)}`);
    }
  }
  for (const [path, allowed] of Object.entries(expect.fields_within ?? {})) {
    const found = lookup(response, path);
    // A repeated field's elements, or one message.
    const elements = Array.isArray(found) ? found : found !== null && typeof found === "object" ? [found] : [];
    for (const [i, element] of elements.entries()) {
      const extra = Object.keys(element as object).filter((name) => !allowed.includes(name));
      const where = Array.isArray(found) ? `${path}[${i}]` : path;
      if (extra.length) problems.push(`${where} carries ${extra.join(", ")}`);
    }
  }
  return problems;
}

/** checkOutcome checks a step's expect against a response (JSON) or a failure; saves on success. */
function checkOutcome(step: Step, response: JsonValue, failure: MemorydError | undefined, vars: Vars, config: Config): string[] {
  const expect = step.expect ?? { code: "OK" };
  const code = failure ? grpcCodeName(failure.code) : "OK";
  const want = expect.code ?? "OK"; // a watch step's expect names no code
  if (want !== code) {
    return [failure ? `code is ${code} (${failure.message}), want ${want}` : `code is ${code}, want ${want}`];
  }
  const problems: string[] = [];
  if (expect.reason !== undefined && expect.reason !== (failure?.reason ?? "")) {
    problems.push(`reason is ${JSON.stringify(failure?.reason ?? "")}, want ${JSON.stringify(expect.reason)}`);
  }
  if (expect.violations !== undefined) {
    const want = [...new Set(expect.violations)].sort();
    const got = [...new Set((failure?.violations ?? []).map((v) => v.field))].sort();
    if (JSON.stringify(want) !== JSON.stringify(got)) {
      problems.push(`violations are ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  }
  if (code === "OK") problems.push(...checkResponse(step, response, { ...config.vars, ...vars }));
  if (problems.length === 0) {
    for (const [name, path] of Object.entries(step.save ?? {})) {
      const value = lookup(response, path);
      vars[name] = typeof value === "string" ? value : JSON.stringify(value);
    }
  }
  return problems;
}

/** WAIT_MS bounds a `next` step's wait for a change. */
const WAIT_MS = 15_000;
/** OPEN_MS bounds an `open` step's wait for the server to accept the stream (README). */
const OPEN_MS = 2_000;

/** An open watch step: its stream, and the read still pending when a step stopped waiting for it. */
class OpenWatch {
  #pending: Promise<IteratorResult<WatchResponse, void>> | undefined;

  constructor(readonly stream: WatchStream) {}

  /** within reads the next change, or undefined when none came in time (the read stays pending for the next step). */
  async within(ms: number): Promise<IteratorResult<WatchResponse, void> | undefined> {
    const pending = (this.#pending ??= this.stream.next());
    pending.catch(() => {}); // read by whichever step awaits it; never an unhandled rejection
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
    try {
      const result = await Promise.race([pending, late]);
      if (result !== undefined) this.#pending = undefined;
      return result;
    } catch (error) {
      this.#pending = undefined;
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }
}

async function readStep(step: Step, watches: Map<string, OpenWatch>, config: Config, vars: Vars): Promise<string[]> {
  const name = step.next ?? step.none!;
  const watch = watches.get(name);
  if (!watch) return [`no open watch ${name}`];
  const ms = step.next !== undefined ? WAIT_MS : (step.seconds ?? 0) * 1000;
  let result: IteratorResult<WatchResponse, void> | undefined;
  try {
    result = await watch.within(ms);
  } catch (error) {
    return [`the stream failed: ${toMemorydError(error).message}`];
  }
  if (step.none !== undefined) {
    if (result === undefined) return [];
    return [result.done ? "the stream ended" : `expected nothing within ${step.seconds} s, got ${JSON.stringify(toJson(WatchResponseSchema, result.value))}`];
  }
  if (result === undefined) return [`no change within ${WAIT_MS / 1000} s`];
  if (result.done) return ["the stream ended"];
  return checkOutcome(step, toJson(WatchResponseSchema, result.value), undefined, vars, config);
}

async function openStep(step: Step, client: MemorydClient, request: unknown, watches: Map<string, OpenWatch>,
                        config: Config, vars: Vars): Promise<string[]> {
  const stream = client.watch(request as Parameters<MemorydClient["watch"]>[0]);
  const watch = new OpenWatch(stream);
  if ((step.expect?.code ?? "OK") !== "OK") {
    // A bad request: its error comes with the first read.
    let outcome: string[];
    try {
      const result = await watch.within(WAIT_MS);
      const response = result && !result.done ? toJson(WatchResponseSchema, result.value) : null;
      outcome = checkOutcome(step, response, undefined, vars, config);
    } catch (error) {
      outcome = checkOutcome(step, null, toMemorydError(error), vars, config);
    }
    stream.close();
    return outcome;
  }
  await stream.waitOpen(OPEN_MS); // false only tells that the server sends its headers late (README)
  watches.set(step.open!, watch);
  return [];
}

async function runStep(step: Step, clients: Map<string, MemorydClient>, watches: Map<string, OpenWatch>,
                       config: Config, vars: Vars): Promise<string[]> {
  if (step.next !== undefined || step.none !== undefined) return readStep(step, watches, config, vars);
  if (step.close !== undefined) {
    watches.get(step.close)?.stream.close();
    return watches.delete(step.close) ? [] : [`no open watch ${step.close}`];
  }
  const client = clients.get(step.caller);
  if (!client) return [`unknown caller ${step.caller}`];
  const method = MemoryService.methods.find((m) => m.name === step.rpc);
  if (!method) return [`unknown rpc ${step.rpc}`];
  const request = fromJson(method.input, substitute(step.request, { ...config.vars, ...vars }));
  if (step.open !== undefined) return openStep(step, client, request, watches, config, vars);
  const call = (client as unknown as Record<string, (r: unknown) => Promise<unknown>>)[method.localName]!;
  try {
    return checkOutcome(step, toJson(method.output, (await call(request)) as never), undefined, vars, config);
  } catch (error) {
    return checkOutcome(step, null, toMemorydError(error), vars, config);
  }
}

async function main(argv: string[]): Promise<number> {
  if (argv.length !== 2) {
    process.stderr.write("usage: node build/conformance/runner.js SCENARIO CONFIG\n");
    return 2;
  }
  const scenario = JSON.parse(readFileSync(argv[0]!, "utf8")) as { steps: Step[] };
  const config = JSON.parse(readFileSync(argv[1]!, "utf8")) as Config;
  const clients = new Map<string, MemorydClient>();
  for (const [caller, token] of Object.entries(config.tokens)) {
    // The scenario checks the first answer; a retry would only blur what the server said.
    clients.set(caller, createMemorydClient({ target: config.target, token, timeoutMs: 60_000, retry: { maxAttempts: 1 } }));
  }
  const vars: Vars = {};
  const watches = new Map<string, OpenWatch>();
  let failed = 0;
  for (const [i, step] of scenario.steps.entries()) {
    let problems: string[];
    try {
      problems = await runStep(step, clients, watches, config, vars);
    } catch (error) {
      problems = [error instanceof Error ? error.message : String(error)];
    }
    if (problems.length === 0) {
      process.stdout.write(`ok ${i + 1} ${step.name}\n`);
    } else {
      failed++;
      process.stdout.write(`FAIL ${i + 1} ${step.name}: ${problems.join("; ").replace(/\n/g, " ")}\n`);
    }
  }
  for (const watch of watches.values()) watch.stream.close();
  for (const client of clients.values()) client.close();
  return failed === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(`conformance: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 2;
  },
);
