// The thin typed wrapper over the generated memoryd.v1 code: one HTTP/2 gRPC connection; the
// bearer token (fixed, or from a provider asked before every attempt); W3C trace context from
// the caller's OpenTelemetry span; a deadline per attempt; retries on UNAVAILABLE only (memoryd
// promises nothing was written then) and only for methods a replay cannot apply twice (policy.ts);
// page iterators; a Watch iterator that resumes from its last cursor; and errors as MemorydError
// with the google.rpc details decoded.
import { randomUUID } from "node:crypto";
import { clone, create, isMessage, type DescMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type CallOptions, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import type { Memory, View } from "./gen/memoryd/v1/memory_pb.js";
import {
  MemoryService,
  MemoryViewRequestSchema,
  WatchRequestSchema,
  WriteRequestSchema,
  type WatchRequest,
  type WatchResponse,
} from "./gen/memoryd/v1/memory_service_pb.js";
import { ListViewsRequestSchema, ViewAdminService } from "./gen/memoryd/v1/view_admin_service_pb.js";
import {
  backoffDelayMs,
  DEFAULT_RETRY,
  DEFAULT_TIMEOUT_MS,
  keepaliveOf,
  mayRetry,
  RETRY_CODES,
  WATCH_HEARTBEAT_MS,
  WATCH_STALL_FACTOR,
  type Keepalive,
  type RetryPolicy,
} from "./policy.js";
import { traceHeaders } from "./tracing.js";

/** TLS settings; `true` means TLS with the system's trust store. cert + key make it mutual TLS. */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  serverName?: string;
}

/**
 * A TokenProvider is asked for the bearer token before every attempt of every call, so a token
 * can be refreshed without rebuilding the client. An empty string sends no `authorization`.
 */
export type TokenProvider = () => string | Promise<string>;

export interface MemorydClientOptions {
  /** target is `host:port` (or a full `http://` / `https://` URL). */
  target: string;
  /** token is the bearer token memoryd issued for this agent, or a function that returns the current one. */
  token?: string | TokenProvider;
  tls?: boolean | TlsOptions;
  /**
   * timeoutMs is the deadline of each attempt of a call (default 30 s; a call's own `timeoutMs`
   * wins; 0 or less: none). A call's `signal` (e.g. `AbortSignal.timeout(ms)`) bounds the whole
   * call, its retries and pauses included.
   */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /**
   * heartbeatIntervalMs is the server's heartbeat interval on an idle Watch (default 15 s): a
   * watch that hears nothing for WATCH_STALL_FACTOR of them re-opens its stream (0: never).
   */
  heartbeatIntervalMs?: number;
  /**
   * keepalive: the HTTP/2 pings of the client's connections (default KEEPALIVE: after 30 s of
   * silence, idle connections too; false: none). A pingIntervalMs under the server's accepted
   * interval (5 s by default) gets the connection closed with GOAWAY "too_many_pings".
   */
  keepalive?: Partial<Keepalive> | false;
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
  /** retryDelayMs is the server's RetryInfo delay, when it sent one. */
  readonly retryDelayMs: number | undefined;

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
    const delay = error.findDetails(RetryInfoSchema)[0]?.retryDelay;
    this.retryDelayMs = delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : undefined;
  }

  /** retryable is true only for UNAVAILABLE: a store was down and nothing was written. */
  get retryable(): boolean {
    return RETRY_CODES.includes(this.codeName);
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

export interface RetryOptions {
  /** retryable false means one attempt whatever the policy says (the method is not safe to replay). */
  retryable?: boolean;
  /** signal stops retrying: no attempt is started and no pause is waited after it aborts. */
  signal?: AbortSignal;
  /** sleep waits ms, or resolves false early when the signal aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<boolean>;
  random?: () => number;
}

/**
 * withRetries runs `attempt` until it succeeds, fails with a code other than UNAVAILABLE, or runs
 * out of attempts. Between attempts it waits the policy's backoff, or the server's RetryInfo
 * delay when that is longer. gRPC failures come out as MemorydError; anything else `attempt`
 * throws (a token provider's own error) comes out unchanged and is not retried.
 */
export async function withRetries<T>(attempt: () => Promise<T>, policy: RetryPolicy, options: RetryOptions = {}): Promise<T> {
  const { retryable = true, signal, sleep = pause, random = Math.random } = options;
  const attempts = retryable ? Math.max(1, policy.maxAttempts) : 1;
  for (let tried = 1; ; tried++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof ConnectError || error instanceof MemorydError)) throw error;
      const failure = toMemorydError(error);
      if (!failure.retryable || tried >= attempts || signal?.aborted) throw failure;
      const wait = Math.max(backoffDelayMs(tried, policy, random), failure.retryDelayMs ?? 0);
      if (!(await sleep(wait, signal))) throw failure;
    }
  }
}

