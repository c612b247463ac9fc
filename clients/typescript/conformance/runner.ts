// The conformance runner (clients/conformance/README.md): node build/conformance/runner.js SCENARIO CONFIG.
// Prints one `ok <n> <name>` or `FAIL <n> <name>: <why>` line per step; exits 0 only if all passed.
import { readFileSync } from "node:fs";
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { createMemorydClient, grpcCodeName, toMemorydError, type MemorydClient } from "../src/client.js";
import { MemoryService } from "../src/gen/memoryd/v1/memory_service_pb.js";

interface Step {
  name: string;
  caller: string;
  rpc: string;
  request: JsonValue;
  expect: {
    code: string;
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
  for (const [path, raw] of Object.entries(step.expect.equals ?? {})) {
    const expected = substitute(raw, vars);
    const actual = lookup(response, path);
    if (!same(actual, expected)) problems.push(`${path} is ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`);
  }
  for (const [path, raw] of Object.entries(step.expect.texts ?? {})) {
    const expected = substitute(raw, vars) as JsonValue[];
    const list = lookup(response, path);
    const texts = (Array.isArray(list) ? list : []).map((element) => lookup(element, "text"));
    if (sortedMultiset(texts) !== sortedMultiset(expected)) {
      problems.push(`texts of ${path} are ${JSON.stringify(texts)}, want ${JSON.stringify(expected)}`);
    }
  }
  for (const [path, allowed] of Object.entries(step.expect.fields_within ?? {})) {
    const list = lookup(response, path);
    for (const [i, element] of (Array.isArray(list) ? list : []).entries()) {
      const extra = Object.keys(element as object).filter((name) => !allowed.includes(name));
      if (extra.length) problems.push(`${path}[${i}] carries ${extra.join(", ")}`);
    }
  }
  return problems;
}

async function runStep(step: Step, clients: Map<string, MemorydClient>, config: Config, vars: Vars): Promise<string[]> {
  const client = clients.get(step.caller);
  if (!client) return [`unknown caller ${step.caller}`];
  const method = MemoryService.methods.find((m) => m.name === step.rpc);
  if (!method) return [`unknown rpc ${step.rpc}`];
  const request = fromJson(method.input, substitute(step.request, { ...config.vars, ...vars }));
  const call = (client as unknown as Record<string, (r: unknown) => Promise<unknown>>)[method.localName]!;
  let response: JsonValue = null;
  let code = "OK";
  let reason = "";
  let violations: string[] = [];
  try {
    response = toJson(method.output, (await call(request)) as never);
  } catch (error) {
    const failure = toMemorydError(error);
    code = grpcCodeName(failure.code);
    reason = failure.reason;
    violations = failure.violations.map((v) => v.field);
    if (step.expect.code !== code) return [`code is ${code} (${failure.message}), want ${step.expect.code}`];
  }
  if (step.expect.code !== code) return [`code is ${code}, want ${step.expect.code}`];
  const problems: string[] = [];
  if (step.expect.reason !== undefined && step.expect.reason !== reason) {
    problems.push(`reason is ${JSON.stringify(reason)}, want ${JSON.stringify(step.expect.reason)}`);
  }
  if (step.expect.violations !== undefined) {
    const want = [...new Set(step.expect.violations)].sort();
    const got = [...new Set(violations)].sort();
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
  let failed = 0;
  for (const [i, step] of scenario.steps.entries()) {
    let problems: string[];
    try {
      problems = await runStep(step, clients, config, vars);
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
