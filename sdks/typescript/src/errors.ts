/**
 * Holdpoint's errors as typed exceptions. Every refusal, whichever way it came
 * (a REST `{code, title, message}` body, or an A2A JSON-RPC error whose `data`
 * holds a `google.rpc.ErrorInfo` with `code`, `title` and `retryable` in its
 * metadata), becomes a {@link HoldpointError} subclass chosen by its `NRY-xxxx`
 * code. The catalog is `schemas/errors.json`; the README's "Errors" section
 * explains each code.
 *
 * @module
 */
import type { ErrorCode } from './types.js';

/** What a {@link HoldpointError} is built from. */
export interface HoldpointErrorInit {
  /** The stable code, `NRY-xxxx`. */
  code: ErrorCode;
  /** The code's title (`No longer waiting`, ...). */
  title: string;
  /** What went wrong, for a person. */
  message: string;
  /** Whether the same request, with the same idempotency key, may succeed later. */
  retryable: boolean;
  /** The HTTP status (REST; `200` for A2A, whose errors ride in a 200). */
  status?: number | undefined;
  /** Seconds from `Retry-After`, when the server sent one. */
  retryAfter?: number | undefined;
  /** The JSON-RPC error code (A2A only, e.g. `-32004`). */
  rpcCode?: number | undefined;
  /** The A2A `ErrorInfo.reason` (A2A only, e.g. `UNSUPPORTED_OPERATION`). */
  reason?: string | undefined;
  /**
   * `NRY-0036`: the JSON pointer of the first field of the answer's `value` that
   * does not fit the form (`/seats`; `""` for the value itself): REST's body
   * `pointer`, A2A's `ErrorInfo.metadata.pointer`.
   */
  pointer?: string | undefined;
  /** The underlying error (the `@a2a-js/sdk` error for A2A calls). */
  cause?: unknown;
}

/** A refusal from Holdpoint: its `NRY-xxxx` code, title, message and retryability. */
export class HoldpointError extends Error {
  /** The stable code, `NRY-xxxx`. */
  readonly code: ErrorCode;
  /** The code's title. */
  readonly title: string;
  /** Whether retrying the same request with the same key may succeed. */
  readonly retryable: boolean;
  /** HTTP status, when known. */
  readonly status: number | undefined;
  /** Seconds to wait before retrying, when the server said. */
  readonly retryAfter: number | undefined;
  /** JSON-RPC error code (A2A). */
  readonly rpcCode: number | undefined;
  /** A2A `ErrorInfo.reason` (A2A). */
  readonly reason: string | undefined;
  /** `NRY-0036`: the JSON pointer of the first field that does not fit the form. */
  readonly pointer: string | undefined;

  constructor(init: HoldpointErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.title = init.title;
    this.retryable = init.retryable;
    this.status = init.status;
    this.retryAfter = init.retryAfter;
    this.rpcCode = init.rpcCode;
    this.reason = init.reason;
    this.pointer = init.pointer;
  }
}

/** The request itself is wrong: bad JSON, field, id or query; too large; not JSON; a method, URI or headers the server does not take (`NRY-0001`, `-0005`, `-0013`, `-0014`, `-0015`, `-0016`). */
export class InvalidRequestError extends HoldpointError {}
/** This caller already holds as many event streams as the server allows; retry once one closes (`NRY-0017`). */
export class TooManyStreamsError extends HoldpointError {}
/** The interaction's session does not exist or has ended (`NRY-0002`). */
export class SessionNotFoundError extends HoldpointError {}
/** The answer does not fit the questions: count, index, single choice, text not allowed, empty (`NRY-0003`). */
export class AnswerDoesNotFitError extends HoldpointError {}
/** No such interaction, question, task or remembered rule, or another organisation's (`NRY-0004`, `-0027`). */
export class NotFoundError extends HoldpointError {}
/** A webhook registration Holdpoint refuses: the URL (not https, credentials, a private address) or an unknown event type (`NRY-0040`, `-0041`). */
export class WebhookRefusedError extends HoldpointError {}
/** It no longer waits (answered with another key, or closed), or the lane refused; or a webhook limit or a disabled endpoint (`NRY-0009`, `-0021`, `-0030`, `-0031`, `-0032`, `-0042`, `-0043`); or approved twice by the same person ({@link AlreadyApprovedError}, `NRY-0038`). */
export class ConflictError extends HoldpointError {}
/** A remembered rule cannot be written or read: `remember` on a question or connection, scope `agent` with no agent named (`NRY-0025`, `-0026`). */
export class RuleRefusedError extends HoldpointError {}
/** An A2A approval or connection answer that named no `interactionId` (nor, for an approval, the held call's `argumentsDigest`): nothing was decided (`NRY-0024`). The SDK always names it. */
export class InteractionNotNamedError extends InvalidRequestError {}
/** A runtime's deadline was refused: the server has no message schedules (`NRY-0022`), or the deadline cannot be kept (`NRY-0023`). An answer never gets these. */
export class DeadlineError extends HoldpointError {}
/** The held call's arguments are not the ones shown (`argumentsDigest` differs; `NRY-0010`). */
export class ArgumentsChangedError extends ConflictError {}
/**
 * An edit of a held call's arguments was refused and nothing was decided: the
 * hold is not editable (`NRY-0028`, status 409), the edit is not a JSON object,
 * too large, or sent without `approved: true` or the `argumentsDigest` shown
 * (`NRY-0029`), or sent with `remember` (`NRY-0033`).
 */
