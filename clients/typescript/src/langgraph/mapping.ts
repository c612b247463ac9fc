// How a LangGraph item is written as a memoryd memory and read back: pure functions, no I/O, the
// TypeScript twin of the Python client's memoryd/client/langgraph/_mapping.py, byte for byte, so
// that a graph in either language reads the other's items:
//
//     namespace ["users", "u-42", "prefs"] + key "theme"
//         memory key   lg/users.u-42.prefs/theme          (one memory per namespace and key)
//         tags         langgraph, lg:users, lg:users.u-42, lg:users.u-42.prefs   (one per prefix)
//         text         what the index fields of the value say (what Recall searches)
//         data         {"langgraph": {"namespace": [...], "key": ..., "value": "<the value as JSON>"}}
//
// Python's json.dumps is reproduced (pyJson) because the long-key hash and the searched text are
// made of its output, and the value's JSON text is written as Python writes it.
import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Item, MatchCondition } from "@langchain/langgraph-checkpoint";
import type { Memory } from "../gen/memoryd/v1/memory_pb.js";

export const MARKER_TAG = "langgraph";
export const MAX_KEY_BYTES = 128; // MemoryDraft.key
const MAX_TAG_BYTES = 64; // MemoryDraft.tags[*]
export const MAX_DEPTH = 31; // MemoryDraft.tags holds 32: the marker and one per prefix
const MAX_TEXT_BYTES = 8 * 1024; // the server's default text limit; the exact value is in data anyway
const EPOCH = new Date(0);

const LABEL_SAFE = /^[A-Za-z0-9_-]$/;
const KEY_SAFE = /^[A-Za-z0-9._/-]$/;
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/; // what memoryd refuses in a tag

const utf8 = (text: string): Buffer => Buffer.from(text, "utf8");
const sha256 = (text: string): string => createHash("sha256").update(utf8(text)).digest("hex");

function escape(text: string, safe: RegExp): string {
  let out = "";
  for (const c of text) {
    out += safe.test(c) ? c : [...utf8(c)].map((b) => ":" + b.toString(16).padStart(2, "0")).join("");
  }
  return out;
}

/** The memoryd key of an item: `lg/` + the labels joined by `.` + `/` + the key, escaped; too long
 * for memoryd, a hash of both (`lg/:h…`, which no escape starts: never a readable key). */
export function memoryKey(namespace: readonly string[], key: string): string {
  const readable = "lg/" + namespace.map((label) => escape(label, LABEL_SAFE)).join(".") + "/" + escape(key, KEY_SAFE);
  if (readable.length <= MAX_KEY_BYTES) return readable; // all ASCII once escaped: length is bytes
  return "lg/:h" + sha256(pyJson([[...namespace], key], { ascii: true })).slice(0, 48);
}

/** The tag every item under `prefix` carries (`[]` → the marker every item carries). */
export function prefixTag(prefix: readonly string[]): string {
  if (prefix.length === 0) return MARKER_TAG;
  const joined = prefix.join(".");
  const tag = "lg:" + joined;
  if (utf8(tag).length <= MAX_TAG_BYTES && !CONTROL.test(tag)) return tag;
  return "lg#" + sha256(joined).slice(0, 40);
}

/** The marker and one tag per prefix of `namespace`: a search of any prefix is a tag filter. */
export function namespaceTags(namespace: readonly string[]): string[] {
  if (namespace.length > MAX_DEPTH) {
    throw new RangeError(`memoryd stores namespaces up to ${MAX_DEPTH} labels deep (one tag per prefix), ` +
      `got ${namespace.length}`);
  }
  return Array.from({ length: namespace.length + 1 }, (_, depth) => prefixTag(namespace.slice(0, depth)));
}

// --- Python's json.dumps ----------------------------------------------------------------------

/** Python's order of str: by code point (JavaScript's < compares UTF-16 units). */
export function comparePy(a: string, b: string): number {
  const x = [...a], y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
  "\b": "\\b", "\f": "\\f" };

function pyString(text: string, ascii: boolean): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!, unit = text.charCodeAt(i);
    if (SHORT_ESCAPES[c] !== undefined) out += SHORT_ESCAPES[c];
    else if (unit < 0x20 || (ascii && unit > 0x7e)) out += "\\u" + unit.toString(16).padStart(4, "0");
    else out += c;
  }
  return out + '"';
}

/** A number as Python writes it: a safe integer as an int (JavaScript cannot tell 1 from 1.0), any
 * other as float's repr (`1.5e-07`, `1.5e+300`: exponent from 1e16), which is what it holds. */
function pyNumber(n: number): string {
  if (!Number.isFinite(n)) throw new TypeError(`MemorydStore stores JSON values: ${n} is not JSON`);
  if (Number.isSafeInteger(n)) return String(n);
  const [mantissa, exp] = n.toExponential().split("e") as [string, string];
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  return String(n); // JavaScript writes these positionally, with the same shortest digits
}

