// A real gRPC server on loopback for the client's tests: grpc-js (an implementation independent
// of the client's Connect transport), serving memoryd.v1 from the generated descriptors. It
// answers as memoryd does — google.rpc.Status details in grpc-status-details-bin, x-request-id
// trailers — and records what every call carried (metadata, deadline, request).
import * as grpc from "@grpc/grpc-js";
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { anyPack, AnySchema, DurationSchema } from "@bufbuild/protobuf/wkt";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { MemoryService } from "../../src/gen/memoryd/v1/memory_service_pb.js";
import { ViewAdminService } from "../../src/gen/memoryd/v1/view_admin_service_pb.js";

/** What one call carried, as the server saw it. */
export interface Seen {
  /** method is the full name, `memoryd.v1.MemoryService/Write`. */
  method: string;
  request: unknown;
  metadata: grpc.Metadata;
  /** deadlineMs is how far away the call's deadline was when it arrived (Infinity: none). */
  deadlineMs: number;
  /** peer is the client's address and port: a new port is a new connection. */
  peer: string;
}

/** A handler answers one call (a response init, or it throws a StatusError). */
export type Handler = (request: never, call: grpc.ServerUnaryCall<unknown, unknown>) => unknown;

/**
 * A StreamHandler answers one server-streaming call: it sends responses with `send`, then returns
 * (the stream ends with OK) or throws a StatusError (the stream ends with that status).
 */
export type StreamHandler = (
  request: never,
  send: (response: object) => void,
  call: grpc.ServerWritableStream<unknown, unknown>,
) => Promise<void>;

export interface StatusDetails {
  reason?: string;
  requestId?: string;
  violations?: string[];
  retryDelayMs?: number;
}

/** StatusError is a failure the server answers with, details encoded as memoryd encodes them. */
export class StatusError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
    readonly details: StatusDetails = {},
  ) {
    super(message);
  }

  toServiceError(): Partial<grpc.ServiceError> {
    const metadata = new grpc.Metadata();
    metadata.set("grpc-status-details-bin", Buffer.from(this.encodeStatus()));
    if (this.details.requestId) metadata.set("x-request-id", this.details.requestId);
    return { code: this.code, details: this.message, metadata };
  }

  // google.rpc.Status {code = 1, message = 2, repeated Any details = 3}, written by hand: the
  // client package generates only the detail messages.
  private encodeStatus(): Uint8Array {
    const anys = [];
    const { reason, requestId, violations, retryDelayMs } = this.details;
    if (reason !== undefined) {
      const metadata: Record<string, string> = requestId ? { request_id: requestId } : {};
      anys.push(anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason, domain: "memoryd", metadata })));
    }
    if (violations?.length) {
      const fieldViolations = violations.map((field) => ({ field, description: "bad" }));
      anys.push(anyPack(BadRequestSchema, create(BadRequestSchema, { fieldViolations })));
    }
    if (retryDelayMs !== undefined) {
      const retryDelay = create(DurationSchema, {
        seconds: BigInt(Math.floor(retryDelayMs / 1000)),
        nanos: (retryDelayMs % 1000) * 1e6,
      });
      anys.push(anyPack(RetryInfoSchema, create(RetryInfoSchema, { retryDelay })));
    }
    const writer = new BinaryWriter();
    writer.tag(1, WireType.Varint).int32(this.code);
    writer.tag(2, WireType.LengthDelimited).string(this.message);
    for (const any of anys) writer.tag(3, WireType.LengthDelimited).bytes(toBinary(AnySchema, any));
    return writer.finish();
  }
}

export const unavailable = (details: StatusDetails = {}) =>
  new StatusError(grpc.status.UNAVAILABLE, "store unavailable", { reason: "STORE_UNAVAILABLE", ...details });

function deadlineMs(call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>): number {
  const deadline = call.getDeadline();
  return (deadline instanceof Date ? deadline.getTime() : deadline) - Date.now();
}

