export { MemoryClient } from "./client.js";
export type { ClientOptions } from "./client.js";
export {
  AccessDenied, Conflict, Gone, InvalidInput, MemstreamError, NotFound, RequestTimeout, Unavailable,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