export class EditRefusedError extends HoldpointError {}
/**
 * The interaction needs approvals from several distinct people and this caller's
 * approval is already counted: it counts once, nothing changed (`NRY-0038`,
 * status 409). The caller may still deny, which decides at once.
 */
export class AlreadyApprovedError extends ConflictError {}
/** The interaction names who may answer it and this caller is not among them, by person or group: nothing was decided (`NRY-0037`, status 403). */
export class NotAssigneeError extends HoldpointError {}
/** No valid identity (`NRY-0011`). */
export class UnauthenticatedError extends HoldpointError {}
/** Text on an approval (text never approves), or a result for a call never released (`NRY-0020`). */
export class UnsupportedOperationError extends HoldpointError {}
/** No outcome in time or NATS away: retry with the same key after `retryAfter` (`NRY-0050`). */
export class UnavailableError extends HoldpointError {}
/** A bug on the server; the body carries no internals (`NRY-0051`). */
export class InternalError extends HoldpointError {}

type ErrorClass = new (init: HoldpointErrorInit) => HoldpointError;

/**
 * Each code's class and retryability. Exhaustive over the generated `ErrorCode`
 * union, so a new code in `schemas/openapi.json` fails the build until it is
 * placed here; a test checks `retryable` against `schemas/errors.json`.
 */
export const ERROR_CATALOG: Readonly<Record<ErrorCode, { readonly type: ErrorClass; readonly retryable: boolean }>> = {
  'NRY-0001': { type: InvalidRequestError, retryable: false },
  'NRY-0002': { type: SessionNotFoundError, retryable: false },
  'NRY-0003': { type: AnswerDoesNotFitError, retryable: false },
  'NRY-0004': { type: NotFoundError, retryable: false },
  'NRY-0005': { type: InvalidRequestError, retryable: false },
  'NRY-0009': { type: ConflictError, retryable: false },
  'NRY-0010': { type: ArgumentsChangedError, retryable: false },
  'NRY-0011': { type: UnauthenticatedError, retryable: false },
  'NRY-0013': { type: InvalidRequestError, retryable: false },
  'NRY-0014': { type: InvalidRequestError, retryable: false },
  'NRY-0015': { type: InvalidRequestError, retryable: false },
  'NRY-0016': { type: InvalidRequestError, retryable: false },
  'NRY-0017': { type: TooManyStreamsError, retryable: true },
  'NRY-0020': { type: UnsupportedOperationError, retryable: false },
  'NRY-0021': { type: ConflictError, retryable: false },
  'NRY-0022': { type: DeadlineError, retryable: false },
  'NRY-0023': { type: DeadlineError, retryable: false },
  'NRY-0024': { type: InteractionNotNamedError, retryable: false },
  'NRY-0025': { type: RuleRefusedError, retryable: false },
  'NRY-0026': { type: RuleRefusedError, retryable: false },
  'NRY-0027': { type: NotFoundError, retryable: false },
  'NRY-0028': { type: EditRefusedError, retryable: false },
  'NRY-0029': { type: EditRefusedError, retryable: false },
  'NRY-0030': { type: ConflictError, retryable: false },
  'NRY-0031': { type: ConflictError, retryable: false },
  'NRY-0032': { type: ConflictError, retryable: false },
  'NRY-0033': { type: EditRefusedError, retryable: false },
  'NRY-0034': { type: InvalidRequestError, retryable: false },
  'NRY-0035': { type: InvalidRequestError, retryable: false },
  'NRY-0036': { type: AnswerDoesNotFitError, retryable: false },
  'NRY-0037': { type: NotAssigneeError, retryable: false },
  'NRY-0038': { type: AlreadyApprovedError, retryable: false },
  'NRY-0040': { type: WebhookRefusedError, retryable: false },
  'NRY-0041': { type: WebhookRefusedError, retryable: false },
  'NRY-0042': { type: ConflictError, retryable: false },
  'NRY-0043': { type: ConflictError, retryable: false },
  'NRY-0050': { type: UnavailableError, retryable: true },
  'NRY-0051': { type: InternalError, retryable: true },
};

