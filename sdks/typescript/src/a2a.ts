/**
 * Answering paused tasks over A2A v1.0 with the interactions/v1 extension, on
 * the official `@a2a-js/sdk` client (JSON-RPC transport). The wire shapes are the
 * extension's (the repository README, "A2A"): a task that waits carries the open interaction in its
 * status message's metadata under {@link INTERACTIONS_EXTENSION}; an answer is a
 * `ROLE_USER` message on the same task listing the extension, whose metadata
 * names the interaction and carries `approved` or `value`.
 *
 * @module
 */
import { Message, type StreamResponse, type Task, TaskState } from '@a2a-js/sdk';
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  ServiceParameters,
  withA2AExtensions,
} from '@a2a-js/sdk/client';

import { HoldpointError, errorFromA2A } from './errors.js';
import {
  type AnswerOptions,
  type CallOptions,
  type ClientOptions,
  RETRY_STATUSES,
  authenticatingFetch,
  trimBase,
  withRetries,
} from './http.js';
import type { ApprovalDetail, ConnectionDetail, Kind, QuestionDetail } from './types.js';

export type { StreamResponse, Task } from '@a2a-js/sdk';
export { TaskState } from '@a2a-js/sdk';

/** The interactions/v1 extension's URI: activated on every call, listed on every answer. */
export const INTERACTIONS_EXTENSION = 'https://docs.nylorun.com/a2a/interactions/v1';

/** The interaction a task waits for (its status message's extension metadata). */
export type OpenInteraction =
  | { interactionId: string; kind: 'approval'; prompt: string; detail?: ApprovalDetail }
  | { interactionId: string; kind: 'question'; prompt: string; detail?: QuestionDetail }
  | { interactionId: string; kind: 'connection'; prompt: string; detail?: ConnectionDetail };

interface AnswerCommon {
  /** The task that waits (`task.id`). */
  taskId: string;
  /** The task's context (`task.contextId`); checked by Holdpoint when given. */
  contextId?: string;
  /** The open interaction's id (`waiting(task).interactionId`). */
  interactionId: string;
  /**
   * The answer's idempotency key (1-128 printable ASCII): a retry with the same id
   * answers once and returns as the first did. For example
   * `answer:${interactionId}`.
   */
  messageId: string;
  /** Travels with the answer (with a denial: why). */
  reason?: string;
  /**
   * An approval only: the held call's `argumentsDigest` the person was shown
   * (`NRY-0010` when the held arguments differ).
   */
  argumentsDigest?: string;
  /**
   * Edit, then approve: with `approved: true` and `argumentsDigest`, the
   * arguments (a JSON object) to release instead of the held ones (refused with
   * `NRY-0028` when the hold is not editable, `NRY-0029` when not releasable).
   */
  editedArguments?: Record<string, unknown>;
}

/**
 * One answer to a waiting task. Exactly one of:
 * - `approved`: an approval's decision (for a question or connection it is read as the value);
 * - `value`: any JSON, for a question or a connection (a boolean on an approval reads as `approved`);
 * - `text`: a plain text reply; it answers a question, and never approves
 *   (an approval refuses it with {@link UnsupportedOperationError}).
 */
export type AnswerParams = AnswerCommon &
  (
    | { approved: boolean; value?: never; text?: never }
    | { value: unknown; approved?: never; text?: never }
    | { text: string; approved?: never; value?: never }
  );

/** Options of {@link HoldpointA2A.connect}. */
export interface A2AOptions extends ClientOptions {
  /** The agent card's path (default `/.well-known/agent-card.json`). */
  cardPath?: string;
}

/**
 * The interaction `task` waits for, or `undefined` when it waits for none
 * (not `TASK_STATE_AUTH_REQUIRED` / `TASK_STATE_INPUT_REQUIRED`, or no extension
 * metadata: the call did not activate the extension).
 */
export function waiting(task: Pick<Task, 'status'>): OpenInteraction | undefined {
  const status = task.status;
  if (status === undefined) return undefined;
  if (status.state !== TaskState.TASK_STATE_AUTH_REQUIRED && status.state !== TaskState.TASK_STATE_INPUT_REQUIRED) {
    return undefined;
  }
  const meta: unknown = status.message?.metadata?.[INTERACTIONS_EXTENSION];
  if (typeof meta !== 'object' || meta === null) return undefined;
  const open = meta as Record<string, unknown>;
  const kinds: Kind[] = ['approval', 'question', 'connection'];
  if (typeof open.interactionId !== 'string' || !kinds.includes(open.kind as Kind)) return undefined;
  const result: Record<string, unknown> = {
    interactionId: open.interactionId,
    kind: open.kind,
    prompt: typeof open.prompt === 'string' ? open.prompt : '',
  };
  if (typeof open.detail === 'object' && open.detail !== null) result.detail = open.detail;
  return result as OpenInteraction;
}

/**
 * Holdpoint's A2A server, through the official SDK's {@link Client}.
 *
 * ```ts
 * const a2a = await HoldpointA2A.connect({ baseUrl: 'http://127.0.0.1:8080', token });
 * const task = await a2a.getTask('t1');
 * const open = waiting(task);
 * if (open?.kind === 'approval') {
 *   await a2a.answer({ taskId: task.id, contextId: task.contextId, interactionId: open.interactionId,
 *     approved: true, messageId: `answer:${open.interactionId}` });
 * }
 * ```
 */
export class HoldpointA2A {
  /** The official SDK client (JSON-RPC transport, authenticated), for anything not wrapped here. */
  readonly client: Client;

  private constructor(client: Client) {
    this.client = client;
  }

