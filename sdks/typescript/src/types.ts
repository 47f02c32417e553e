/**
 * Names for the wire types, taken from the generated OpenAPI types
 * (`src/generated/openapi.ts`, made from `schemas/openapi.json` by
 * `openapi-typescript`), plus the shapes the schema leaves open (`detail`).
 *
 * @module
 */
import type { components, operations } from './generated/openapi.js';

type Schemas = components['schemas'];

/** `GET /v1/interactions/{id}`: one interaction as a person sees it. */
export type InteractionView = Schemas['InteractionView'];
/** `GET /v1/interactions`: one page. */
export type InteractionPage = Schemas['Page'];
/** `approval`, `question` or `connection`. */
export type Kind = Schemas['Kind'];
/** `pending`, `resolved`, `finished` or `closed`. */
export type InteractionState = Schemas['State'];
/** One entry of the `answers` array of `POST /v1/questions/{questionId}/answer`: `options` are indices into the list as `question-asked` sent it. */
export type OptionAnswer = Schemas['OptionAnswer'];
/** A held call: server, tool, the exact arguments and their digest. */
export type HeldCall = Schemas['HeldCall'];
/**
 * How far an approval that needs several distinct people has come: `given`
 * approvals counted so far (the caller's included), `required` how many the hold
 * needs (2 to 5). What {@link HoldpointRest.approve} and `respond` resolve with
 * when the approval was counted and the call still waits (the server's `202`),
 * and a batch result's `approvals`.
 */
export type ApprovalProgress = Schemas['ApprovalProgress'];
/** The `202` body of an approval counted toward a hold that needs several people: `{interactionId, approvals}`. */
export type ApprovalCounted = Schemas['ApprovalCounted'];
/** One approval counted so far on a hold that needs several: who (`by`) and when (`at`). */
export type ApprovalGiven = Schemas['ApprovalGiven'];
/**
 * A view's `approvals` (present only for a hold that needs several people):
 * `required`, who approved so far (`given`, oldest first) and, in a person's
 * view, `byYou` (approving again is `NRY-0038`).
 */
export type ApprovalsView = Schemas['ApprovalsView'];
/** An error body: `{code, title, message}`. */
export type ErrorBody = Schemas['ErrorBody'];
/** A stable error code, `NRY-xxxx`. */
export type ErrorCode = Schemas['ErrorCode'];
/** A CloudEvents 1.0 event as Holdpoint stores and streams it (`type` decides `data`). */
export type CloudEvent = Schemas['Event'];
/** The short event names `GET /v1/events?type=` takes (`tool-call-finished`, ...). */
export type EventName = NonNullable<NonNullable<operations['streamEvents']['parameters']['query']>['type']>;

/** One question of an `ask_user` call, as the engine sent it (`detail.questions[i]`). */
export interface QuestionSpec {
  /** The question. */
  text: string;
  /** The options, in engine order: an answer's indices point into this list. */
  options: string[];
  /** Several options may be chosen. */
  multiple?: boolean;
  /** Free text may accompany (or replace) the chosen options. */
  allowText?: boolean;
}

/** `detail` of an approval: never the call's arguments (those are in `call`). */
export interface ApprovalDetail {
  server: string;
  tool: string;
  reason?: string;
}

/** `detail` of a question. */
export interface QuestionDetail {
  questions: QuestionSpec[];
}

/** `detail` of a connection: the app (at most 80 characters) and why (at most 280). */
export interface ConnectionDetail {
  app: string;
  reason: string;
}

/** Which `GET /v1/interactions` listing: one state, or `all`. */
export type ListState = InteractionState | 'all';
