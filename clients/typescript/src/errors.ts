/**
 * Typed errors: one class per API error `code` (shared/api/src/error.rs). Each carries the
 * `field` at fault and the `exitCode` `rara` exits with for the same failure.
 */
import type { components } from "./schema.js";

export type ErrorBody = components["schemas"]["ErrorBody"];

/** Anything this client throws. */
export class RaraError extends Error {
  override name = "RaraError";
}

/** An error the API answered; subclasses are one per `code`. */
export class ApiError extends RaraError {
  static readonly code: string = "";
  override name = "ApiError";
  readonly code: string;
  readonly field: string | null;
  readonly exitCode: number;
  readonly status: number;
  readonly body: Partial<ErrorBody>;

  constructor(message: string, init: { code?: string; field?: string | null; exitCode?: number; status?: number; body?: Partial<ErrorBody> } = {}) {
    super(init.field ? `${message} (field ${init.field})` : message);
    this.code = init.code ?? (this.constructor as typeof ApiError).code;
    this.field = init.field ?? null;
    this.exitCode = init.exitCode ?? 1;
    this.status = init.status ?? 0;
    this.body = init.body ?? {};
  }
}

function coded<C extends string>(code: C, name: string) {
  return class extends ApiError {
    static override readonly code: string = code;
    override name = name;
  };
}

export class BadRequestError extends coded("bad_request", "BadRequestError") {}
export class UnauthorizedError extends coded("unauthorized", "UnauthorizedError") {}
export class ForbiddenError extends coded("forbidden", "ForbiddenError") {}
export class NotFoundError extends coded("not_found", "NotFoundError") {}
export class MisdirectedError extends coded("misdirected", "MisdirectedError") {}
export class ConflictError extends coded("conflict", "ConflictError") {}
export class PayloadTooLargeError extends coded("payload_too_large", "PayloadTooLargeError") {}
export class UnsupportedMediaTypeError extends coded("unsupported_media_type", "UnsupportedMediaTypeError") {}
export class TooManyError extends coded("too_many", "TooManyError") {}
export class InvalidPayloadError extends coded("invalid_payload", "InvalidPayloadError") {}
export class NotWaitingError extends coded("not_waiting", "NotWaitingError") {}
export class RerunRefusedError extends coded("rerun_refused", "RerunRefusedError") {}
export class SecretNotGrantedError extends coded("SECRET_NOT_GRANTED", "SecretNotGrantedError") {}
export class InternalError extends coded("internal", "InternalError") {}
export class UnavailableError extends coded("unavailable", "UnavailableError") {}

/** The definition is invalid: `field` is the first problem's path, `problems` all of them. */
export class InvalidWorkflowError extends coded("invalid_workflow", "InvalidWorkflowError") {
  problems: components["schemas"]["ProblemBody"][] = [];
}

/** An answer that is not the API's (not JSON: a proxy's 502). */
export class UnexpectedResponseError extends RaraError {
  override name = "UnexpectedResponseError";
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

/** A downloaded artifact whose bytes do not hash to the digest rara recorded for it. */
export class DigestMismatchError extends RaraError {
  override name = "DigestMismatchError";
  constructor(message: string, readonly expected: string, readonly actual: string) {
    super(message);
  }
}

/** The server could not be reached, after the retries the call allows. */
export class ConnectionFailedError extends RaraError {
  override name = "ConnectionFailedError";
}

export const ERRORS: Record<string, typeof ApiError> = Object.fromEntries(
  [BadRequestError, UnauthorizedError, ForbiddenError, NotFoundError, MisdirectedError, ConflictError,
    InvalidWorkflowError, PayloadTooLargeError, UnsupportedMediaTypeError, TooManyError, InvalidPayloadError,
    NotWaitingError, RerunRefusedError, SecretNotGrantedError, InternalError, UnavailableError]
    .map((cls) => [cls.code, cls]),
);

/** The typed error of an error answer's status and parsed body. */
export function errorFrom(status: number, body: unknown): RaraError {
  if (typeof body !== "object" || body === null || typeof (body as ErrorBody).code !== "string") {
    return new UnexpectedResponseError(`HTTP ${status}: not an API error body`, status);
  }
  const b = body as ErrorBody;
  const Cls = ERRORS[b.code] ?? ApiError;
  return new Cls(String(b.message ?? ""), {
    code: b.code,
    field: typeof b.field === "string" ? b.field : null,
    exitCode: typeof b.exit_code === "number" ? b.exit_code : 1,
    status,
    body: b,
  });
}