interface PyJsonOptions {
  /** ascii: ensure_ascii=True (every character past `~` as \uXXXX). */
  ascii?: boolean;
  sortKeys?: boolean;
  /** compact: separators=(",", ":") instead of Python's default (", ", ": "). */
  compact?: boolean;
}

/** `json.dumps(value, ...)` as Python writes it for the same JSON value. */
export function pyJson(value: unknown, options: PyJsonOptions = {}): string {
  const [comma, colon] = options.compact ? [",", ":"] : [", ", ": "];
  const write = (v: unknown): string => {
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON: () => unknown }).toJSON(); // a Date, as JSON.stringify writes it
    }
    if (v === null) return "null";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "number") return pyNumber(v);
    if (typeof v === "string") return pyString(v, options.ascii ?? false);
    if (Array.isArray(v)) return "[" + v.map((e) => (e === undefined ? "null" : write(e))).join(comma) + "]";
    if (typeof v === "object") {
      let keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
      if (options.sortKeys) keys = keys.sort(comparePy);
      return "{" + keys.map((k) => pyString(k, options.ascii ?? false) + colon + write((v as Record<string, unknown>)[k]))
        .join(comma) + "}";
    }
    throw new TypeError(`MemorydStore stores JSON values: a ${typeof v} is not JSON`);
  };
  return write(value);
}

// --- the searched text (LangGraph's get_text_at_path, as Python's store reads paths) -------------

/** Python LangGraph's tokenize_path: `a.b[0].{c,d}` → `a`, `b`, `[0]`, `{c,d}`. */
export function tokenizePath(path: string): string[] {
  const tokens: string[] = [];
  let current = "";
  for (let i = 0; i < path.length;) {
    const c = path[i]!;
    if (c === "[" || c === "{") {
      const close = c === "[" ? "]" : "}";
      if (current) tokens.push(current), (current = "");
      let depth = 1, token = c;
      for (i++; i < path.length && depth > 0; i++) {
        if (path[i] === c) depth++;
        else if (path[i] === close) depth--;
        token += path[i];
      }
      tokens.push(token);
      continue;
    }
    if (c === ".") {
      if (current) tokens.push(current), (current = "");
    } else current += c;
    i++;
  }
  if (current) tokens.push(current);
  return tokens;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
/** Python's dict.get: own fields only (a value's `constructor` is no field of it). */
const field = (o: Record<string, unknown>, name: string): unknown => (Object.hasOwn(o, name) ? o[name] : undefined);
const pyJsonSorted = (v: unknown): string => pyJson(v, { sortKeys: true });

/** Python's str() of a leaf: `True`, `1`, `1.5`, the string itself; lists and dicts as JSON. */
function leafText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "number") return pyNumber(v);
  if (Array.isArray(v) || isObject(v)) return pyJsonSorted(v);
  return undefined;
}

/** Python LangGraph's get_text_at_path (`$` = the whole value as JSON, keys sorted). */
export function getTextAtPath(obj: unknown, path: string | string[]): string[] {
  if (path.length === 0 || path === "$") return [pyJsonSorted(obj)];
  const tokens = typeof path === "string" ? tokenizePath(path) : path;
  const extract = (v: unknown, pos: number): string[] => {
    if (pos >= tokens.length) {
      const text = leafText(v);
      return text === undefined ? [] : [text];
    }
    const token = tokens[pos]!;
    if (token.startsWith("[") && token.endsWith("]")) {
      if (!Array.isArray(v)) return [];
      const index = token.slice(1, -1);
      if (index === "*") return v.flatMap((e) => extract(e, pos + 1));
      if (!/^\s*[+-]?\d+\s*$/.test(index)) return []; // what Python's int() accepts, roughly
      let i = parseInt(index, 10);
      if (i < 0) i += v.length;
      return i >= 0 && i < v.length ? extract(v[i], pos + 1) : [];
    }
    if (token.startsWith("{") && token.endsWith("}")) {
      if (!isObject(v)) return [];
      const found: string[] = [];
      for (const name of token.slice(1, -1).split(",").map((f) => f.trim())) {
        const nested = tokenizePath(name);
        if (nested.length === 0) continue;
        let current: unknown = v;
        for (const label of nested) current = isObject(current) ? field(current, label) ?? null : null;
        if (current === null || current === undefined) continue;
        const text = leafText(current);
        if (text !== undefined) found.push(text);
      }
      return found;
    }
    if (token === "*") {
      if (isObject(v)) return Object.values(v).flatMap((e) => extract(e, pos + 1));
      return Array.isArray(v) ? v.flatMap((e) => extract(e, pos + 1)) : [];
    }
    return isObject(v) && Object.hasOwn(v, token) ? extract(v[token], pos + 1) : [];
  };
  return extract(obj, 0);
}

