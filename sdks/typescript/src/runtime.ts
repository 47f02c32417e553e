/**
 * The runtime side over NATS, on the official NATS JavaScript client
 * (`@nats-io/transport-node`, `@nats-io/jetstream`, `@nats-io/kv`): the same
 * JetStream commands, subjects, headers and command ids as the Rust
 * `holdpoint-client` and the Python SDK.
 *
 * Every call publishes one command on `hp.cmd.<org>.<key>.<verb>` with
 * `Nats-Msg-Id` = its deterministic command id ({@link commandId}) and
 * `Hp-Reply-To` = a subject under this connection's inbox, where the worker
 * replies its outcome `{"commandId", "result": {"Ok": …} | {"Err": {code, message}}}`.
 * When JetStream reports the publish as a duplicate (a retry inside the
 * duplicate window), the outcome is read from the records instead
 * (`HP_OUTCOMES`, or the outbox and resolution of the record the command
 * wrote). A stored refusal that is not a decision (a provisional code, e.g.
 * `NRY-0004` before the interaction was opened) is not replayed: the command is
 * published again under `<command id>-r<unique>` so a worker decides it anew.
 * So retrying any call after {@link OutcomeTimeoutError} is safe: it is decided
 * once.
 *
 * ```ts
 * const rt = await Runtime.connect('nats://127.0.0.1:4222', 'acme');
 * const at = placement({ session: 'session-1', lane: 'main', taskId: 'task-1', contextId: 'ctx-1' });
 * await rt.openSession('session-1');
 * await rt.holdForApproval(at, { effectId: 'eff_1', callId: 'call_1', server: 'github',
 *   tool: 'create_pull_request', arguments: { title: 'Fix' } });
 * ```
 *
 * @module
 */
/// <reference types="node" />
import { randomUUID } from 'node:crypto';

import { AckPolicy, DeliverPolicy, type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { type NatsConnection, type NodeConnectionOptions, type Subscription, connect, createInbox, headers, nanos } from '@nats-io/transport-node';

import { type HoldpointError, InternalError, holdpointError, isErrorCode } from './errors.js';
import { AgentManifest } from './manifest.js';
import { ConnectionsDisabledError, InvalidIdError, OutcomeTimeoutError } from './runtime-errors.js';
import * as wire from './wire.js';
import type { CommandEnvelope, JsonValue } from './wire.js';

/** The header naming the subject the worker replies the outcome to. */
export const REPLY_HEADER = 'Hp-Reply-To';

/**
 * Codes whose stored refusal is not a decision (`ErrorCode::is_provisional`;
 * `schemas/command-vectors.json` lists them and the tests compare).
 */
export const PROVISIONAL_CODES: ReadonlySet<string> = new Set([
  'NRY-0001', 'NRY-0002', 'NRY-0003', 'NRY-0004', 'NRY-0010', 'NRY-0020',
  'NRY-0022', 'NRY-0023', 'NRY-0024', 'NRY-0025', 'NRY-0026', 'NRY-0028',
  'NRY-0029', 'NRY-0030', 'NRY-0032', 'NRY-0033', 'NRY-0034', 'NRY-0035',
  'NRY-0036', 'NRY-0037', 'NRY-0038', 'NRY-0040', 'NRY-0041', 'NRY-0050', 'NRY-0051',
]);

/** The longest id, in UTF-8 bytes. */
export const MAX_ID_LEN = 128;
const MAX_REATTEMPTS = 2;
const POLL_DELAYS_MS = [20, 50, 100, 200, 250];

/** `blocking`: the call waits for the answer; `product`: answers become lane messages. */
export type SessionMode = 'blocking' | 'product';
/** Why the host closes a pending interaction. */
export type CloseReason = 'interrupted' | 'superseded' | 'expired' | 'canceled';
/** What expiry decides: `decide` (the kind's default) or `close`. */
export type OnExpiry = 'decide' | 'close';

/**
 * Who may answer what is opened (README "Assignees"): people by `sub` (1 to 256
 * characters, no control characters) and groups by the configured groups claim
 * (1 to 128 printable ASCII characters, no spaces). The worker refuses an empty
 * one, more than 32 of either, or a name twice (`NRY-0001`); anyone else of the
 * organisation who answers gets `NRY-0037`.
 */
export interface Assignees {
  readonly people?: readonly string[] | undefined;
  readonly groups?: readonly string[] | undefined;
}

function checkAssignees(a: Assignees): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const people = [...(a.people ?? [])];
  for (const p of people) {
    // eslint-disable-next-line no-control-regex
    if (typeof p !== 'string' || p.length === 0 || p.length > 256 || /[\u0000-\u001f\u007f-\u009f]/.test(p)) {
      throw new InvalidIdError('a person is 1 to 256 characters without control characters');
    }
  }
  const groups = [...(a.groups ?? [])].map((g) => checkId('group', g));
  if (people.length) out.people = people;
  if (groups.length) out.groups = groups;
  return out;
}

/** Throws {@link InvalidIdError} unless `value` is 1 to 128 printable ASCII characters without spaces. */
export function checkId(what: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) throw new InvalidIdError(`${what} is empty`);
  if (Buffer.byteLength(value, 'utf8') > MAX_ID_LEN) throw new InvalidIdError(`${what} is longer than ${MAX_ID_LEN} bytes`);
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) throw new InvalidIdError(`${what} may only hold printable ASCII without spaces`);
  }
  return value;
}