/** Whether `code` is one of Holdpoint's codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CATALOG, code);
}

/**
 * The typed error for `code`. `retryable` defaults to the catalog's; a server's
 * own word (A2A `ErrorInfo.metadata.retryable`) wins.
 */
export function holdpointError(init: Omit<HoldpointErrorInit, 'retryable'> & { retryable?: boolean }): HoldpointError {
  const entry = ERROR_CATALOG[init.code];
  return new entry.type({ ...init, retryable: init.retryable ?? entry.retryable });
}

function retryAfterOf(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  const seconds = Number.parseInt(value, 10);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
}

/**
 * Reads a failed REST response (`{code, title, message}`) into its typed error.
 * A body that is not Holdpoint's (a proxy's page) becomes `NRY-0011` for a 401,
 * `NRY-0050` for a 502/503/504, and `NRY-0051` otherwise, with the status kept.
 */
export async function errorFromResponse(response: Response, body?: unknown): Promise<HoldpointError> {
  let parsed = body;
  if (parsed === undefined) {
    try {
      parsed = await response.json();
    } catch {
      parsed = undefined;
    }
  }
  const fields = (parsed ?? {}) as Partial<Record<'code' | 'title' | 'message' | 'pointer', unknown>>;
  const retryAfter = retryAfterOf(response.headers);
  if (isErrorCode(fields.code)) {
    return holdpointError({
      code: fields.code,
      title: typeof fields.title === 'string' ? fields.title : fields.code,
      message: typeof fields.message === 'string' ? fields.message : '',
      status: response.status,
      retryAfter,
      pointer: typeof fields.pointer === 'string' ? fields.pointer : undefined,
    });
  }
  const code: ErrorCode =
    response.status === 401 ? 'NRY-0011' : [502, 503, 504].includes(response.status) ? 'NRY-0050' : 'NRY-0051';
  return holdpointError({
    code,
    title: response.statusText || `HTTP ${response.status}`,
    message: `HTTP ${response.status} without a Holdpoint error body`,
    status: response.status,
    retryAfter,
  });
}

/** The `google.rpc.ErrorInfo` shape inside a JSON-RPC error's `data`. */
interface ErrorInfoLike {
  '@type'?: unknown;
  reason?: unknown;
  metadata?: Record<string, unknown>;
}

/**
 * Maps an error thrown by `@a2a-js/sdk` (a JSON-RPC error whose `data` holds
 * Holdpoint's `ErrorInfo`) to its typed error; returns `undefined` when it
 * carries no Holdpoint code (a network failure, say), for the caller to rethrow.
 */
export function errorFromA2A(error: unknown): HoldpointError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { data?: unknown; envelopeCode?: unknown; reason?: unknown; message?: unknown };
  const details = Array.isArray(e.data) ? (e.data as ErrorInfoLike[]) : [];
  const info = details.find(
    (d) => typeof d === 'object' && d !== null && String(d['@type'] ?? '').endsWith('google.rpc.ErrorInfo'),
  );
  const meta = info?.metadata ?? {};
  if (!isErrorCode(meta.code)) return undefined;
  return holdpointError({
    code: meta.code,
    title: typeof meta.title === 'string' ? meta.title : meta.code,
    message: typeof e.message === 'string' ? e.message : '',
    retryable: meta.retryable === undefined ? undefined : meta.retryable === 'true',
    status: 200,
    rpcCode: typeof e.envelopeCode === 'number' ? e.envelopeCode : undefined,
    reason: typeof info?.reason === 'string' ? info.reason : typeof e.reason === 'string' ? e.reason : undefined,
    pointer: typeof meta.pointer === 'string' ? meta.pointer : undefined,
    cause: error,
  });
}