function pause(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

type RequestOf<M extends DescMessage> = MessageInitShape<M>;

/** The ViewAdminService calls, plus an iterator over every view. */
export type MemorydViewsClient = Client<typeof ViewAdminService> & {
  /** iterViews yields every view of the tenant, following next_page_token (ListViews) page after page. */
  iterViews(request?: RequestOf<typeof ListViewsRequestSchema>, options?: CallOptions): AsyncGenerator<View, void>;
};

/** The options of one watch: a call's (its `signal` closes the watch), and the iterator's own. */
export interface WatchOptions extends Omit<CallOptions, "timeoutMs"> {
  /** heartbeats also yields the heartbeats (each carries the current cursor); by default only changes. */
  heartbeats?: boolean;
  /** heartbeatIntervalMs overrides the client's for this watch. */
  heartbeatIntervalMs?: number;
}

/** MemorydClient has every MemoryService RPC as a method, and ViewAdminService under `views`. */
export type MemorydClient = Omit<Client<typeof MemoryService>, "watch"> & {
  /**
   * watch streams the changes to a subject's memories that the caller's view reads, as a
   * WatchStream: an async iterable that re-opens the stream from its last cursor when the
   * connection drops, ends or goes silent. The stream has no deadline; `close()` (or the
   * options' `signal`) ends it.
   */
  watch(request: RequestOf<typeof WatchRequestSchema>, options?: WatchOptions): WatchStream;
  readonly views: MemorydViewsClient;
  /** iterMemories yields every memory a MemoryView shows, following next_page_token page after page. */
  iterMemories(request: RequestOf<typeof MemoryViewRequestSchema>, options?: CallOptions): AsyncGenerator<Memory, void>;
  /** close drops the connection; calls after it reconnect. */
  close(): void;
};

function baseUrl(target: string, tls: boolean): string {
  if (/^https?:\/\//.test(target)) return target;
  return `${tls ? "https" : "http"}://${target}`;
}

interface Defaults {
  timeoutMs: number;
  retry: RetryPolicy;
  token: TokenProvider;
  heartbeatIntervalMs: number;
}

type RawCall = (request: unknown, options?: CallOptions) => Promise<unknown>;

function wrap<S extends DescService>(service: S, raw: Client<S>, defaults: Defaults): Client<S> {
  const wrapped: Record<string, RawCall> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue; // a stream is not replayed as a call (Watch: see WatchStream)
    const call = (raw as Record<string, RawCall>)[method.localName]!;
    const fullName = `${service.typeName}/${method.name}`;
    wrapped[method.localName] = async (request: unknown, options: CallOptions = {}) => {
      // Before the first attempt, so every retry of a Write carries the same key.
      const prepared = fullName === `${MemoryService.typeName}/Write` ? withIdempotencyKey(request) : request;
      const trace = await traceHeaders();
      return withRetries(
        async () => {
          const headers = new Headers(options.headers);
          for (const [name, value] of Object.entries(trace)) headers.set(name, value);
          const token = await defaults.token();
          if (token) headers.set("authorization", `Bearer ${token}`);
          return call(prepared, { ...options, headers, timeoutMs: options.timeoutMs ?? defaults.timeoutMs });
        },
        defaults.retry,
        { retryable: mayRetry(fullName, prepared), signal: options.signal },
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

// The iterators copy the request: the caller's message is never changed by paging.
async function* memoriesOf(
  memory: Client<typeof MemoryService>,
  request: RequestOf<typeof MemoryViewRequestSchema>,
  options?: CallOptions,
): AsyncGenerator<Memory, void> {
  const next = isMessage(request, MemoryViewRequestSchema)
    ? clone(MemoryViewRequestSchema, request)
    : create(MemoryViewRequestSchema, request);
  do {
    const page = await memory.memoryView(next, options);
    yield* page.memories;
    next.pageToken = page.nextPageToken;
  } while (next.pageToken);
}

async function* viewsOf(
  admin: Client<typeof ViewAdminService>,
  request: RequestOf<typeof ListViewsRequestSchema> = {},
  options?: CallOptions,
): AsyncGenerator<View, void> {
  const next = isMessage(request, ListViewsRequestSchema)
    ? clone(ListViewsRequestSchema, request)
    : create(ListViewsRequestSchema, request);
  do {
    const page = await admin.listViews(next, options);
    yield* page.views;
    next.pageToken = page.nextPageToken;
  } while (next.pageToken);
}

type RawWatch = (request: RequestOf<typeof WatchRequestSchema>, options?: CallOptions) => AsyncIterable<WatchResponse>;

/** A connection of a watch's own: opened after a silence, since the client's may be the half-open one. */
interface OwnConnection {
  watch: RawWatch;
  close(): void;
}

/**
 * WatchStream is what `client.watch()` returns: the changes of a Watch, as an async iterable that
 * resumes by itself. It remembers the cursor of the last message received (`cursor`: persist it,
 * and a later watch from it gets every change after it exactly once) and re-opens the stream
 * from it, after the retry policy's backoff, when the stream fails with UNAVAILABLE, ends
 * without an error, or is silent for WATCH_STALL_FACTOR heartbeat intervals. Any other failure
 * is thrown as a MemorydError and ends the iteration. The token provider is asked before every
 * (re-)open.
 */
export class WatchStream implements AsyncIterableIterator<WatchResponse> {
  #cursor: string;
  readonly #closing = new AbortController();
  readonly #run: AsyncGenerator<WatchResponse, void>;
  #opened: () => void = () => {};
  readonly #open = new Promise<void>((resolve) => (this.#opened = resolve));
  #ahead: Promise<IteratorResult<WatchResponse, void>> | undefined;
  #own: OwnConnection | undefined;
  readonly #connect: (() => OwnConnection) | undefined;

  constructor(
    raw: RawWatch,
    request: RequestOf<typeof WatchRequestSchema>,
    defaults: Defaults,
    options: WatchOptions,
    connect?: () => OwnConnection,
  ) {
    this.#connect = connect;
    const init = isMessage(request, WatchRequestSchema) ? clone(WatchRequestSchema, request) : create(WatchRequestSchema, request);
    this.#cursor = init.cursor;
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
    if (options.signal?.aborted) this.close();
    this.#run = this.#resume(raw, init, defaults, options);
  }

  /** cursor is the cursor of the last message received (the request's own before any). */
  get cursor(): string {
    return this.#cursor;
  }

  /** close cancels the stream and ends the iteration; safe to call twice. */
  close(): void {
    this.#closing.abort();
    this.#own?.close();
  }

  /**
   * waitOpen opens the stream now and resolves true once the server accepted it (its response
   * headers arrived): a change committed after that is delivered. False after `timeoutMs`. An
   * error the server answered with is thrown by the next `next()`.
   */
  async waitOpen(timeoutMs: number): Promise<boolean> {
    const ahead = (this.#ahead ??= this.#run.next());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const answered = ahead.then(
      () => true,
      () => true,
    );
    try {
      return await Promise.race([this.#open.then(() => true), answered, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  next(): Promise<IteratorResult<WatchResponse, void>> {
    const ahead = this.#ahead;
    this.#ahead = undefined;
    return ahead ?? this.#run.next();
  }

  async return(): Promise<IteratorResult<WatchResponse, void>> {
    this.close();
    return this.#run.return();
  }

  [Symbol.asyncIterator](): WatchStream {
    return this;
  }

  async *#resume(raw: RawWatch, request: WatchRequest, defaults: Defaults, options: WatchOptions): AsyncGenerator<WatchResponse, void> {
    const closing = this.#closing.signal;
    const interval = options.heartbeatIntervalMs ?? defaults.heartbeatIntervalMs;
    const stallMs = interval > 0 ? interval * WATCH_STALL_FACTOR : 0;
    let reopens = 0; // since the last message received: the backoff's n
    while (!closing.aborted) {
      const attempt = new AbortController();
      const cancel = () => attempt.abort();
      closing.addEventListener("abort", cancel, { once: true });
      let stalled = false;
      let timer: NodeJS.Timeout | undefined;
      // Silence is measured only while waiting for the server, not while the caller holds a message.
      const arm = () => {
        clearTimeout(timer);
        if (stallMs > 0) timer = setTimeout(() => ((stalled = true), attempt.abort()), stallMs);
      };
      try {
        const headers = new Headers(options.headers);
        for (const [name, value] of Object.entries(await traceHeaders())) headers.set(name, value);
        const token = await defaults.token();
        if (token) headers.set("authorization", `Bearer ${token}`);
        arm();
        const opening = clone(WatchRequestSchema, request);
        opening.cursor = this.#cursor;
        const stream = raw(
          opening,
          {
            ...options,
            headers,
            signal: attempt.signal,
            onHeader: (received) => {
              this.#opened();
              options.onHeader?.(received);
            },
          },
        );
        for await (const message of stream) {
          clearTimeout(timer);
          reopens = 0;
          if (message.cursor) this.#cursor = message.cursor;
          if (message.event.case === "change" || options.heartbeats) yield message;
          arm();
        }
      } catch (error) {
        if (closing.aborted) return;
        if (!(error instanceof ConnectError || error instanceof MemorydError)) throw error;
        const failure = toMemorydError(error);
        if (!(stalled || failure.retryable)) {
          this.close();
          throw failure;
        }
        if (stalled && this.#connect) {
          this.#own?.close();
          this.#own = this.#connect();
          raw = this.#own.watch;
        }
      } finally {
        clearTimeout(timer);
        closing.removeEventListener("abort", cancel);
      }
      // Failed, ended or silent: come back from the last cursor.
      reopens++;
      if (!(await pause(backoffDelayMs(reopens, defaults.retry), closing))) return;
    }
  }
}

/** createMemorydClient connects to memoryd (lazily: the first call opens the connection). */
export function createMemorydClient(options: MemorydClientOptions): MemorydClient {
  const tls = options.tls === true ? {} : options.tls || undefined;
  const url = baseUrl(options.target, tls !== undefined);
  const nodeOptions = tls ? { ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.serverName } : {};
  const pings = keepaliveOf(options.keepalive);
  const sessionManager = new Http2SessionManager(url, pings, nodeOptions);
  const transport = createGrpcTransport({ baseUrl: url, sessionManager });
  const token = options.token;
  const defaults: Defaults = {
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    retry: { ...DEFAULT_RETRY, ...options.retry },
    token: typeof token === "function" ? token : () => token ?? "",
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? WATCH_HEARTBEAT_MS,
  };
  const raw = createClient(MemoryService, transport);
  const memory = wrap(MemoryService, raw, defaults);
  const connect = (): OwnConnection => {
    const own = new Http2SessionManager(url, pings, nodeOptions);
    const client = createClient(MemoryService, createGrpcTransport({ baseUrl: url, sessionManager: own }));
    return { watch: client.watch, close: () => own.abort() };
  };
  const admin = wrap(ViewAdminService, createClient(ViewAdminService, transport), defaults);
  const views: MemorydViewsClient = Object.assign(admin, {
    iterViews: (request?: RequestOf<typeof ListViewsRequestSchema>, callOptions?: CallOptions) =>
      viewsOf(admin, request, callOptions),
  });
  return Object.assign(memory, {
    views,
    watch: (request: RequestOf<typeof WatchRequestSchema>, watchOptions: WatchOptions = {}) =>
      new WatchStream(raw.watch, request, defaults, watchOptions, connect),
    iterMemories: (request: RequestOf<typeof MemoryViewRequestSchema>, callOptions?: CallOptions) =>
      memoriesOf(memory, request, callOptions),
    close: () => sessionManager.abort(),
  });
}
