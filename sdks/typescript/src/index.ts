/**
 * Holdpoint's TypeScript SDK, for the people side of an agent runtime:
 *
 * - {@link HoldpointA2A} answers paused tasks over A2A v1.0 with the
 *   interactions/v1 extension, on the official `@a2a-js/sdk` client
 *   ({@link waiting} reads what a task waits for);
 * - {@link HoldpointRest} lists, reads and answers interactions over the REST API
 *   and follows the organisation's events ({@link HoldpointRest.events});
 * - refusals throw {@link HoldpointError} subclasses carrying the `NRY-xxxx`
 *   code, title and `retryable`.
 *
 * Works in Node 20+ and browsers (it needs `fetch`, `TextDecoderStream`).
 *
 * @packageDocumentation
 */
export {
  type A2AOptions,
  type AnswerParams,
  HoldpointA2A,
  INTERACTIONS_EXTENSION,
  type OpenInteraction,
  type StreamResponse,
  type Task,
  TaskState,
  answerMessage,
  waiting,
} from './a2a.js';
export {
  AlreadyApprovedError,
  AnswerDoesNotFitError,
  ArgumentsChangedError,
  EditRefusedError,
  NotAssigneeError,
  ConflictError,
  DeadlineError,
  RuleRefusedError,
  ERROR_CATALOG,
  HoldpointError,
  type HoldpointErrorInit,
  InteractionNotNamedError,
  InternalError,
  InvalidRequestError,
  TooManyStreamsError,
  NotFoundError,
  SessionNotFoundError,
  UnauthenticatedError,
  UnavailableError,
  UnsupportedOperationError,
  WebhookRefusedError,
  errorFromA2A,
  errorFromResponse,
  isErrorCode,
} from './errors.js';
export type { EventsOptions, StreamedEvent } from './events.js';
export {
  type AnswerOptions,
  type CallOptions,
  type ClientOptions,
  DEFAULT_RETRY_FOR_MS,
  RETRY_BACKOFF_MS,
  RETRY_STATUSES,
  type RetryNotice,
  type TokenSource,
  authenticatingFetch,
  newIdempotencyKey,
} from './http.js';
export {
  type ApproveDecision,
  type BatchAnswer,
  type BatchResult,
  HoldpointRest,
  type ListOptions,
  type RespondOptions,
} from './rest.js';
export type * from './types.js';
