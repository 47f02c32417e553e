/**
 * The runtime wire as the Rust domain computes it: canonical JSON, SHA-256
 * digests, subject tokens, command ids and command subjects.
 *
 * Every function here gives the same text as `services/domain` (`digest.rs`,
 * `ids.rs`, `command.rs`); `schemas/command-vectors.json`, generated from the
 * Rust code, pins them and `test/vectors.test.mjs` checks every vector.
 *
 * Numbers: a JSON number is a JavaScript `number`, a `bigint` (an integer of any
 * size, written as its digits), or a {@link JsonNumberText} (a number kept as the
 * text it was read from, as `lossless-json`'s `LosslessNumber` keeps it). A
 * `number` is written as `JSON.stringify` writes it and then read as Rust reads
 * that text: a safe integer is an integer (`2.0` is `2` in JavaScript), anything
 * else an `f64` in serde_json's shortest form (`1e21` gives `1e+21`).
 *
 * @module
 */
/// <reference types="node" />
import { createHash } from 'node:crypto';

/** The subjects' prefix of the default topology (`hp.cmd.…`, `hp.evt.…`). */
export const DEFAULT_SUBJECT_PREFIX = 'hp';

/**
 * A JSON number kept as its text (`"12345678901234567890123"`, `"1.50"`): what
 * `lossless-json`'s `LosslessNumber` is. Written and digested from that text, as
 * the Rust domain (serde_json with `arbitrary_precision`) reads it.
 */
export interface JsonNumberText {
  readonly isLosslessNumber: true;
  /** The number's JSON text. */
  readonly value: string;
}

/** Any JSON value this SDK writes: `bigint` and {@link JsonNumberText} for numbers a `number` cannot hold. */
export type JsonValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | JsonNumberText
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue | undefined };

/** The command envelope published on NATS: `{org, command}`, `command` `type`-tagged as in `schemas/command.json`. */
export interface CommandEnvelope {
  org: string;
  command: { type: CommandType; [field: string]: unknown };
}

/** The runtime-side command types (the subject's verb). */
export type CommandType =
  | 'session-open'
  | 'session-close'
  | 'session-end'
  | 'open'
  | 'close'
  | 'answer'
  | 'tool-result'
  | 'deadline'
  | 'reassign'
  | 'expire'
  | 'message'
  | 'turn-start'
  | 'turn-finish';

const VERBS: ReadonlySet<string> = new Set<CommandType>([
  'session-open', 'session-close', 'session-end', 'open', 'close', 'answer',
  'tool-result', 'deadline', 'reassign', 'expire', 'message', 'turn-start', 'turn-finish',
]);

/** Lower-case hex SHA-256 of `parts`, each followed by a NUL byte (UTF-8). */
export function digest(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) {
    h.update(p, 'utf8');
    h.update(Buffer.from([0]));
  }
  return h.digest('hex');
}

/**
 * `f` (finite) as serde_json writes an `f64`: the shortest digits that read back
 * as `f`, in fixed notation for a decimal exponent in -5..=15 (`100.0`,
 * `0.00001`), else `d.ddde±x` (`1e-7`, `1.5e+300`); `-0.0` for negative zero.
 */
function formatFloat(f: number): string {
  if (f === 0) return Object.is(f, -0) ? '-0.0' : '0.0';
  const sign = f < 0 ? '-' : '';
  // toExponential() without a digit count gives the shortest round-trip digits.
  const [mantissa = '', expText = '0'] = Math.abs(f).toExponential().split('e');
  const point = Number.parseInt(expText, 10);
  const digits = mantissa.replace('.', '').replace(/0+$/, '') || '0';
  if (point >= -5 && point <= 15) {
    if (point >= digits.length - 1) return `${sign}${digits}${'0'.repeat(point - digits.length + 1)}.0`;
    if (point >= 0) return `${sign}${digits.slice(0, point + 1)}.${digits.slice(point + 1)}`;
    return `${sign}0.${'0'.repeat(-point - 1)}${digits}`;
  }
  const head = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
  return `${sign}${head}e${point >= 0 ? '+' : '-'}${Math.abs(point)}`;
}

const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

/**
 * A number's JSON text as `canonical_number` writes it: an integer (no `.`, `e`
 * or `E`; not `-0`) as its digits, any size; anything else as the `f64` it
 * reads as, in serde_json's shortest form (`1.50` and `15e-1` give `1.5`, `1e2`
 * gives `100.0`, `-0` gives `-0.0`); a float beyond the `f64` range as written.
 * Throws `TypeError` for text that is not a JSON number.
 */
