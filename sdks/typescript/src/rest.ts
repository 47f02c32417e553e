/**
 * The REST client: list, read and answer interactions, and follow the
 * organisation's events. Requests are typed by the OpenAPI document
 * (`schemas/openapi.json`) through `openapi-fetch`; refusals throw the typed
 * errors of `./errors.ts`.
 *
 * @module
 */
import createClient, { type Client } from 'openapi-fetch';

import { HoldpointError, errorFromResponse } from './errors.js';
import { type EventsOptions, type StreamedEvent, followEvents } from './events.js';
import type { paths } from './generated/openapi.js';
import {
  type AnswerOptions,
  type CallOptions,
  type ClientOptions,
  DEFAULT_RETRY_FOR_MS,
  RETRY_BACKOFF_MS,
  RETRY_STATUSES,
  authenticatingFetch,
  newIdempotencyKey,
  trimBase,
  withRetries,
} from './http.js';
import type { ApprovalProgress, InteractionPage, InteractionView, ListState, OptionAnswer } from './types.js';

/** Options of {@link HoldpointRest.pending} and {@link HoldpointRest.list}. */
export interface ListOptions extends CallOptions {
  /** Which interactions (default `pending`). */
  state?: ListState;
  /** Page size, 1 to 500 (default 50). */
  limit?: number;
  /** Where to start: a previous page's `nextCursor`. */
  cursor?: string;
}

/** An approval's decision (`POST /v1/interactions/{id}/approve`). */
export interface ApproveDecision {
  /** `true` releases the held call exactly as shown; `false` fails it as `tool.denied`. */
  approved: boolean;
  /** Travels with the decision (and into the audit for approvals). */
  reason?: string;
  /**
   * The `call.argumentsDigest` the person saw: if the held arguments are not
   * those, the answer is refused with {@link ArgumentsChangedError} (`NRY-0010`)
   * and nothing is released. Required with `editedArguments`.
   */
  argumentsDigest?: string;
  /**
   * Edit, then approve: release the call with these arguments (a JSON object)
   * instead of the held ones; with `approved: true` and the `argumentsDigest` of
   * the arguments the person was shown and edited. Refused with
   * {@link EditRefusedError}: the hold is not `call.editable` (`NRY-0028`), the
   * edit is not an object or too large, or comes without the digest or with a
   * denial (`NRY-0029`).
   */
  editedArguments?: Record<string, unknown>;
  /**
   * Remember this decision as a rule (README "Remembered rules"): `scope`
   * `session`, `agent` (the runtime must have named the agent, else
   * `NRY-0026`) or `organisation`; optional `expiresIn` seconds and
   * `argumentsDigest` (`true`, or the digest shown) to match only these
   * arguments. Refused with an edit (`NRY-0033`).
   */
  remember?: {
    scope: 'session' | 'agent' | 'organisation';
    expiresIn?: number;
    argumentsDigest?: boolean | string;
  };
}

/**
 * One answer of {@link HoldpointRest.answerMany}: what its single operation takes
 * (the id of its path, its body) and its own idempotency key (a fresh one when
 * left out).
 */
export type BatchAnswer = {
  /** The interaction (for `answer`, the question's id). */
  interactionId: string;
  /** This item's key: the same key again replays its outcome (default: a fresh one). */
  idempotencyKey?: string;
} & (
  | { operation: 'approve'; body: ApproveDecision }
  | { operation: 'respond'; body: { value: unknown; reason?: string } }
  | { operation: 'answer'; body: { answers: OptionAnswer[] } }
);

/** One item's result: the status its single operation would have answered. */
export interface BatchResult {
  /** The item's `interactionId`. */
  interactionId: string;
  /**
   * `204` answered; `202` an approval counted toward a hold that needs several
   * people while the call waits for the others (then `approvals`); otherwise the
   * refusal's status (e.g. `409` `NRY-0038` for a second approval by the same person).
   */
  status: number;
  /** With `202`: the approvals counted so far and needed. */
  approvals?: ApprovalProgress | null;
  /** The refusal's stable code, when `status` is not `204` or `202`. */
  code?: string;
  /** The code's title. */
  title?: string;
  /** What went wrong. */
  message?: string;
}

/** Options of {@link HoldpointRest.respond}. */
export interface RespondOptions extends AnswerOptions {
  /** Travels with the answer. */
  reason?: string;
}

/**
 * Holdpoint's REST API for a person.
 *
 * ```ts
 * const rest = new HoldpointRest({ baseUrl: 'http://127.0.0.1:8080', token });
 * for await (const item of rest.pending()) console.log(item.kind, item.prompt);
 * ```
 */
