/**
 * What every client shares: where Holdpoint is, how the caller proves who it is,
 * and which `fetch` carries the requests.
 *
 * @module
 */

/**
 * The bearer token: a string, or a function asked before every request (so a
 * token can be refreshed). `undefined` or `''` sends no `Authorization` header,
 * for a page behind a proxy that adds one itself.
 */
export type TokenSource = string | undefined | (() => string | undefined | Promise<string | undefined>);

/** Options of {@link HoldpointRest} and {@link HoldpointA2A}. */
export interface ClientOptions {
  /** Holdpoint's base URL, e.g. `http://127.0.0.1:8080` (the ingress's API listener). */
  baseUrl: string | URL;
  /** The person's JWT (see {@link TokenSource}). */
  token?: TokenSource;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Options of one call. */
export interface CallOptions {
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** Options of one answer. */
export interface AnswerOptions extends CallOptions {
  /**
   * The answer's idempotency key (`Idempotency-Key`, 1-128 printable ASCII). A
   * retry with the same key answers once and returns as the first did. Without
   * one each call makes its own (`sdk-<uuid>`), used for that call's retries
   * only: a second call is a new press, and on a blocking session a second
   * answer is a `ConflictError` (`NRY-0009`).
   */
  idempotencyKey?: string;
  /**
   * How long, in ms, the answer is sent again (with the same key) while nobody
   * can say whether it was recorded: a `502`, `503` or `504` (Holdpoint had no
   * outcome in time, or a proxy in front of it gave up waiting) or a failed
   * connection. Default {@link DEFAULT_RETRY_FOR_MS}; `0` sends it once.
   */
  retryForMs?: number;
  /** Told before each retry (for a "sending…" display). */
  onRetry?: (retry: RetryNotice) => void;
}

/** What {@link AnswerOptions.onRetry} is told before the answer is sent again. */
export interface RetryNotice {
  /** The attempt about to be made (2 for the first retry). */
  attempt: number;
  /** The pause before it, ms. */
  delayMs: number;
  /** What the previous attempt got: an HTTP status, or `0` for a failed connection. */
  status: number;
  /** The idempotency key (the same for every attempt). */
  idempotencyKey: string;
}

/** How long an answer is retried by default, ms (a minute). */
export const DEFAULT_RETRY_FOR_MS = 60_000;

/** The pauses between retries when the server names no `Retry-After`, ms (the last repeats). */
export const RETRY_BACKOFF_MS: readonly number[] = [250, 500, 1000, 2000, 4000, 5000];

/** The statuses after which an answer is sent again: no outcome in time, or a gateway's timeout. */
export const RETRY_STATUSES: readonly number[] = [502, 503, 504];

/** A fresh idempotency key, `sdk-<uuid>`. */
export function newIdempotencyKey(): string {
  return `sdk-${globalThis.crypto.randomUUID()}`;
}

/**
 * Runs `send` until it settles, again after each failure that `transient` reads
 * as "may still be recorded" (it returns the status seen and the server's
 * `Retry-After` in seconds, or `undefined` for a failure to throw at once), for
 * at most `options.retryForMs`. The last failure is thrown.
 */
export async function withRetries<T>(
  send: () => Promise<T>,
  transient: (error: unknown) => { status: number; retryAfter?: number | undefined } | undefined,
  key: string,
  options: AnswerOptions,
): Promise<T> {
  const budget = options.retryForMs ?? DEFAULT_RETRY_FOR_MS;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      const seen = options.signal?.aborted ? undefined : transient(error);
      if (seen === undefined) throw error;
      const delayMs =
        seen.retryAfter !== undefined
          ? Math.max(1, seen.retryAfter) * 1000
          : (RETRY_BACKOFF_MS[Math.min(attempt - 1, RETRY_BACKOFF_MS.length - 1)] ?? 5000);
      if (Date.now() - started + delayMs > budget) throw error;
      options.onRetry?.({ attempt: attempt + 1, delayMs, status: seen.status, idempotencyKey: key });
      await pause(delayMs, options.signal);
    }
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

async function tokenOf(source: TokenSource): Promise<string | undefined> {
  return typeof source === 'function' ? await source() : source;
}

/**
 * A `fetch` that adds `Authorization: Bearer <token>` (asking `token` each
 * time) unless the request already has an `Authorization` header.
 */
export function authenticatingFetch(token: TokenSource, base: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const value = await tokenOf(token);
    if (value && !request.headers.has('authorization')) {
      request.headers.set('authorization', `Bearer ${value}`);
    }
    return base(request);
  };
}

/** `baseUrl` without a trailing slash. */
export function trimBase(baseUrl: string | URL): string {
  return String(baseUrl).replace(/\/+$/, '');
}
