// The thin typed wrapper over the generated memoryd.v1 code: one HTTP/2 gRPC connection, the
// bearer token on every call, a default deadline, retries on UNAVAILABLE only (memoryd promises
// nothing was written then), and errors as MemorydError with the google.rpc details decoded.
import { randomUUID } from "node:crypto";
import { clone, create, isMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createClient,
  type CallOptions,
  type Client,
  type Interceptor,
} from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { MemoryService, WriteRequestSchema } from "./gen/memoryd/v1/memory_service_pb.js";
import { ViewAdminService } from "./gen/memoryd/v1/view_admin_service_pb.js";

/** How calls that fail with UNAVAILABLE are tried again: exponential backoff with full jitter. */
export interface RetryPolicy {
  /** maxAttempts counts the first call too; 1 turns retries off. */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 4, initialBackoffMs: 100, maxBackoffMs: 2000, multiplier: 2 };
export const DEFAULT_TIMEOUT_MS = 10_000;

/** TLS settings; `true` means TLS with the system's trust store. cert + key make it mutual TLS. */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  serverName?: string;
}

export interface MemorydClientOptions {
  /** target is `host:port` (or a full `http://` / `https://` URL). */
  target: string;
  /** token is the bearer token memoryd issued for this agent (sent as `authorization`). */
  token?: string;
  tls?: boolean | TlsOptions;
  /** timeoutMs is the default deadline of a call, retries included (a call's own timeoutMs wins). */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
}

/** One violated field of a google.rpc.BadRequest detail. */
export interface FieldViolation {
  field: string;
  description: string;
}

/** MemorydError is every failed call: the gRPC status plus memoryd's ErrorInfo and BadRequest details. */
export class MemorydError extends Error {
  override readonly name = "MemorydError";
  /** code is the gRPC status code. */
  readonly code: Code;
  /** codeName is the gRPC name of the code: `PERMISSION_DENIED`, `UNAVAILABLE`, … */
  readonly codeName: string;
  /** reason is the ErrorInfo reason (`VIEW_DENIED`, `TOKEN_MISSING`, …), or "" when absent. */
  readonly reason: string;
  readonly domain: string;
  readonly violations: FieldViolation[];
  /** requestId names the call in the server's logs (ErrorInfo metadata or the x-request-id trailer). */
  readonly requestId: string;

  constructor(error: ConnectError) {
    super(error.rawMessage, { cause: error });
    this.code = error.code;
    this.codeName = grpcCodeName(error.code);
    const info = error.findDetails(ErrorInfoSchema)[0];
    this.reason = info?.reason ?? "";
    this.domain = info?.domain ?? "";
    this.violations = error
      .findDetails(BadRequestSchema)
      .flatMap((detail) => detail.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
    this.requestId = info?.metadata["request_id"] || error.metadata.get("x-request-id") || "";
  }

  /** retryable is true only for UNAVAILABLE: a store was down and nothing was written. */
  get retryable(): boolean {
    return this.code === Code.Unavailable;
  }
}

/** grpcCodeName gives the gRPC spelling of a status code (Code.PermissionDenied → PERMISSION_DENIED). */
export function grpcCodeName(code: Code): string {
  if (code === Code.Canceled) return "CANCELLED";
  const name = Code[code] as string | undefined;
  if (name === undefined) return "UNKNOWN";
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** toMemorydError turns anything a call threw into a MemorydError. */
export function toMemorydError(error: unknown): MemorydError {
  return error instanceof MemorydError ? error : new MemorydError(ConnectError.from(error));
}

/** backoffDelayMs is the pause before retry number `retry` (1 for the first retry): full jitter. */
export function backoffDelayMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (retry - 1));
  return Math.floor(random() * ceiling);
}

/** withRetries runs `attempt` until it succeeds, fails with a non-retryable error, or runs out of tries or time. */
export async function withRetries<T>(
  attempt: (timeoutMs: number) => Promise<T>,
  policy: RetryPolicy,
  timeoutMs: number,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  now: () => number = Date.now,
): Promise<T> {
  const deadline = now() + timeoutMs;
  for (let tried = 1; ; tried++) {
    try {
      return await attempt(Math.max(1, deadline - now()));
    } catch (error) {
      const failure = toMemorydError(error);
      if (!failure.retryable || tried >= policy.maxAttempts) throw failure;
      const pause = backoffDelayMs(tried, policy);
      if (now() + pause >= deadline) throw failure;
      await sleep(pause);
    }
  }
}

/** MemorydClient has every MemoryService RPC as a method, and ViewAdminService under `views`. */
export type MemorydClient = Client<typeof MemoryService> & {
  readonly views: Client<typeof ViewAdminService>;
  /** close drops the connection; calls after it reconnect. */
  close(): void;
};

function baseUrl(target: string, tls: boolean): string {
  if (/^https?:\/\//.test(target)) return target;
  return `${tls ? "https" : "http"}://${target}`;
}

function wrap<S extends DescService>(
  service: S,
  raw: Client<S>,
  defaults: { timeoutMs: number; retry: RetryPolicy },
): Client<S> {
  const wrapped: Record<string, unknown> = {};
  for (const method of service.methods) {
    const call = (raw as Record<string, (request: unknown, options?: CallOptions) => Promise<unknown>>)[
      method.localName
    ]!;
    wrapped[method.localName] = (request: unknown, options: CallOptions = {}) => {
      const prepared = method.input.typeName === WriteRequestSchema.typeName ? withIdempotencyKey(request) : request;
      return withRetries(
        (timeoutMs) => call(prepared, { ...options, timeoutMs }),
        defaults.retry,
        options.timeoutMs ?? defaults.timeoutMs,
      );
    };
  }
  return wrapped as Client<S>;
}

// A Write retried after UNAVAILABLE must not write twice: give it an idempotency key when the caller did not.
function withIdempotencyKey(request: unknown): unknown {
  const init = request as MessageInitShape<typeof WriteRequestSchema>;
  if (init.idempotencyKey) return init;
  const message = isMessage(init, WriteRequestSchema) ? clone(WriteRequestSchema, init) : create(WriteRequestSchema, init);
  message.idempotencyKey = randomUUID();
  return message;
}

/** createMemorydClient connects to memoryd (lazily: the first call opens the connection). */
export function createMemorydClient(options: MemorydClientOptions): MemorydClient {
  const tls = options.tls === true ? {} : options.tls || undefined;
  const url = baseUrl(options.target, tls !== undefined);
  const nodeOptions = tls ? { ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.serverName } : {};
  const sessionManager = new Http2SessionManager(url, {}, nodeOptions);
  const interceptors: Interceptor[] = [];
  if (options.token) {
    const bearer = `Bearer ${options.token}`;
    interceptors.push((next) => (request) => {
      request.header.set("authorization", bearer);
      return next(request);
    });
  }
  const transport = createGrpcTransport({ baseUrl: url, sessionManager, interceptors });
  const defaults = {
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    retry: { ...DEFAULT_RETRY, ...options.retry },
  };
  const memory = wrap(MemoryService, createClient(MemoryService, transport), defaults);
  const views = wrap(ViewAdminService, createClient(ViewAdminService, transport), defaults);
  return Object.assign(memory, { views, close: () => sessionManager.abort() });
}