  /**
   * Reads the agent card at `baseUrl` (public) and builds the client on its
   * JSON-RPC interface; every request carries the token.
   *
   * @throws when the card cannot be read.
   */
  static async connect(options: A2AOptions): Promise<HoldpointA2A> {
    const fetchImpl = authenticatingFetch(options.token, options.fetch ?? globalThis.fetch.bind(globalThis));
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
      }),
    );
    const client = await factory.createFromUrl(trimBase(options.baseUrl), options.cardPath);
    return new HoldpointA2A(client);
  }

  /**
   * Answers the task's open interaction (read by its kind: the README's reading rules) and returns the
   * task, `TASK_STATE_WORKING` once answered.
   *
   * @throws {UnsupportedOperationError} text on an approval (`NRY-0020`, JSON-RPC -32004).
   * @throws {ConflictError} answered before with another `messageId`, or closed (`NRY-0009`).
   * @throws {NotFoundError} no such task, or another organisation's (`NRY-0004`).
   * @throws {UnavailableError} no outcome in time, even after retrying for `retryForMs`: retry with the same `messageId`.
   * @throws {InteractionNotNamedError} never from this SDK (it always names the interaction, `NRY-0024`).
   * @throws {HoldpointError} any other refusal, by its code.
   *
   * A retryable error (`NRY-0050`), an HTTP `502`, `503` or `504` from a proxy, or a
   * failed connection is retried with the same `messageId` for `options.retryForMs`
   * (default a minute), so an answer that was recorded returns its task.
   */
  async answer(params: AnswerParams, options: Omit<AnswerOptions, 'idempotencyKey'> = {}): Promise<Task> {
    const message = Message.fromJSON(answerMessage(params));
    const result = await withRetries(
      () =>
        this.#call(() =>
          this.client.sendMessage(
            { tenant: '', message, configuration: undefined, metadata: undefined },
            this.#options(options),
          ),
        ),
      transientA2A,
      params.messageId,
      options,
    );
    if (!('status' in result)) {
      throw new TypeError('Holdpoint answered SendMessage with a message instead of a task');
    }
    return result;
  }

  /**
   * The task as it is now, with the open interaction in its status message.
   *
   * @throws {NotFoundError} no such task, or another organisation's.
   */
  async getTask(taskId: string, options: CallOptions = {}): Promise<Task> {
    return this.#call(() => this.client.getTask({ tenant: '', id: taskId, historyLength: undefined }, this.#options(options)));
  }

  /**
   * The task now, then each of its status updates as they happen
   * (`SubscribeToTask`), until `signal` aborts or the iteration stops.
   *
   * @throws {NotFoundError} no such task, or another organisation's.
   */
  async *subscribe(taskId: string, options: CallOptions = {}): AsyncGenerator<StreamResponse, void, undefined> {
    const stream = this.client.resubscribeTask({ tenant: '', id: taskId }, this.#options(options));
    try {
      for (;;) {
        let next: IteratorResult<StreamResponse, void>;
        try {
          next = await stream.next();
        } catch (error) {
          if (options.signal?.aborted) return;
          throw errorFromA2A(error) ?? error;
        }
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await stream.return(undefined).catch(() => {});
    }
  }

  #options(options: CallOptions) {
    return {
      signal: options.signal,
      serviceParameters: ServiceParameters.create(withA2AExtensions(INTERACTIONS_EXTENSION)),
    };
  }

  async #call<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw errorFromA2A(error) ?? error;
    }
  }
}

/**
 * An A2A answer's failure that may still be recorded: Holdpoint's retryable
 * `NRY-0050` (-32603 with `retryable: "true"`), an HTTP 502, 503 or 504 in front
 * of it (the transport's error names the status), or a failed connection.
 */
function transientA2A(error: unknown): { status: number; retryAfter?: number | undefined } | undefined {
  if (error instanceof HoldpointError) {
    return error.code === 'NRY-0050' ? { status: 503, retryAfter: error.retryAfter } : undefined;
  }
  if (error instanceof TypeError) return { status: 0 };
  const status = /Status: (\d{3})\b/.exec(error instanceof Error ? error.message : '')?.[1];
  return status !== undefined && RETRY_STATUSES.includes(Number(status)) ? { status: Number(status) } : undefined;
}

/**
 * The answer message in the extension's JSON shape: one part (`data` with the
 * decision or value, or `text`), the extension listed, and its metadata naming
 * the interaction.
 */
export function answerMessage(params: AnswerParams): Record<string, unknown> {
  const meta: Record<string, unknown> = { interactionId: params.interactionId };
  let part: Record<string, unknown>;
  if (typeof params.approved === 'boolean') {
    meta.approved = params.approved;
    part = { data: params.reason === undefined ? { approved: params.approved } : { approved: params.approved, reason: params.reason } };
  } else if (typeof params.text === 'string') {
    part = { text: params.text };
  } else if ('value' in params) {
    meta.value = params.value;
    part = { data: params.value };
  } else {
    throw new TypeError('answer needs one of approved, value or text');
  }
  if (params.reason !== undefined) meta.reason = params.reason;
  if (params.argumentsDigest !== undefined) meta.argumentsDigest = params.argumentsDigest;
  if (params.editedArguments !== undefined) meta.editedArguments = params.editedArguments;
  const message: Record<string, unknown> = {
    role: 'ROLE_USER',
    messageId: params.messageId,
    taskId: params.taskId,
    parts: [part],
    extensions: [INTERACTIONS_EXTENSION],
    metadata: { [INTERACTIONS_EXTENSION]: meta },
  };
  if (params.contextId !== undefined) message.contextId = params.contextId;
  return message;
}