export function canonicalNumberText(text: string): string {
  if (!JSON_NUMBER.test(text)) throw new TypeError(`${JSON.stringify(text)} is not a JSON number`);
  if (!/[.eE]/.test(text) && text !== '-0') return text;
  const f = Number(text);
  return Number.isFinite(f) ? formatFloat(f) : text;
}

/** The JSON text a `number` is written as (`JSON.stringify`'s); `TypeError` when not finite. */
function numberText(n: number): string {
  if (!Number.isFinite(n)) throw new TypeError(`${n} is not a JSON number`);
  return Number.isSafeInteger(n) ? String(n === 0 ? 0 : n) : formatFloat(n);
}

/** A number as {@link canonicalJson} writes it. */
export function canonicalNumber(n: number | bigint | JsonNumberText): string {
  if (typeof n === 'bigint') return n.toString();
  if (typeof n === 'number') return numberText(n);
  return canonicalNumberText(n.value);
}

function isNumberText(v: unknown): v is JsonNumberText {
  return typeof v === 'object' && v !== null && (v as { isLosslessNumber?: unknown }).isLosslessNumber === true
    && typeof (v as { value?: unknown }).value === 'string';
}

const utf8 = new TextEncoder();

function byUtf8(a: string, b: string): number {
  return Buffer.compare(utf8.encode(a), utf8.encode(b));
}

function write(v: unknown, out: string[], depth: number): void {
  if (depth > 128) throw new TypeError('JSON nested deeper than 128 levels');
  if (v === null) out.push('null');
  else if (v === true) out.push('true');
  else if (v === false) out.push('false');
  else if (typeof v === 'string') out.push(JSON.stringify(v));
  else if (typeof v === 'number' || typeof v === 'bigint') out.push(canonicalNumber(v));
  else if (isNumberText(v)) out.push(canonicalNumber(v));
  else if (Array.isArray(v)) {
    out.push('[');
    v.forEach((item, i) => {
      if (i) out.push(',');
      // JSON.stringify writes a hole or undefined in an array as null.
      write(item === undefined ? null : item, out, depth + 1);
    });
    out.push(']');
  } else if (typeof v === 'object' && Object.getPrototypeOf(v) !== null && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    write((v as { toJSON(): unknown }).toJSON(), out, depth + 1);
  } else if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    entries.sort(([a], [b]) => byUtf8(a, b));
    out.push('{');
    entries.forEach(([k, x], i) => {
      if (i) out.push(',');
      out.push(JSON.stringify(k), ':');
      write(x, out, depth + 1);
    });
    out.push('}');
  } else {
    throw new TypeError(`${typeof v} is not JSON`);
  }
}

/**
 * `v` serialized with object keys sorted by their UTF-8 bytes, numbers in
 * {@link canonicalNumber}'s form and no whitespace; strings escaped as
 * serde_json escapes them (non-ASCII kept). Object fields that are `undefined`
 * are left out, as `JSON.stringify` leaves them. Throws `TypeError` for what is
 * not JSON (a function, a symbol, a non-finite number).
 *
 * The runtime publishes commands in this form, so the bytes it digests are the
 * bytes the worker reads.
 */
export function canonicalJson(v: unknown): string {
  const out: string[] = [];
  write(v, out, 0);
  return out.join('');
}

/** Hex SHA-256 of the canonical JSON of a call's arguments: the `call.argumentsDigest` an approval binds to. */
export function argumentsDigest(args: unknown): string {
  return digest(canonicalJson(args));
}

const PLAIN_TOKEN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/**
 * An id as one NATS subject token: as it is when it matches
 * `[A-Za-z0-9][A-Za-z0-9_-]*`, else `_` and its UTF-8 bytes in unpadded base64url.
 */
