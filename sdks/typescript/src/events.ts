/**
 * `GET /v1/events` as an async iterator: the organisation's CloudEvents in the
 * order Holdpoint stored them, parsed with `eventsource-parser`, over `fetch` (so
 * the request can carry `Authorization`, which a browser's `EventSource` cannot).
 *
 * @module
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';

import { errorFromResponse, HoldpointError } from './errors.js';
import type { CloudEvent, EventName } from './types.js';

/** Options of {@link HoldpointRest.events}. */
export interface EventsOptions {
  /** Only this task's events. */
  task?: string;
  /** Only events of this short name (`tool-call-finished`, `task-status`, ...). */
  type?: EventName;
  /**
   * Start after this sequence (`0`: everything the stream still keeps, 7 days).
   * Without it the stream starts with the next new event, and a drop before the
   * first event can lose what was stored meanwhile; give it to be gapless.
   */
  after?: number;
  /** Ends the iteration (the iterator returns). */
  signal?: AbortSignal;
  /** First wait before reconnecting, in milliseconds (default 250; doubles up to `maxReconnectDelayMs`). */
  reconnectDelayMs?: number;
  /** Longest wait between reconnects, in milliseconds (default 5000). */
  maxReconnectDelayMs?: number;
  /** Called when the stream dropped and is about to reconnect after `delayMs`. */
  onReconnect?: (info: { attempt: number; delayMs: number; lastSequence: number | undefined; error: unknown }) => void;
}

/** One event of the stream. */
export interface StreamedEvent {
  /** Its sequence in `HP_EVENTS` (the SSE `id:`), what `after` / `Last-Event-ID` resume from. */
  sequence: number;
  /** Its short name (the SSE `event:`). */
  name: EventName;
  /** The CloudEvent as stored. */
  event: CloudEvent;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Follows `/v1/events` until `signal` aborts or the consumer stops iterating.
 * Drops (the connection ends, the ingress restarts, a network error, a
 * retryable `503`) reconnect with `Last-Event-ID` = the last sequence seen.
 *
 * @throws {HoldpointError} a refusal that retrying cannot cure (`401`, `400`).
 * @internal Use {@link HoldpointRest.events}.
 */
export async function* followEvents(
  baseUrl: string,
  fetchImpl: typeof fetch,
  options: EventsOptions,
): AsyncGenerator<StreamedEvent, void, undefined> {
  const first = options.reconnectDelayMs ?? 250;
  const longest = options.maxReconnectDelayMs ?? 5000;
  let last = options.after;
  let delay = first;
  let attempt = 0;
  const stop = new AbortController();
  const abort = () => stop.abort();
  options.signal?.addEventListener('abort', abort, { once: true });
  if (options.signal?.aborted) stop.abort();
  try {
    while (!stop.signal.aborted) {
      let failure: unknown;
      try {
        const url = new URL(`${baseUrl}/v1/events`);
        if (options.task !== undefined) url.searchParams.set('task', options.task);
        if (options.type !== undefined) url.searchParams.set('type', options.type);
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        if (last !== undefined) headers['last-event-id'] = String(last);
        const response = await fetchImpl(url, { headers, signal: stop.signal, cache: 'no-store' });
        if (!response.ok || response.body === null) {
          const error = await errorFromResponse(response);
          if (!error.retryable) throw error;
          failure = error;
        } else {
          const events = response.body
            .pipeThrough(new TextDecoderStream())
            .pipeThrough(new EventSourceParserStream())
            .getReader();
          // An abort cancels the reader itself, which cancels the piped chain down
          // to the response body and closes the connection: the fetch's own signal
          // alone left a piped body (and its socket) open now and then, and a
          // pending read() with it.
          const cancel = () => {
            events.cancel().catch(() => {});
          };
          stop.signal.addEventListener('abort', cancel, { once: true });
          try {
            for (;;) {
              const { value, done } = await events.read();
              if (done) break;
              const sequence = Number(value.id);
              if (!Number.isSafeInteger(sequence)) continue;
              last = sequence;
              delay = first;
              attempt = 0;
              yield { sequence, name: value.event as EventName, event: JSON.parse(value.data) as CloudEvent };
            }
          } finally {
            stop.signal.removeEventListener('abort', cancel);
            // Not awaited: a cancel that waits on a stalled pipe must not hold the
            // consumer that stopped iterating.
            events.cancel().catch(() => {});
          }
          failure = new Error('the event stream ended');
        }
      } catch (error) {
        if (stop.signal.aborted) return;
        if (error instanceof HoldpointError && !error.retryable) throw error;
        failure = error;
      }
      attempt += 1;
      const asked = failure instanceof HoldpointError && failure.retryAfter !== undefined ? failure.retryAfter * 1000 : 0;
      const wait = Math.max(delay, asked);
      options.onReconnect?.({ attempt, delayMs: wait, lastSequence: last, error: failure });
      await sleep(wait, stop.signal);
      delay = Math.min(delay * 2, longest);
    }
  } finally {
    options.signal?.removeEventListener('abort', abort);
    stop.abort();
  }
}