export class HoldpointRest {
  /** The typed `openapi-fetch` client underneath, for what this class does not wrap. */
  readonly api: Client<paths>;
  readonly #baseUrl: string;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#baseUrl = trimBase(options.baseUrl);
    this.#fetch = authenticatingFetch(options.token, options.fetch ?? globalThis.fetch.bind(globalThis));
    this.api = createClient<paths>({ baseUrl: this.#baseUrl, fetch: (request: Request) => this.#fetch(request) });
  }

  /**
   * One page of the organisation's interactions, in the order of their last
   * change (pending ones: the order they were opened). A page may be short, even
   * empty, and still have a `nextCursor`: follow it (or use {@link pending}).
   *
   * @throws {HoldpointError} e.g. {@link UnauthenticatedError}, {@link InvalidRequestError}.
   */
  async list(options: ListOptions = {}): Promise<InteractionPage> {
    const query: { state?: ListState; limit?: number; cursor?: string } = {};
    if (options.state !== undefined) query.state = options.state;
    if (options.limit !== undefined) query.limit = options.limit;
    if (options.cursor !== undefined) query.cursor = options.cursor;
    const { data, error, response } = await this.api.GET('/v1/interactions', {
      params: { query },
      signal: options.signal,
    });
    if (data === undefined) throw await errorFromResponse(response, error);
    return data;
  }

  /**
   * Every interaction in `state` (default `pending`), page after page.
   *
   * @throws {HoldpointError} as {@link list}, from the page that failed.
   */
  async *pending(options: ListOptions = {}): AsyncGenerator<InteractionView, void, undefined> {
    let cursor = options.cursor;
    do {
      const page = await this.list({ ...options, cursor });
      yield* page.items;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /**
   * One interaction, with the held call's arguments for an approval
   * (`call.arguments`, `call.argumentsDigest`).
   *
   * @throws {NotFoundError} when it does not exist or is another organisation's.
   */
  async get(id: string, options: CallOptions = {}): Promise<InteractionView> {
    const { data, error, response } = await this.api.GET('/v1/interactions/{id}', {
      params: { path: { id } },
      signal: options.signal,
    });
    if (data === undefined) throw await errorFromResponse(response, error);
    return data;
  }

  /**
   * Answers an `ask_user` call (`POST /v1/questions/{questionId}/answer`): one entry per question, in the order
   * asked; `options` index the list exactly as `question-asked` sent it.
   *
   * @throws {AnswerDoesNotFitError} the answers do not fit the questions (`NRY-0003`).
   * @throws {ConflictError} already answered or closed (`NRY-0009`), or a product answer the lane refused.
   * @throws {UnavailableError} no outcome in time, even after retrying for `retryForMs`: retry with the same `idempotencyKey`.
   */
  async answerQuestion(id: string, answers: OptionAnswer[], options: AnswerOptions = {}): Promise<void> {
    const key = options.idempotencyKey ?? newIdempotencyKey();
    await withRetries(async () => {
      const { error, response } = await this.api.POST('/v1/questions/{questionId}/answer', {
        params: { path: { questionId: id }, header: { 'Idempotency-Key': key } },
        body: { answers },
        signal: options.signal,
      });
      if (response.status !== 204) throw await errorFromResponse(response, error);
    }, transientRest, key, options);
  }

  /**
   * Decides an approval (the Runtime's `approve`). Resolves with `undefined` when
   * decided (`204`).
   *
   * A hold that needs approvals from several distinct people (the runtime's
   * `approvals`; the view's `approvals: {required, given: [{by, at}], byYou}`)
   * counts each approval but the last: that resolves with its
   * {@link ApprovalProgress} `{given, required}` (the server's `202`) and the call
   * still waits; the last one needed releases it and resolves with `undefined`.
   * One denial decides at once.
   *
   * @throws {AlreadyApprovedError} this person's approval is already counted (`NRY-0038`; with another key): nothing changed.
   * @throws {ArgumentsChangedError} `argumentsDigest` is not the held call's (`NRY-0010`).
   * @throws {EditRefusedError} an edit the hold forbids or that cannot be released (`NRY-0028`, `-0029`, `-0033`).
   * @throws {RuleRefusedError} `remember` on a hold that needs several people, or a scope that cannot be kept (`NRY-0025`, `-0026`).
   * @throws {NotAssigneeError} the interaction names who may answer it and this caller is not one (`NRY-0037`).
   * @throws {ConflictError} already answered with another key, or closed (`NRY-0009`).
   * @throws {UnavailableError} no outcome in time, even after retrying for `retryForMs`: retry with the same `idempotencyKey`.
   */
  async approve(id: string, decision: ApproveDecision, options: AnswerOptions = {}): Promise<ApprovalProgress | undefined> {
    const body: {
      approved: boolean;
      reason?: string;
      argumentsDigest?: string;
      editedArguments?: Record<string, unknown>;
      remember?: NonNullable<ApproveDecision['remember']>;
    } = { approved: decision.approved };
    if (decision.reason !== undefined) body.reason = decision.reason;
    if (decision.argumentsDigest !== undefined) body.argumentsDigest = decision.argumentsDigest;
    if (decision.editedArguments !== undefined) body.editedArguments = decision.editedArguments;
    if (decision.remember !== undefined) body.remember = decision.remember;
    const key = options.idempotencyKey ?? newIdempotencyKey();
    return withRetries(async () => {
      const { data, error, response } = await this.api.POST('/v1/interactions/{id}/approve', {
        params: { path: { id }, header: { 'Idempotency-Key': key } },
        body,
        signal: options.signal,
      });
      return answered(response, data, error);
    }, transientRest, key, options);
  }

  /**
   * Answers a question or a connection with any JSON value (the Runtime's
   * `respond`): for a connection `{connected: true}` (or `true`) connects, anything
   * else does not; for a question `{answers: [...]}` is checked like
   * {@link answerQuestion}'s body; for an approval a boolean decides it as
   * {@link approve} does. Resolves with `undefined` when answered (`204`), or with
   * the {@link ApprovalProgress} of an approval counted toward a hold that needs
   * several people while the call waits (`202`), as {@link approve}.
   *
   * @throws {AlreadyApprovedError} `true` on an approval this person already approved (`NRY-0038`).
   * @throws {HoldpointError} as {@link answerQuestion}.
   */
  async respond(id: string, value: unknown, options: RespondOptions = {}): Promise<ApprovalProgress | undefined> {
    const body: { value: unknown; reason?: string } = { value };
    if (options.reason !== undefined) body.reason = options.reason;
    const key = options.idempotencyKey ?? newIdempotencyKey();
    return withRetries(async () => {
      const { data, error, response } = await this.api.POST('/v1/interactions/{id}/respond', {
        params: { path: { id }, header: { 'Idempotency-Key': key } },
        body,
        signal: options.signal,
      });
      return answered(response, data, error);
    }, transientRest, key, options);
  }

  /**
   * Answers up to 100 interactions at once (`POST /v1/answers`): each item is
   * decided on its own, as its single operation would be (not one transaction),
   * and its result comes back in the items' order. Items answered `503` are sent
   * again with their keys for at most `retryForMs`; the same keys never decide
   * twice, so the whole call may be repeated with the same items. An item
   * counted toward a hold that needs several people is `status: 202` with its
   * `approvals` ({@link ApprovalProgress}).
   *
   * @throws {InvalidRequestError} a body that is not a batch (`NRY-0034`: no item, over 100).
   */
  async answerMany(items: BatchAnswer[], options: Omit<AnswerOptions, 'idempotencyKey'> = {}): Promise<BatchResult[]> {
    const sent = items.map((i) => ({ ...i, idempotencyKey: i.idempotencyKey ?? newIdempotencyKey() }));
    const results: BatchResult[] = new Array<BatchResult>(sent.length);
    let waiting = sent.map((_, i) => i);
    const budget = options.retryForMs ?? DEFAULT_RETRY_FOR_MS;
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      const batch = waiting.map((i) => sent[i]);
      const got = await withRetries(async () => {
        const response = await this.#fetch(`${this.#baseUrl}/v1/answers`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ items: batch }),
          signal: options.signal,
        });
        const body: unknown = await response.json().catch(() => undefined);
        if (response.status !== 200) throw await errorFromResponse(response, body);
        return (body as { results: BatchResult[] }).results;
      }, transientRest, 'batch', options);
      if (got.length !== waiting.length) throw new TypeError(`${got.length} results for ${waiting.length} items`);
      waiting.forEach((i, n) => {
        results[i] = got[n] as BatchResult;
      });
      waiting = waiting.filter((i) => RETRY_STATUSES.includes(results[i]?.status ?? 0));
      const delayMs = RETRY_BACKOFF_MS[Math.min(attempt - 1, RETRY_BACKOFF_MS.length - 1)] ?? 5000;
      if (waiting.length === 0 || Date.now() - started + delayMs > budget) return results;
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }

  /**
   * The organisation's events (`GET /v1/events`) as they are stored, resuming
   * after a drop with `Last-Event-ID` so nothing repeats and nothing is lost.
   * See {@link EventsOptions}.
   */
  events(options: EventsOptions = {}): AsyncGenerator<StreamedEvent, void, undefined> {
    return followEvents(this.#baseUrl, this.#fetch, options);
  }
}

/**
 * An answer's response: `undefined` for `204` (decided), the progress of a `202`
 * (an approval counted, the call waiting for other people's); anything else is
 * thrown as its typed error.
 */
async function answered(
  response: Response,
  data: { approvals?: ApprovalProgress } | undefined,
  error: unknown,
): Promise<ApprovalProgress | undefined> {
  if (response.status === 204) return undefined;
  if (response.status === 202) {
    const approvals = data?.approvals;
    if (approvals && typeof approvals.given === 'number' && typeof approvals.required === 'number') {
      return { given: approvals.given, required: approvals.required };
    }
  }
  throw await errorFromResponse(response, error);
}

/**
 * A REST answer's failure that may still be recorded: a 502, 503 or 504, or a
 * request that never got an answer (`fetch` throws a `TypeError`).
 */
function transientRest(error: unknown): { status: number; retryAfter?: number | undefined } | undefined {
  if (error instanceof HoldpointError) {
    return error.status !== undefined && RETRY_STATUSES.includes(error.status)
      ? { status: error.status, retryAfter: error.retryAfter }
      : undefined;
  }
  return error instanceof TypeError ? { status: 0 } : undefined;
}