/** The memory's text: what `fields` pick from the value, one per line; `undefined` (index false) or
 * nothing picked → the key, since memoryd needs a text. Cut to the server's default text limit. */
export function valueText(key: string, value: Record<string, unknown>, fields: readonly string[] | undefined): string {
  const pieces = (fields ?? []).flatMap((path) => getTextAtPath(value, path === "$" ? path : tokenizePath(path)));
  const text = pieces.filter((p) => p.trim()).join("\n") || key;
  const bytes = utf8(text);
  if (bytes.length <= MAX_TEXT_BYTES) return text;
  let end = MAX_TEXT_BYTES;
  while ((bytes[end]! & 0xc0) === 0x80) end--; // not inside a character (Python: errors="ignore")
  return bytes.subarray(0, end).toString("utf8");
}

/** The memory's `data`: where the item is and its value as JSON text (exact round trip). */
export function itemData(namespace: readonly string[], key: string, value: Record<string, unknown>,
  ttlMinutes: number | undefined): JsonObject {
  const entry: JsonObject = { namespace: [...namespace], key, value: pyJson(value, { compact: true }) };
  if (ttlMinutes !== undefined) entry.ttl_minutes = ttlMinutes;
  return { langgraph: entry };
}

/** The item a memory holds, or null for a memory the store did not write, whose `data` the caller's
 * view hides, or whose TTL has run out (by this clock: MemoryView still lists a lapsed validity). */
export function storedItem(memory: Memory): Item | null {
  const entry = memory.data?.["langgraph"];
  if (!isObject(entry)) return null;
  if (memory.validUntil && timestampDate(memory.validUntil).getTime() <= Date.now()) return null;
  const { namespace, key, value } = entry;
  if (!Array.isArray(namespace) || typeof key !== "string" || typeof value !== "string") return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (!isObject(parsed)) return null;
  const createdAt = memory.createdAt ? timestampDate(memory.createdAt) : EPOCH;
  const updatedAt = memory.updatedAt ? timestampDate(memory.updatedAt) : createdAt;
  return { value: parsed, key, namespace: namespace.map(String), createdAt, updatedAt };
}

/** LangGraph's prefix/suffix match, `*` matching any one label. */
export function namespaceMatches(condition: MatchCondition, namespace: readonly string[]): boolean {
  const path = condition.path;
  if (namespace.length < path.length) return false;
  const labels = condition.matchType === "prefix" ? namespace.slice(0, path.length)
    : namespace.slice(namespace.length - path.length);
  return path.every((p, i) => p === "*" || p === labels[i]);
}

// --- search filters, as Python's store (and InMemoryStore) read them -----------------------------

/** Python's ==: a missing field is None, true == 1, lists and dicts compared element by element. */
function pyEquals(a: unknown, b: unknown): boolean {
  a = a === undefined ? null : a;
  b = b === undefined ? null : b;
  if (typeof a === "boolean" && typeof b === "number") a = Number(a);
  if (typeof b === "boolean" && typeof a === "number") b = Number(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((e, i) => pyEquals(e, b[i]));
  }
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && pyEquals(a[k], b[k]));
  }
  return a === b;
}

const ORDERED: Record<string, (d: number) => boolean> = { $gt: (d) => d > 0, $gte: (d) => d >= 0, $lt: (d) => d < 0,
  $lte: (d) => d <= 0 };

function operator(value: unknown, op: string, operand: unknown): boolean {
  if (op === "$eq") return pyEquals(value, operand);
  if (op === "$ne") return !pyEquals(value, operand);
  const ordered = ORDERED[op];
  if (ordered) {
    // Numbers compare as numbers, strings as strings; anything else (a missing field, a number
    // against a string, a boolean) does not match, where InMemoryStore raises.
    if (typeof value === "number" && typeof operand === "number") return ordered(value - operand);
    if (typeof value === "string" && typeof operand === "string") return ordered(comparePy(value, operand));
    return false;
  }
  throw new RangeError(`unsupported filter operator '${op}' (MemorydStore knows $eq, $ne, $gt, $gte, $lt, $lte)`);
}

function compare(value: unknown, wanted: unknown): boolean {
  if (isObject(wanted)) {
    if (Object.keys(wanted).some((k) => k.startsWith("$"))) {
      return Object.entries(wanted).every(([op, operand]) => operator(value, op, operand));
    }
    return isObject(value) && Object.entries(wanted).every(([k, w]) => compare(field(value, k), w));
  }
  if (Array.isArray(wanted)) {
    return Array.isArray(value) && value.length === wanted.length && wanted.every((w, i) => compare(value[i], w));
  }
  return pyEquals(value, wanted);
}

/** Whether an item's value passes a `search` filter: each field equal (nested objects field by
 * field, arrays element by element) or passing its operators. */
export function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown> | undefined): boolean {
  return Object.entries(filter ?? {}).every(([name, wanted]) => compare(field(value, name), wanted));
}
