/**
 * The runtime side's own errors, besides the catalog's {@link HoldpointError}s
 * (a worker's refusal of a command throws the catalog's class for its code).
 *
 * @module
 */

/** Base class of the runtime side's local errors. */
export class RuntimeError extends Error {
  /** Whether retrying the same call may succeed (and is safe). */
  readonly retryable: boolean = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * No outcome within the timeout (NATS or the worker did not answer in time). The
 * command may still be decided: retrying the same call is safe, it carries the
 * same `Nats-Msg-Id` and is decided at most once.
 */
export class OutcomeTimeoutError extends RuntimeError {
  override readonly retryable = true;
}

/** `requestConnection` is off for this agent: its `AGENT.md` must say `loop: {connections: true}`. Nothing was sent. */
export class ConnectionsDisabledError extends RuntimeError {}

/** An `AGENT.md` front matter that is not closed, not YAML, or not of the shape Holdpoint reads (e.g. `connections: "yes"`). */
export class ManifestError extends RuntimeError {}

/** An id that does not validate (1 to 128 printable ASCII characters, no spaces). Nothing was sent. */
export class InvalidIdError extends RuntimeError {}