/**
 * An interaction's deadline as a runtime asks for it: at most one of `expiresAt`
 * (sent as RFC 3339 UTC with milliseconds) and `expiresIn` (whole seconds from
 * when the worker decides), and what expiry decides. Refused with `NRY-0022` by
 * a nats-server without message schedules, `NRY-0023` when past or beyond the
 * configured maximum.
 */
export interface Expiry {
  expiresAt?: Date | string | number | undefined;
  expiresIn?: number | undefined;
  onExpiry?: OnExpiry | undefined;
}

/**
 * Where an interaction lives: session, lane, A2A task and context (each 1 to 128
 * printable ASCII characters, no spaces); optionally the agent its calls are held
 * for (`agent`-scoped remembered rules match on it) and the deadline of what is
 * opened here. Build it with {@link placement}, which checks the ids.
 */
export interface Placement {
  readonly session: string;
  readonly lane: string;
  readonly taskId: string;
  readonly contextId: string;
  readonly agent?: string | undefined;
  readonly expiry?: Expiry | undefined;
  /** Who may answer what is opened here; absent: anyone of the organisation. */
  readonly assignees?: Assignees | undefined;
  /**
   * Who is added to the assignees at the deadline's warning stage if nobody
   * answered by then (README "Escalation"). The worker refuses it (`NRY-0001`,
   * nothing opened) without a deadline, without a configured warning lead, with a
   * deadline closer than that lead, or when it and the assignees name more than
   * 32 people or 32 groups together. Absent: no escalation.
   */
  readonly escalation?: Assignees | undefined;
}

/** A checked {@link Placement}; {@link InvalidIdError} for a bad id. */
export function placement(at: Placement): Placement {
  checkId('sessionId', at.session);
  checkId('lane', at.lane);
  checkId('taskId', at.taskId);
  checkId('contextId', at.contextId);
  if (at.agent !== undefined) checkId('agent', at.agent);
  if (at.assignees !== undefined) checkAssignees(at.assignees);
  if (at.escalation !== undefined) checkAssignees(at.escalation);
  return Object.freeze({ ...at });
}

/**
 * One question of an `askUser` call: its text (1 to 2,000 characters), the
 * options in order (answers index into them; at most 64 of at most 500
 * characters), whether several may be chosen and whether free text may come
 * with them (both default to false). `schema`: a form the answer's `value`
 * must fit (README "Questions with a form"; only in a call of one question).
 */
export interface Question {
  text: string;
  options?: readonly string[];
  multiple?: boolean;
  allowText?: boolean;
  schema?: Record<string, unknown>;
}

/**
 * A followed event: its `HP_EVENTS` stream `sequence` (resume after it with
 * `follow({after: sequence})`), its `subject`, its `name` (the subject's last
 * token, e.g. `tool-call-finished`) and the CloudEvent as stored.
 */
export interface Followed {
  readonly sequence: number;
  readonly subject: string;
  readonly name: string;
  readonly event: { id?: string; type?: string; subject?: string; data?: any; [field: string]: unknown };
}

/** The outcome the worker replies and records for a command. */
export interface Outcome {
  commandId?: string;
  result: { Ok?: unknown; Err?: { code?: string; message?: string } };
}

/** A released call's result when it produced `output` (any JSON). */
export function toolOk(output: JsonValue): { status: 'ok'; output: JsonValue } {
  return { status: 'ok', output };
}

/** A released call's result when it failed with a stable `code` (e.g. `tool.failed`) and a `message` for the model. */
export function toolError(code: string, message: string): { status: 'error'; code: string; message: string } {
  return { status: 'error', code, message };
}

/** The result a `tool-result` carries: {@link toolOk} or {@link toolError}. */
export type ToolResult = ReturnType<typeof toolOk> | ReturnType<typeof toolError>;

// -- the commands, as the Rust client builds them ----------------------------------

/**
 * An approval request: the held call's server, tool, arguments and why;
 * `editable` is written only when true, `approvals` (how many distinct people
 * must approve, 2 to 5; 1 or left out, one person) only when given, as the Rust
 * client does.
 */
export function approvalRequest(
  server: string, tool: string, args: unknown, reason?: string, editable = false, approvals?: number,
): Record<string, unknown> {
  const request: Record<string, unknown> = { kind: 'approval', server, tool, arguments: args };
  if (reason !== undefined) request.reason = reason;
  if (editable) request.editable = true;
  if (approvals !== undefined) request.approvals = approvals;
  return request;
}

/** A question request with 1 to 4 questions, every field written (the id depends on it). */
export function questionRequest(questions: readonly Question[]): Record<string, unknown> {
  return {
    kind: 'question',
    questions: questions.map((q) => ({
      text: q.text,
      options: [...(q.options ?? [])],
      multiple: Boolean(q.multiple),
      allowText: Boolean(q.allowText),
      ...(q.schema === undefined ? {} : { schema: q.schema }),
    })),
  };
}

/** A connection request, `app` and `reason` as given (the worker trims them and cuts them at 80 and 280 characters). */
export function connectionRequest(app: string, reason: string): Record<string, unknown> {
  return { kind: 'connection', app, reason };
}

