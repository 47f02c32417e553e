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
   * one each call is a new press: a second answer on a blocking session is a
   * `ConflictError` (`NRY-0009`).
   */
  idempotencyKey?: string;
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
