// What every memoryd client does the same way (clients/conformance/policy.json; the tests check
// these constants and the method table against that file): the deadline of one attempt, which
// codes are retried, the backoff between attempts, and which methods a retry is safe for.
import type { PutViewRequest } from "./gen/memoryd/v1/view_admin_service_pb.js";

/** DEFAULT_TIMEOUT_MS is the deadline of one attempt of a call (not of the call with its retries). */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** How calls that fail with UNAVAILABLE are tried again. */
export interface RetryPolicy {
  /** maxAttempts counts the first call too; 1 turns retries off. */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
  /** jitter scales each pause by a uniform random factor in [1 - jitter, 1]. */
  jitter: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 4,
  initialBackoffMs: 100,
  maxBackoffMs: 2000,
  multiplier: 2,
  jitter: 0.5,
});

/** RETRY_CODES are the gRPC status codes a call is retried on: memoryd promises nothing was written then. */
export const RETRY_CODES: readonly string[] = Object.freeze(["UNAVAILABLE"]);

/**
 * When a method may be retried: `always`; `never` (a replay could apply twice); or
 * `unless_expected_version` (PutView: a replay with a version fails on the version the first
 * attempt bumped, so only an unversioned PutView is retried); `resume` (Watch, a stream: the
 * client's watch iterator re-opens it from its last cursor instead of replaying the call).
 */
export type RetryRule = "always" | "never" | "unless_expected_version" | "resume";

/** METHOD_RETRY is the retry rule of every RPC, by full method name (`memoryd.v1.MemoryService/Write`). */
export const METHOD_RETRY: Readonly<Record<string, RetryRule>> = Object.freeze({
  // Write is safe because the client gives it an idempotency key before the first attempt.
  "memoryd.v1.MemoryService/Write": "always",
  "memoryd.v1.MemoryService/Recall": "always",
  "memoryd.v1.MemoryService/Erase": "always",
  "memoryd.v1.MemoryService/MemoryView": "always",
  "memoryd.v1.MemoryService/GetHistory": "always",
  "memoryd.v1.MemoryService/GetExtractionJob": "always",
  // The contract gives these no idempotency key.
  "memoryd.v1.MemoryService/ResolveConflict": "never",
  "memoryd.v1.MemoryService/ExportMemories": "always",
  "memoryd.v1.MemoryService/ImportMemories": "never",
  "memoryd.v1.MemoryService/Watch": "resume",
  // Ending a session again rebuilds the same snapshot.
  "memoryd.v1.MemoryService/EndSession": "always",
  "memoryd.v1.MemoryService/ResumeSession": "always",
  "memoryd.v1.ViewAdminService/PutView": "unless_expected_version",
  "memoryd.v1.ViewAdminService/GetView": "always",
  "memoryd.v1.ViewAdminService/ListViews": "always",
  "memoryd.v1.ViewAdminService/DeleteView": "always",
});

/** WATCH_HEARTBEAT_MS is the server's default heartbeat interval on an idle Watch stream. */
export const WATCH_HEARTBEAT_MS = 15_000;

/** WATCH_STALL_FACTOR: a Watch stream silent for this many heartbeat intervals is taken for dead and re-opened. */
export const WATCH_STALL_FACTOR = 3;

/** HTTP/2 keepalive pings, as Connect's Http2SessionManager takes them. */
export interface Keepalive {
  /** pingIntervalMs: a connection that received nothing for this long is pinged. */
  pingIntervalMs: number;
  /** pingTimeoutMs: a ping unanswered for this long closes the connection (the next call connects afresh). */
  pingTimeoutMs: number;
  /** pingIdleConnection: a connection with no call open is pinged too. */
  pingIdleConnection: boolean;
}

/**
 * KEEPALIVE is every client's default: a connection a NAT or proxy dropped without a word is
 * found out by a ping instead of by a call waiting out its deadline. A memoryd server accepts a
 * ping every 5 s and answers faster ones with GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
 */
export const KEEPALIVE: Readonly<Keepalive> = Object.freeze({
  pingIntervalMs: 30_000,
  pingTimeoutMs: 10_000,
  pingIdleConnection: true,
});

/** keepaliveOf is the Http2SessionManager ping options for a client's `keepalive` option (false: no pings). */
export function keepaliveOf(keepalive: Partial<Keepalive> | false | undefined): Partial<Keepalive> {
  return keepalive === false ? {} : { ...KEEPALIVE, ...keepalive };
}

/** mayRetry says whether this request to this method may be sent again after UNAVAILABLE. */
export function mayRetry(method: string, request: unknown): boolean {
  // A method missing from the table is one this code does not know the effects of: never replay it.
  const rule = METHOD_RETRY[method] ?? "never";
  if (rule === "unless_expected_version") {
    const version = (request as Partial<PutViewRequest> | undefined)?.expectedVersion;
    return !version; // 0, 0n or absent
  }
  return rule === "always";
}

/**
 * backoffDelayMs is the pause before retry number `retry` (1 for the first retry):
 * min(maxBackoff, initialBackoff * multiplier^(retry-1)), scaled by a uniform random factor in
 * [1 - jitter, 1] so clients that failed together do not come back together.
 */
export function backoffDelayMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (retry - 1));
  return ceiling * (1 - policy.jitter * random());
}