/** The `open` command for an interaction at `at` asking `request` (`kind`-tagged). */
export function openCommand(at: Placement, interactionId: string, callId: string, request: Record<string, unknown>): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = {
    type: 'open',
    interactionId: checkId('interactionId', interactionId),
    session: at.session,
    lane: at.lane,
    taskId: at.taskId,
    contextId: at.contextId,
    callId: checkId('callId', callId),
  };
  if (at.agent !== undefined) command.agent = at.agent;
  command.request = { ...request };
  const expiry = at.expiry ?? {};
  if (expiry.expiresAt !== undefined) command.expiresAt = wire.formatTimestamp(expiry.expiresAt);
  if (expiry.expiresIn !== undefined) command.expiresIn = Math.trunc(expiry.expiresIn);
  if (expiry.onExpiry !== undefined && expiry.onExpiry !== 'decide') command.onExpiry = expiry.onExpiry;
  if (at.assignees !== undefined) command.assignees = checkAssignees(at.assignees);
  if (at.escalation !== undefined) command.escalation = checkAssignees(at.escalation);
  return command;
}

/** A session command (`mode` and `laneCapacity` for `session-open` only). */
export function sessionCommand(
  verb: 'session-open' | 'session-close' | 'session-end', session: string, mode: SessionMode = 'blocking', laneCapacity?: number,
): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = { type: verb, session: checkId('sessionId', session) };
  if (verb === 'session-open') {
    command.mode = mode;
    if (laneCapacity !== undefined) command.laneCapacity = Math.trunc(laneCapacity);
  }
  return command;
}

/** The host's `close` of a pending interaction (routed by its task when known). */
export function closeCommand(interactionId: string, reason: CloseReason, taskId?: string): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = { type: 'close', interactionId: checkId('interactionId', interactionId), reason };
  if (taskId !== undefined) command.taskId = taskId;
  return command;
}

/**
 * A `deadline` command: set, move or (neither time given) clear. `changeId` (1 to
 * 128 printable ASCII characters, no spaces) names the change: part of the command
 * id, so a retry is a replay and setting a deadline back to an earlier one is a
 * change of its own.
 */
export function deadlineCommand(interactionId: string, expiry: Expiry, taskId?: string, changeId?: string): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = { type: 'deadline', interactionId: checkId('interactionId', interactionId) };
  if (taskId !== undefined) command.taskId = taskId;
  if (changeId !== undefined) command.changeId = checkId('changeId', changeId);
  if (expiry.expiresAt !== undefined) command.expiresAt = wire.formatTimestamp(expiry.expiresAt);
  if (expiry.expiresIn !== undefined) command.expiresIn = Math.trunc(expiry.expiresIn);
  return command;
}

/**
 * A `reassign` command: `assignees` may answer from now on (`undefined`: anyone
 * of the organisation). `changeId` (1 to 128 printable ASCII characters, no
 * spaces) names this change: the same id again is a replay.
 */
export function reassignCommand(
  interactionId: string,
  changeId: string,
  assignees: Assignees | undefined,
  taskId?: string,
): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = { type: 'reassign', interactionId: checkId('interactionId', interactionId) };
  if (taskId !== undefined) command.taskId = taskId;
  command.changeId = checkId('changeId', changeId);
  if (assignees !== undefined) command.assignees = checkAssignees(assignees);
  return command;
}

/** A `tool-result` command: the released call's result. */
export function toolResultCommand(effectId: string, result: ToolResult | Record<string, unknown>, taskId?: string): CommandEnvelope['command'] {
  const command: CommandEnvelope['command'] = { type: 'tool-result', interactionId: checkId('interactionId', effectId), result: { ...result } };
  if (taskId !== undefined) command.taskId = taskId;
  return command;
}

/** A `turn-start` or `turn-finish` command. */
export function turnCommand(verb: 'turn-start' | 'turn-finish', session: string, lane: string, turnId: string): CommandEnvelope['command'] {
  return { type: verb, session: checkId('sessionId', session), lane: checkId('lane', lane), turnId: checkId('turnId', turnId) };
}

function asOutcome(value: unknown): Outcome | undefined {
  if (typeof value === 'object' && value !== null) {
    const result = (value as { result?: unknown }).result;
    if (typeof result === 'object' && result !== null && !Array.isArray(result)) return value as Outcome;
  }
  return undefined;
}

function isDecision(outcome: Outcome): boolean {
  const err = outcome.result.Err;
  return !(err && typeof err.code === 'string' && PROVISIONAL_CODES.has(err.code));
}

/** The catalog's error for a refused outcome (`InternalError` for a code this SDK does not know). */
function refusal(outcome: Outcome): HoldpointError {
  const code = String(outcome.result.Err?.code ?? '');
  const message = String(outcome.result.Err?.message ?? 'refused');
  if (isErrorCode(code)) return holdpointError({ code, title: code, message });
  return new InternalError({ code: 'NRY-0051', title: 'NRY-0051', message: `${code}: ${message}`, retryable: true });
}

/**
 * How an approval was decided ({@link Runtime.waitForDecision}): `approved` with
 * the arguments to run; or not, with the person's `reason`, or `closed` when it
 * closed undecided (`expired`, `canceled`, …).
 */
export interface Decision {
  readonly approved: boolean;
  /** The arguments to run (approved only): the held ones, or the person's edit when `edited`. */
  readonly arguments?: unknown;
  readonly edited?: boolean;
  /** Who decided (`approvedBy`; `holdpoint:expiry` when the deadline did). */
  readonly by?: string | undefined;
  /**
   * A released hold that needed several approvals (`approvals`): every person
   * whose approval counted, in order (`by` is the last).
   */
  readonly approvals?: readonly string[] | undefined;
  /** The person's reason, when they gave one. */
  readonly reason?: string | undefined;
  /** Why it closed without a person's decision. */
  readonly closed?: string | undefined;
  /** The event's stream sequence. */
  readonly sequence: number;
}