export function subjectToken(id: string): string {
  if (PLAIN_TOKEN.test(id)) return id;
  return `_${Buffer.from(id, 'utf8').toString('base64url')}`;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Reads an RFC 3339 timestamp (any number of fractional digits, any offset) into
 * milliseconds since the epoch (sub-milliseconds cut); `RangeError` otherwise.
 */
export function parseTimestamp(text: string): number {
  const m = RFC3339.exec(text);
  if (!m) throw new RangeError(`${JSON.stringify(text)} is not an RFC 3339 timestamp`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((g) => Number.parseInt(g ?? '0', 10)) as [
    number, number, number, number, number, number,
  ];
  const millis = Number.parseInt((m[7] ?? '0').slice(0, 3).padEnd(3, '0'), 10);
  let offsetMinutes = 0;
  if (!m[8]) {
    offsetMinutes = Number.parseInt(m[10] ?? '0', 10) * 60 + Number.parseInt(m[11] ?? '0', 10);
    if (m[9] === '-') offsetMinutes = -offsetMinutes;
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  return utc - offsetMinutes * 60_000;
}

/**
 * An instant in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ`: a `Date`, milliseconds since
 * the epoch, or an RFC 3339 text (re-written in UTC). `RangeError` for an
 * invalid one.
 */
export function formatTimestamp(t: Date | number | string): string {
  const ms = typeof t === 'string' ? parseTimestamp(t) : typeof t === 'number' ? t : t.getTime();
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) throw new RangeError('not a valid instant');
  return d.toISOString();
}

/** The subject verb of a command envelope (its `command.type`); `TypeError` for an unknown one. */
export function verb(envelope: CommandEnvelope): CommandType {
  const t = envelope.command.type;
  if (typeof t !== 'string' || !VERBS.has(t)) throw new TypeError(`unknown command type ${JSON.stringify(t)}`);
  return t;
}

function str(c: Record<string, unknown>, field: string): string {
  const v = c[field];
  if (typeof v !== 'string') throw new TypeError(`command.${field} must be a string`);
  return v;
}

function timestampText(v: unknown): string {
  if (v === undefined || v === null) return '';
  return formatTimestamp(v as string | number | Date);
}

/**
 * The deterministic command id, sent as `Nats-Msg-Id`: `cmd-` and the first 40
 * hex digits of the digest of the command's recipe (`CommandEnvelope::command_id`
 * in `services/domain/src/command.rs`). `TypeError` when a field the recipe
 * reads is missing.
 */
export function commandId(envelope: CommandEnvelope): string {
  const org = envelope.org;
  const c = envelope.command as Record<string, unknown>;
  const t = verb(envelope);
  let d: string;
  switch (t) {
    case 'session-open':
      d = digest(org, t, str(c, 'session'), str(c, 'mode'));
      break;
    case 'session-close':
    case 'session-end':
      d = digest(org, t, str(c, 'session'));
      break;
    case 'open': {
      const { type: _type, ...content } = c;
      d = digest(org, t, str(c, 'interactionId'), canonicalJson(content));
      break;
    }
    case 'close':
      d = digest(org, t, str(c, 'interactionId'), str(c, 'reason'));
      break;
    case 'answer':
      d = digest(org, t, typeof c.taskId === 'string' ? c.taskId : '', str(c, 'interactionId'), str(c, 'key'), str(c, 'by'));
      break;
    case 'tool-result':
      // The result is part of the id (another result is refused, not deduplicated).
      d = digest(org, t, str(c, 'interactionId'), canonicalJson(c.result as JsonValue));
      break;
    case 'deadline': {
      const expiresIn = c.expiresIn;
      const parts = [str(c, 'interactionId'), timestampText(c.expiresAt),
        expiresIn === undefined || expiresIn === null ? '' : String(Math.trunc(Number(expiresIn)))];
      // Appended only when given, as the Rust client does.
      if (c.changeId !== undefined && c.changeId !== null) parts.push(str(c, 'changeId'));
      d = digest(org, t, ...parts);
      break;
    }
    case 'reassign':
      // One id per change: a retry is a replay, a later change back is new.
      d = digest(org, t, str(c, 'interactionId'), str(c, 'changeId'));
      break;
    case 'expire':
      d = digest(org, c.stage === 'warn' ? 'expiring' : 'expire', str(c, 'interactionId'), timestampText(c.expiresAt));
      break;
    case 'message':
      d = digest(org, t, str(c, 'session'), str(c, 'lane'), str(c, 'messageId'));
      break;
    default: // turn-start, turn-finish
      d = digest(org, t, str(c, 'session'), str(c, 'lane'), str(c, 'turnId'));
  }
  return `cmd-${d.slice(0, 40)}`;
}

/** The subject token that picks the command's partition: its task, else its interaction, else its session (`_` when none). */
export function partitionKey(envelope: CommandEnvelope): string {
  const c = envelope.command as Record<string, unknown>;
  for (const field of ['taskId', 'interactionId', 'session']) {
    const v = c[field];
    if (typeof v === 'string') return subjectToken(v);
  }
  return '_';
}

/** `<prefix>.cmd.<org>.<key>.<verb>`, the subject a command is published on. */
export function commandSubject(envelope: CommandEnvelope, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${prefix}.cmd.${subjectToken(envelope.org)}.${partitionKey(envelope)}.${verb(envelope)}`;
}
