/**
 * Holdpoint's runtime side for Node 20+ (`@holdpoint/sdk/runtime`), on the
 * official NATS JavaScript client: {@link Runtime} opens and closes sessions,
 * holds calls for approval, asks the user, requests connections, closes
 * interactions, sets deadlines, reports tool results, runs turns and follows
 * the events; {@link wire} computes command ids, subjects and canonical JSON
 * exactly as the Rust domain does (`schemas/command-vectors.json` pins them).
 *
 * Kept apart from the package's main entry, which also runs in browsers.
 *
 * @packageDocumentation
 */
export {
  type Assignees,
  type CloseReason,
  type Decision,
  decisionOf,
  type Expiry,
  type FollowOptions,
  type Followed,
  MAX_ID_LEN,
  type OnExpiry,
  type Outcome,
  PROVISIONAL_CODES,
  type Placement,
  type Question,
  REPLY_HEADER,
  Runtime,
  type RuntimeOptions,
  type SessionMode,
  type ToolResult,
  approvalRequest,
  checkId,
  closeCommand,
  connectionRequest,
  deadlineCommand,
  openCommand,
  placement,
  questionRequest,
  reassignCommand,
  sessionCommand,
  toolError,
  toolOk,
  toolResultCommand,
  turnCommand,
} from './runtime.js';
export { AgentManifest } from './manifest.js';
export { ConnectionsDisabledError, InvalidIdError, ManifestError, OutcomeTimeoutError, RuntimeError } from './runtime-errors.js';
export * as wire from './wire.js';
export {
  type CommandEnvelope,
  type CommandType,
  type JsonNumberText,
  type JsonValue,
  argumentsDigest,
  canonicalJson,
  commandId,
  commandSubject,
  subjectToken,
} from './wire.js';
export * from './index.js';
