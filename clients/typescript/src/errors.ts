/**
 * Errors: one root class, MemstreamError, and one subclass per kind of answer a caller handles
 * differently. The server's answers are `{"error": "...", "problems": ["field: message", ...]}`;
 * `error` and `problems` are kept on the exception, and the message names both.
 */

export interface ErrorDetails {
  /** The HTTP status, when the server answered. */
  status?: number;
  /** The server's `problems` (422: one per field, `field: message`). */
  problems?: string[];
  /** The server's answer as parsed (JSON, or the first 300 characters of text). */
  body?: unknown;
  /** Retry-After of a 503/429, in seconds. */
  retryAfterS?: number;
  cause?: unknown;
}

export class MemstreamError extends Error {
  readonly status?: number;
  readonly problems: string[];
  readonly body?: unknown;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.status = details.status;
    this.problems = details.problems ?? [];
    this.body = details.body;
  }
}

/** 413 (body too large) or 422 (`problems` names each field); also ids the client refuses before sending. */
export class InvalidInput extends MemstreamError {}

/** 401 (no key, or an unknown or revoked one) or 403 (a scope missing: the message names it). */
export class AccessDenied extends MemstreamError {}

/** 404: not found, or not reachable with this key (another tenant's, or not the key's bound user). */
export class NotFound extends MemstreamError {}

/** 409: `after` is past the end of the log (no publish returned that position). */
export class Conflict extends MemstreamError {}

/** 410: the user was erased; nothing can be recorded for them. */
export class Gone extends MemstreamError {}

/**
 * 503 (not applied within `wait_s`, or a backing service is down) or 429, after the client's
 * retries; also a server that cannot be reached (no status).
 */
export class Unavailable extends MemstreamError {
  readonly retryAfterS?: number;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details);
    this.retryAfterS = details.retryAfterS;
  }
}

/** No answer within the client's `timeoutMs` (the request was aborted; a write may still have happened). */
export class RequestTimeout extends MemstreamError {}

const BY_STATUS: Record<number, typeof MemstreamError> = {
  401: AccessDenied, 403: AccessDenied, 404: NotFound, 409: Conflict, 410: Gone,
  413: InvalidInput, 422: InvalidInput, 429: Unavailable, 503: Unavailable,
};

/** The exception for an HTTP error answer. */
export function errorFor(status: number, body: unknown, retryAfterS?: number): MemstreamError {
  const obj = (body && typeof body === "object" ? body : {}) as { error?: unknown; problems?: unknown };
  const error = typeof obj.error === "string" ? obj.error : typeof body === "string" ? body : "";
  const problems = Array.isArray(obj.problems) ? obj.problems.map(String) : [];
  const message = `HTTP ${status}: ${error || "error"}` + (problems.length ? `: ${problems.join("; ")}` : "");
  const Cls = BY_STATUS[status] ?? MemstreamError;
  return new Cls(message, { status, problems, body, retryAfterS });
}