/** The decision `f` carries about approval `effectId`, if any. */
export function decisionOf(f: Followed, effectId: string): Decision | undefined {
  const data = (f.event.data ?? {}) as Record<string, any>;
  if (f.name === 'tool-call-released' && data.effectId === effectId) {
    const approvals = Array.isArray(data.approvals) ? data.approvals.map(String) : undefined;
    return { approved: true, arguments: data.arguments, edited: Boolean(data.edited), by: data.approvedBy, approvals, sequence: f.sequence };
  }
  if (f.name === 'interaction-resolved' && data.interactionId === effectId && data.answer?.kind === 'approval' && data.answer.approved === false) {
    return { approved: false, by: data.by, reason: data.answer.reason ?? undefined, sequence: f.sequence };
  }
  if (f.name === 'interaction-closed' && data.interactionId === effectId) {
    return { approved: false, closed: String(data.reason ?? 'closed'), sequence: f.sequence };
  }
  return undefined;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Options of {@link Runtime.connect}. */
export interface RuntimeOptions {
  /** Milliseconds each call waits for its outcome (default 10,000). */
  timeoutMs?: number;
  /** The subjects' prefix (default `hp`). */
  subjectPrefix?: string;
  /** Further `@nats-io/transport-node` connection options (credentials, TLS, …); `servers` and `inboxPrefix` are set. */
  nats?: Omit<NodeConnectionOptions, 'servers' | 'inboxPrefix'>;
}

/** Options of {@link Runtime.follow}. */
export interface FollowOptions {
  /** Only this task's events (default: every task). */
  task?: string;
  /** Only events of this name, e.g. `tool-call-finished` (default: every name). */
  name?: string;
  /** Start after this stream sequence (resume with the last {@link Followed.sequence} seen). */
  after?: number;
  /** Start from the first retained event (when `after` is not given). */
  fromStart?: boolean;
  /** Events fetched at once (default 64). */
  batch?: number;
  /** Stops the iteration (it also stops when the loop breaks). */
  signal?: AbortSignal;
}

/** The state bucket's key prefix of each kind of record (services/bus/src/topology.rs). */
const STATE_KINDS: Record<string, string | undefined> = { INTERACTIONS: 'int', SESSIONS: 'ses', TASKS: 'task' };

/**
 * One organisation's runtime handle over NATS. Build it with
 * {@link Runtime.connect}; call {@link Runtime.close} when done.
 *
 * Every method sends one command and waits (`timeoutMs`, default 10 s) for the
 * worker's outcome; a refusal throws the catalog's error for its code (e.g.
 * `ConflictError` for `NRY-0009`), no outcome in time throws
 * {@link OutcomeTimeoutError} (retrying the same call is safe).
 */
export class Runtime {
  /** The organisation. */
  readonly org: string;
  /** Milliseconds each call waits for its outcome. */
  timeoutMs: number;
  /**
   * Whether the last command's first publish was a JetStream duplicate (a retry
   * of a command already stored): for tests and diagnostics.
   */
  lastPublishDuplicate: boolean | undefined;

  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #prefix: string;
  readonly #name: string;
  readonly #owns: boolean;
  readonly #inbox: string;
  readonly #pending = new Map<number, (o: Outcome) => void>();
  readonly #kv = new Map<string, Promise<KV>>();
  #jsm: Promise<JetStreamManager> | undefined;
  #next = 0;
  #reconnects = 0;
  #replies: Subscription | undefined;

  /**
   * A runtime on a connection of your own. It works when that connection may
   * subscribe to its inbox prefix: an organisation's own NATS user needs
   * `inboxPrefix: '_INBOX.org-<org>'`, which {@link Runtime.connect} sets itself.
   */
  constructor(nc: NatsConnection, org: string, options: { timeoutMs?: number; subjectPrefix?: string; ownsConnection?: boolean } = {}) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.org = checkId('orgId', org);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.#prefix = options.subjectPrefix ?? wire.DEFAULT_SUBJECT_PREFIX;
    this.#name = this.#prefix.toUpperCase();
    this.#owns = options.ownsConnection ?? false;
    // Under the connection's own inbox prefix (`_INBOX` unless it set one).
    const prefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
    this.#inbox = createInbox(prefix || undefined);
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'reconnect') this.#reconnects++;
    })().catch(() => undefined);
    this.#replies = nc.subscribe(`${this.#inbox}.>`, {
      callback: (error, msg) => {
        if (error) return;
        const token = Number.parseInt(msg.subject.slice(msg.subject.lastIndexOf('.') + 1), 10);
        let outcome: Outcome | undefined;
        try {
          outcome = asOutcome(JSON.parse(new TextDecoder().decode(msg.data)));
        } catch {
          return;
        }
        const resolve = this.#pending.get(token);
        if (resolve && outcome) {
          this.#pending.delete(token);
          resolve(outcome);
        }
      },
    });
  }

  /**
   * Connects to NATS at `servers` for organisation `org`. The inbox prefix is
   * the organisation's own (`_INBOX.org-<org>`), so a NATS user made for this
   * organisation alone (`holdpoint nats-config --role runtime`) works.
   *
   * Throws {@link InvalidIdError} for a bad `org`, and the NATS client's errors
   * when NATS is unreachable.
   */
  static async connect(servers: string | string[], org: string, options: RuntimeOptions = {}): Promise<Runtime> {
    checkId('orgId', org);
    const nc = await connect({
      name: 'holdpoint-runtime-typescript',
      ...options.nats,
      servers,
      inboxPrefix: `_INBOX.org-${wire.subjectToken(org)}`,
    });
    return new Runtime(nc, org, { timeoutMs: options.timeoutMs, subjectPrefix: options.subjectPrefix, ownsConnection: true });
  }

  /** The NATS connection (for tests and diagnostics). */
  get connection(): NatsConnection {
    return this.#nc;
  }

  /**
   * Stops waiting for replies and, when {@link Runtime.connect} made the
   * connection, drains it (closes it when draining does not end within 5 s).
   */
  async close(): Promise<void> {
    this.#replies?.unsubscribe();
    this.#replies = undefined;
    if (this.#owns && !this.#nc.isClosed()) {
      const drained = this.#nc.drain().then(() => true, () => false);
      const ok = await Promise.race([drained, sleep(5000).then(() => false)]);
      if (!ok && !this.#nc.isClosed()) await this.#nc.close();
    }
  }

  // -- the protocol ------------------------------------------------------------------

  /** `{org: <this org>, command}`: what is published. */
  envelope(command: CommandEnvelope['command']): CommandEnvelope {
    return { org: this.org, command: { ...command } };
  }

  /**
   * Sends `command` (a `Command` JSON object, `type`-tagged as in
   * `schemas/command.json`) and waits for its outcome. Resolves to the accepted
   * outcome (`opened`, `closed`, `finished`, `rescheduled`, `unchanged`, …).
   *
   * Throws the catalog's error for a refusal, or {@link OutcomeTimeoutError}
   * (retry safe).
   */
  async send(command: CommandEnvelope['command'], options: { timeoutMs?: number } = {}): Promise<string> {
    const env = this.envelope(command);
    const outcome = await this.#submit(env, options.timeoutMs ?? this.timeoutMs);
    if ('Ok' in outcome.result) return String(outcome.result.Ok);
    throw refusal(outcome);
  }

  async #submit(env: CommandEnvelope, timeoutMs: number): Promise<Outcome> {
    const deadline = Date.now() + timeoutMs;
    const cmd = wire.commandId(env);
    for (let attempt = 0; ; attempt++) {
      const msgId = attempt === 0 ? cmd : `${cmd}-r${randomUUID().replaceAll('-', '')}`;
      const { outcome, duplicate } = await this.#publishAndWait(env, cmd, msgId, deadline);
      if (duplicate && !isDecision(outcome) && attempt < MAX_REATTEMPTS) continue;
      return outcome;
    }
  }

  async #publishAndWait(env: CommandEnvelope, cmd: string, msgId: string, deadline: number): Promise<{ outcome: Outcome; duplicate: boolean }> {
    const token = ++this.#next;
    let replied: Outcome | undefined;
    const reply = new Promise<Outcome>((resolve) => {
      this.#pending.set(token, (o) => {
        replied = o;
        resolve(o);
      });
    });
    try {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new OutcomeTimeoutError('no time left to publish the command');
      const h = headers();
      h.set(REPLY_HEADER, `${this.#inbox}.${token}`);
      let duplicate: boolean;
      try {
        const ack = await this.#js.publish(wire.commandSubject(env, this.#prefix), wire.canonicalJson(env), {
          msgID: msgId,
          headers: h,
          timeout: remaining,
        });
        duplicate = Boolean(ack.duplicate);
      } catch (error) {
        throw new OutcomeTimeoutError(`command not accepted by NATS: ${(error as Error).message}`, { cause: error });
      }
      if (msgId === cmd) this.lastPublishDuplicate = duplicate;
      if (!duplicate) {
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<undefined>((r) => { timer = setTimeout(() => r(undefined), Math.max(0, deadline - Date.now())); });
        const got = await Promise.race([reply, timedOut]);
        clearTimeout(timer);
        if (got) return { outcome: got, duplicate: false };
      }
      // A duplicate (or a lost reply): read the recorded outcome until the deadline.
      for (let attempt = 0; ; attempt++) {
        let found: Outcome | undefined;
        try {
          found = await this.#recordedOutcome(env, cmd, msgId);
        } catch {
          found = undefined; // read again until the deadline
        }
        if (found) return { outcome: found, duplicate };
        if (replied) return { outcome: replied, duplicate };
        const pause = POLL_DELAYS_MS[Math.min(attempt, POLL_DELAYS_MS.length - 1)] ?? 250;
        if (Date.now() + pause > deadline) throw new OutcomeTimeoutError('no outcome within the deadline');
        await sleep(pause);
      }
    } finally {
      this.#pending.delete(token);
    }
  }

  async #bucket(bucket: string): Promise<KV> {
    let kv = this.#kv.get(bucket);
    if (!kv) {
      kv = new Kvm(this.#nc).open(`${this.#name}_${bucket}`);
      this.#kv.set(bucket, kv);
      kv.catch(() => this.#kv.delete(bucket));
    }
    return kv;
  }

  /**
   * The JSON object at `key` of the records of kind `bucket` (`INTERACTIONS`,
   * `SESSIONS`, `TASKS`: keys `<kind>.<org>.…` of the state bucket `HP_STATE`; any
   * other: bucket `HP_<bucket>`); `undefined` when absent, deleted, or not a JSON
   * object (a record this version cannot read).
   */
  async #kvGet(bucket: string, key: string): Promise<Record<string, unknown> | undefined> {
    const kind = STATE_KINDS[bucket];
    const kv = await this.#bucket(kind ? 'STATE' : bucket);
    if (kind) key = `${kind}.${key}`;
    const entry = await kv.get(key);
    if (!entry || entry.operation !== 'PUT') return undefined;
    try {
      const value: unknown = JSON.parse(entry.string());
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }

  async #recordedOutcome(env: CommandEnvelope, cmd: string, msgId: string): Promise<Outcome | undefined> {
    const stored = asOutcome(await this.#kvGet('OUTCOMES', msgId));
    if (stored && isDecision(stored)) return stored;
    if (cmd !== msgId) return stored;
    return (await this.#recordedDecision(env, cmd)) ?? stored;
  }

  async #recordedDecision(env: CommandEnvelope, cmd: string): Promise<Outcome | undefined> {
    const c = env.command as Record<string, unknown>;
    const org = wire.subjectToken(env.org);
    const t = c.type;
    let record: Record<string, unknown> | undefined;
    if (t === 'message' || t === 'turn-start' || t === 'turn-finish') {
      record = await this.#kvGet('SESSIONS', `${org}.${wire.subjectToken(String(c.session))}.${wire.subjectToken(String(c.lane))}`);
    } else if (t === 'session-open' || t === 'session-close' || t === 'session-end') {
      record = await this.#kvGet('SESSIONS', `${org}.${wire.subjectToken(String(c.session))}`);
    } else if (typeof c.interactionId === 'string') {
      record = await this.#kvGet('INTERACTIONS', `${org}.${wire.subjectToken(c.interactionId)}`);
      const resolution = record?.resolution as { commandId?: unknown; outcome?: unknown } | undefined;
      if (resolution && typeof resolution === 'object' && resolution.commandId === cmd) return asOutcome(resolution.outcome);
    } else {
      return undefined;
    }
    const outbox = record?.outbox;
    if (Array.isArray(outbox)) {
      for (const transition of outbox) {
        if (transition && typeof transition === 'object' && (transition as { commandId?: unknown }).commandId === cmd) {
          return asOutcome((transition as { outcome?: unknown }).outcome);
        }
      }
    }
    return undefined;
  }

  /**
   * The interaction's stored record (state bucket `HP_STATE`, key `int.<org>.<id>`: `state`, `resolution`,
   * `closure`, `result` once its call finished, …), or `undefined` when there is
   * no such interaction. Read-only; for adapters that must know whether a
   * released call already reported its result.
   *
   * @throws {OutcomeTimeoutError} when NATS cannot be read.
   */
  async record(interactionId: string): Promise<Record<string, unknown> | undefined> {
    checkId('interactionId', interactionId);
    try {
      return await this.#kvGet('INTERACTIONS', `${wire.subjectToken(this.org)}.${wire.subjectToken(interactionId)}`);
    } catch (error) {
      throw new OutcomeTimeoutError(`could not read interaction ${interactionId}: ${(error as Error).message}`, { cause: error });
    }
  }

  /**
   * The interaction's task (its commands' partition); `undefined` when there is
   * no such interaction (the worker then answers `NRY-0004`).
   */
  async #taskOf(interactionId: string): Promise<string | undefined> {
    const key = `${wire.subjectToken(this.org)}.${wire.subjectToken(interactionId)}`;
    let record: Record<string, unknown> | undefined;
    try {
      record = await this.#kvGet('INTERACTIONS', key);
    } catch (error) {
      throw new OutcomeTimeoutError(`could not read interaction ${interactionId}: ${(error as Error).message}`, { cause: error });
    }
    return typeof record?.taskId === 'string' ? record.taskId : undefined;
  }

  // -- sessions ----------------------------------------------------------------------

  /**
   * Opens `session` in `mode` (`blocking`: the call waits for the answer;
   * `product`: answers become lane messages). `laneCapacity`: messages a busy
   * lane keeps (default 8). Resolves to `opened`.
   */
  async openSession(session: string, mode: SessionMode = 'blocking', options: { laneCapacity?: number } = {}): Promise<string> {
    return this.send(sessionCommand('session-open', session, mode, options.laneCapacity));
  }

  /** Closes `session` to new messages. Resolves to `closed`. */
  async closeSession(session: string): Promise<string> {
    return this.send(sessionCommand('session-close', session));
  }

  /** Ends `session`: its interactions then answer `NRY-0002`. */
  async endSession(session: string): Promise<string> {
    return this.send(sessionCommand('session-end', session));
  }

  // -- interactions ------------------------------------------------------------------

  /**
   * The tool policy holds a call: opens an approval whose id is `effectId` (also
   * the executor's idempotency key). `server` and `tool` are one-line names of at
   * most 200 characters; `arguments` (any JSON, at most 256 KiB and 32 levels)
   * are released exactly as held, and the approval binds to their digest
   * ({@link argumentsDigest}). Resolves to the interaction id. Opening again with
   * the same content is a replay; with other content `NRY-0021`. `editable`: the
   * person may edit the arguments before approving; set it only when the
   * executor runs the `arguments` of `tool-call-released`.
   *
   * `approvals`: how many distinct people must approve before the call is
   * released, 2 to 5 (README "Two-person approvals"; left out or 1, one person
   * decides). Each approval but the last is counted (`approval-counted`; REST
   * `approve` resolves with its `ApprovalProgress`); the last releases the
   * call and `tool-call-released` lists every approver in `approvals`
   * ({@link Decision.approvals}). One denial decides at once; remembered allow
   * rules never count. Outside 1 to 5, or with `editable`, the worker refuses it
   * (`InvalidRequestError`, `NRY-0001`).
   */
  async holdForApproval(at: Placement, call: {
    effectId: string; callId: string; server: string; tool: string; arguments: unknown; reason?: string; editable?: boolean;
    approvals?: number;
  }): Promise<string> {
    const request = approvalRequest(call.server, call.tool, call.arguments, call.reason, call.editable ?? false, call.approvals);
    await this.send(openCommand(placement(at), call.effectId, call.callId, request));
    return call.effectId;
  }

  /**
   * `ask_user`: opens a question with 1 to 4 questions. The question id is a new
   * UUID unless `questionId` is given (give it to make a retry idempotent).
   * Resolves to the question id.
   */
  async askUser(at: Placement, ask: { callId: string; questions: readonly Question[]; questionId?: string }): Promise<string> {
    const qid = ask.questionId ?? randomUUID();
    await this.send(openCommand(placement(at), qid, ask.callId, questionRequest(ask.questions)));
    return qid;
  }

  /**
   * `ask_user` with a form: one question whose answer is a JSON object that fits
   * `schema`, the restricted JSON Schema of MCP elicitation's form mode. A schema
   * outside that subset is refused when opened (`NRY-0035`); a `value` that does
   * not fit is refused with the pointer of its first misfit (`NRY-0036`).
   * Resolves to the question id.
   */
  async askUserForm(
    at: Placement,
    ask: { callId: string; text: string; schema: Record<string, unknown>; questionId?: string },
  ): Promise<string> {
    const questions = [{ text: ask.text, schema: ask.schema }];
    return this.askUser(at, { callId: ask.callId, questions, ...(ask.questionId === undefined ? {} : { questionId: ask.questionId }) });
  }

  /**
   * `request_connection {app, reason}` for `agent`: refused with
   * {@link ConnectionsDisabledError} (nothing sent) unless the agent's
   * `AGENT.md` says `loop: {connections: true}`. `app` and `reason` are sent as
   * given; the worker trims them and cuts them at 80 and 280 characters. The id
   * is `con_<32 hex>` unless `interactionId` is given (give it to make a retry
   * idempotent). Resolves to the interaction id.
   */
  async requestConnection(agent: AgentManifest, at: Placement, ask: {
    callId: string; app: string; reason: string; interactionId?: string;
  }): Promise<string> {
    if (!agent.connectionsEnabled) {
      throw new ConnectionsDisabledError(
        `requestConnection is off for agent ${JSON.stringify(agent.name ?? '')}: set \`loop.connections: true\` in its AGENT.md`,
      );
    }
    const iid = ask.interactionId ?? `con_${randomUUID().replaceAll('-', '')}`;
    await this.send(openCommand(placement(at), iid, ask.callId, connectionRequest(ask.app, ask.reason)));
    return iid;
  }

  /**
   * The host closes a pending interaction; a blocked call then finishes with
   * `interaction.closed`. Resolves to `closed`; `NRY-0009` when it no longer
   * waits, `NRY-0004` when there is no such interaction.
   */
  async closeInteraction(interactionId: string, reason: CloseReason): Promise<string> {
    checkId('interactionId', interactionId);
    const task = await this.#taskOf(interactionId);
    return this.send(closeCommand(interactionId, reason, task));
  }

  /**
   * Sets, moves or clears (neither time given) a pending interaction's deadline;
   * only the runtime may. Resolves to `rescheduled`; `NRY-0023` when it no longer
   * waits or the deadline is past or too far, `NRY-0022` on a server without
   * schedules.
   */
  async setDeadline(interactionId: string, expiry: Expiry): Promise<string> {
    checkId('interactionId', interactionId);
    const task = await this.#taskOf(interactionId);
    return this.send(deadlineCommand(interactionId, expiry, task, `chg-${randomUUID().replaceAll('-', '')}`));
  }

  /**
   * Changes who may answer a pending interaction (README "Assignees"):
   * `assignees`, or `undefined` for anyone of the organisation; only the runtime
   * may. Each change is one `interaction-reassigned` event and one
   * `assignees-changed` audit record. `changeId` names the change (a new one per
   * call by default), so a retry of this call is published once. Resolves to
   * `reassigned`, or `unchanged` when it already has these assignees; `NRY-0001`
   * when they are out of bounds (or do not fit beside an escalation still to
   * come), `NRY-0021` when it no longer waits, `NRY-0004` when there is no such
   * interaction.
   */
  async reassign(interactionId: string, assignees: Assignees | undefined, changeId?: string): Promise<string> {
    checkId('interactionId', interactionId);
    const change = changeId ?? `chg-${randomUUID().replaceAll('-', '')}`;
    const task = await this.#taskOf(interactionId);
    return this.send(reassignCommand(interactionId, change, assignees, task));
  }

  /**
   * The tool executor reports a released call's result ({@link toolOk} or
   * {@link toolError}); it becomes that call's `tool-call-finished`. Resolves
   * to `finished`.
   */
  async reportToolResult(effectId: string, result: ToolResult): Promise<string> {
    checkId('interactionId', effectId);
    const task = await this.#taskOf(effectId);
    return this.send(toolResultCommand(effectId, result, task));
  }

  /** A turn started on a lane without a person's message (the lane is busy). */
  async startTurn(session: string, lane: string, turnId: string): Promise<string> {
    return this.send(turnCommand('turn-start', session, lane, turnId));
  }

  /** The running turn on a lane ended; the next queued message's turn starts. */
  async finishTurn(session: string, lane: string, turnId: string): Promise<string> {
    return this.send(turnCommand('turn-finish', session, lane, turnId));
  }

  /**
   * Waits for the decision on the approval `effectId` of `task`, read from the
   * task's events (from the start of the stream unless `after` is given, so a
   * decision made while this process was down is found): `approved` with the
   * `arguments` to run (the person's edit when `edited`) on `tool-call-released`;
   * not approved, with the person's `reason`, on a denial; not approved, with
   * `closed`, when the interaction closed (or expired) undecided.
   *
   * Throws {@link OutcomeTimeoutError} when no decision comes within `timeoutMs`
   * (default: wait for ever), and the signal's reason when `signal` aborts.
   */
  async waitForDecision(task: string, effectId: string, options: { after?: number; timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Decision> {
    checkId('interactionId', effectId);
    const controller = new AbortController();
    const stop = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', stop, { once: true });
    let timedOut = false;
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, options.timeoutMs);
    try {
      const events = await this.follow({
        task, ...(options.after === undefined ? { fromStart: true } : { after: options.after }), signal: controller.signal,
      });
      for await (const f of events) {
        const decision = decisionOf(f, effectId);
        if (decision) return decision;
      }
      if (timedOut) throw new OutcomeTimeoutError(`no decision on ${effectId} within ${options.timeoutMs} ms`);
      throw options.signal?.reason ?? new OutcomeTimeoutError(`stopped waiting for a decision on ${effectId}`);
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', stop);
    }
  }

  // -- events ------------------------------------------------------------------------

  #manager(): Promise<JetStreamManager> {
    if (!this.#jsm) {
      this.#jsm = jetstreamManager(this.#nc, { checkAPI: false });
      this.#jsm.catch(() => { this.#jsm = undefined; });
    }
    return this.#jsm;
  }

  /** The events stream's last sequence (0 when empty). */
  async lastEventSequence(): Promise<number> {
    const jsm = await this.#manager();
    const info = await jsm.streams.info(`${this.#name}_EVENTS`);
    return info.state.last_seq;
  }

  /**
   * Follows this organisation's events on `HP_EVENTS` (filter
   * `hp.evt.<org>.<task|*>.<name|*>`), in stream order, each once.
   *
   * Starts after sequence `after` when given, else from the first retained event
   * with `fromStart`, else with events stored from now on. The consumer is a
   * named pull consumer without acks (what an organisation's own NATS user may
   * create); when it fails or NATS reconnects, a new one starts after the last
   * sequence delivered, so nothing repeats and nothing is skipped. The iterator
   * ends only when the loop breaks or `signal` aborts.
   *
   * The start is pinned when the returned promise resolves, so an event stored
   * after that is delivered even when iterating begins later.
   */
  async follow(options: FollowOptions = {}): Promise<AsyncIterable<Followed>> {
    const org = wire.subjectToken(this.org);
    const task = options.task === undefined ? '*' : wire.subjectToken(options.task);
    const subject = `${this.#prefix}.evt.${org}.${task}.${options.name ?? '*'}`;
    let next: number;
    if (options.after !== undefined) next = Math.trunc(options.after) + 1;
    else if (options.fromStart) next = 1;
    else next = (await this.lastEventSequence()) + 1;
    const batch = options.batch ?? 64;
    const signal = options.signal;
    return { [Symbol.asyncIterator]: () => this.#follow(subject, next, batch, signal) };
  }

  async *#follow(subject: string, start: number, batch: number, signal: AbortSignal | undefined): AsyncGenerator<Followed> {
    const stream = `${this.#name}_EVENTS`;
    let next = start;
    const decoder = new TextDecoder();
    while (!signal?.aborted) {
      const name = randomUUID().replaceAll('-', '');
      let consumer;
      try {
        const jsm = await this.#manager();
        await jsm.consumers.add(stream, {
          name,
          filter_subject: subject,
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: Math.max(1, next),
          ack_policy: AckPolicy.None,
          inactive_threshold: nanos(30_000),
          mem_storage: true,
          num_replicas: 1,
        });
        consumer = await this.#js.consumers.get(stream, name);
      } catch {
        if (this.#nc.isClosed()) return;
        await sleep(500);
        continue;
      }
      let delivered = 0;
      const reconnects = this.#reconnects;
      for (;;) {
        if (signal?.aborted) return;
        let gap = false;
        let got = 0;
        try {
          const msgs = await consumer.fetch({ max_messages: batch, expires: 1000 });
          const onAbort = () => msgs.stop();
          signal?.addEventListener('abort', onAbort, { once: true });
          try {
            for await (const m of msgs) {
              got++;
              // A consumer sequence that skips means a lost delivery: start a new
              // consumer after the last event delivered.
              if (m.info.deliverySequence !== delivered + 1) {
                gap = true;
                break;
              }
              delivered++;
              const seq = m.info.streamSequence;
              if (seq < next) continue; // already delivered by an earlier consumer
              next = seq + 1;
              let event: unknown;
              try {
                event = JSON.parse(decoder.decode(m.data));
              } catch {
                event = undefined;
              }
              if (typeof event !== 'object' || event === null || Array.isArray(event)) {
                // Not a CloudEvent Holdpoint wrote: skipped, never fatal.
                process.emitWarning(`holdpoint: skipping an undecodable event at sequence ${seq} on ${m.subject}`);
                continue;
              }
              yield { sequence: seq, subject: m.subject, name: m.subject.slice(m.subject.lastIndexOf('.') + 1), event: event as Followed['event'] };
            }
          } finally {
            signal?.removeEventListener('abort', onAbort);
          }
        } catch {
          if (this.#nc.isClosed()) return;
          await sleep(200);
          break;
        }
        if (gap) break;
        // A consumer kept in memory is gone after the server restarted: after a
        // reconnect, start a new one.
        if (got === 0 && this.#reconnects !== reconnects) break;
        if (this.#nc.isClosed()) return;
      }
    }
  }
}


