// The public surface of the memoryd TypeScript client: the wrapper, the shared call policy and
// the generated memoryd.v1 types.
export * from "./client.js";
export * from "./policy.js";
export * from "./gen/memoryd/v1/memory_pb.js";
export * from "./gen/memoryd/v1/memory_service_pb.js";
export * from "./gen/memoryd/v1/view_admin_service_pb.js";
export * from "./gen/memoryd/v1/error_reason_pb.js";
export { Code, type CallOptions } from "@connectrpc/connect";
export { create, fromJson, toJson } from "@bufbuild/protobuf";
// A turn's time (a Write's turns, a Recall's context) is a Timestamp: made from a Date or now.
export { timestampDate, timestampFromDate, timestampNow } from "@bufbuild/protobuf/wkt";