/** A loopback memoryd stand-in: every method answers its empty response unless a handler says otherwise. */
export class TestServer {
  readonly server = new grpc.Server();
  target = "";
  /** seen lists every call in arrival order, failed ones included. */
  seen: Seen[] = [];
  /** unavailableLeft: the next this-many calls (any method) fail with UNAVAILABLE first. */
  unavailableLeft = 0;
  /** unavailableDetails are the details those UNAVAILABLE answers carry. */
  unavailableDetails: StatusDetails = {};
  handlers = new Map<string, Handler>();
  streams = new Map<string, StreamHandler>();

  constructor() {
    for (const service of [MemoryService, ViewAdminService] as DescService[]) {
      const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
      const implementation: grpc.UntypedServiceImplementation = {};
      for (const method of service.methods) {
        const name = `${service.typeName}/${method.name}`;
        const streaming = method.methodKind === "server_streaming";
        definition[method.localName] = {
          path: `/${name}`,
          requestStream: false,
          responseStream: streaming,
          requestSerialize: (value) => Buffer.from(toBinary(method.input, value as MessageShape<DescMessage>)),
          requestDeserialize: (bytes: Buffer) => fromBinary(method.input, bytes),
          responseSerialize: (value) => Buffer.from(toBinary(method.output, value as MessageShape<DescMessage>)),
          responseDeserialize: (bytes: Buffer) => fromBinary(method.output, bytes),
        };
        if (streaming) {
          implementation[method.localName] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
            this.stream(name, method.output, call).then(
              () => call.end(),
              (error: unknown) => {
                const failure =
                  error instanceof StatusError ? error : new StatusError(grpc.status.INTERNAL, String(error));
                call.emit("error", failure.toServiceError());
              },
            );
          };
          continue;
        }
        implementation[method.localName] = (
          call: grpc.ServerUnaryCall<unknown, unknown>,
          callback: grpc.sendUnaryData<unknown>,
        ) => {
          this.answer(name, method.output, call).then(
            (response) => callback(null, response),
            (error: unknown) => {
              const failure =
                error instanceof StatusError ? error : new StatusError(grpc.status.INTERNAL, String(error));
              callback(failure.toServiceError());
            },
          );
        };
      }
      this.server.addService(definition, implementation);
    }
  }

  private async answer(name: string, output: DescMessage, call: grpc.ServerUnaryCall<unknown, unknown>) {
    this.seen.push({ method: name, request: call.request, metadata: call.metadata, deadlineMs: deadlineMs(call), peer: call.getPeer() });
    if (this.unavailableLeft > 0) {
      this.unavailableLeft--;
      throw unavailable(this.unavailableDetails);
    }
    const handler = this.handlers.get(name);
    const response = handler ? await handler(call.request as never, call) : {};
    return create(output, response as MessageInitShape<DescMessage>);
  }

  private async stream(name: string, output: DescMessage, call: grpc.ServerWritableStream<unknown, unknown>) {
    this.seen.push({ method: name, request: call.request, metadata: call.metadata, deadlineMs: deadlineMs(call), peer: call.getPeer() });
    if (this.unavailableLeft > 0) {
      this.unavailableLeft--;
      throw unavailable(this.unavailableDetails);
    }
    const handler = this.streams.get(name);
    if (handler) {
      await handler(call.request as never, (response) => call.write(create(output, response as MessageInitShape<DescMessage>)), call);
    }
  }

  async start(): Promise<this> {
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    this.target = `127.0.0.1:${port}`;
    return this;
  }

  /** reset forgets what was seen and every scripted answer, between tests. */
  reset(): void {
    this.seen = [];
    this.unavailableLeft = 0;
    this.unavailableDetails = {};
    this.handlers.clear();
    this.streams.clear();
  }

  /** header gives one metadata value of every call seen so far, null where absent. */
  header(name: string): (string | null)[] {
    return this.seen.map((call) => {
      const values = call.metadata.get(name);
      return values.length ? String(values[0]) : null;
    });
  }

  stop(): void {
    this.server.forceShutdown();
  }
}
