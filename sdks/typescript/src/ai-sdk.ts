/**
 * Holdpoint for the Vercel AI SDK (`ai` 6, `@holdpoint/sdk/ai-sdk`): a tool with
 * `needsApproval` is held in Holdpoint, a person decides (REST, A2A, the inbox),
 * and the run continues with that decision.
 *
 * The AI SDK ends a `generateText`/`streamText` step with
 * `tool-approval-request` parts when a tool needs approval. {@link AiSdkApprovals}
 * holds each one in Holdpoint ({@link AiSdkApprovals.hold}), waits for the
 * person ({@link AiSdkApprovals.decide}) and gives back the `tool` message of
 * `tool-approval-response` parts to append before calling the model again: an
 * approval runs the tool, a denial reaches the model as `execution-denied` with
 * the person's reason. {@link AiSdkApprovals.reporting} wraps the tools so the
 * result of a released call is reported to Holdpoint (its one
 * `tool-call-finished`), and a call whose result Holdpoint holds is not run
 * again.
 *
 * ```ts
 * const approvals = new AiSdkApprovals(rt, at);
 * const tools = approvals.reporting({ createPullRequest: tool({ ..., needsApproval: true }) });
 * let result = await generateText({ model, tools, messages });
 * messages.push(...result.response.messages);
 * const held = await approvals.hold(result.content);
 * if (held.length) messages.push(await approvals.decide(held));
 * result = await generateText({ model, tools, messages });
 * ```
 *
 * The effect id of a held call is derived from the session and the AI SDK's
 * `toolCallId`, so holding the same request again (a retry, a restarted
 * process) is the same interaction, decided once.
 *
 * @packageDocumentation
 */
import type { ToolApprovalResponse, ToolSet } from 'ai';

import { NotFoundError } from './errors.js';
import { type Decision, type Placement, Runtime, type ToolResult, checkId, placement, toolError, toolOk } from './runtime.js';
import type { JsonValue } from './wire.js';
import { digest } from './wire.js';

/** A `tool-approval-request` part of a step's `content`, as the AI SDK gives it. */
export interface ApprovalRequestPart {
  type: 'tool-approval-request';
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** One call held in Holdpoint for an AI SDK approval request. */
export interface HeldToolCall {
  /** The AI SDK's approval id (the `tool-approval-response` names it). */
  readonly approvalId: string;
  /** The AI SDK's tool call id. */
  readonly toolCallId: string;
  readonly toolName: string;
  readonly input: unknown;
  /** Holdpoint's effect id (the interaction). */
  readonly effectId: string;
  /** Holdpoint's call id. */
  readonly callId: string;
}

/** Options of {@link AiSdkApprovals}. */
export interface AiSdkApprovalsOptions {
  /** The `server` a held call names (default `ai-sdk`). */
  server?: string;
  /** Why a call is held, shown to the person (default: none). */
  reason?: (toolName: string, input: unknown) => string | undefined;
  /** How long {@link AiSdkApprovals.decide} waits, in milliseconds (default: for ever). */
  timeoutMs?: number;
}

/** The `tool` message of approval responses to append to the conversation. */
export interface ApprovalMessage {
  role: 'tool';
  content: ToolApprovalResponse[];
}

/** Holds the AI SDK's tool approval requests in Holdpoint and answers them with the person's decisions. */
export class AiSdkApprovals {
  readonly #rt: Runtime;
  readonly #at: Placement;
  readonly #options: AiSdkApprovalsOptions;

  /** For a runtime `rt` and where the agent runs (`at`: session, lane, task, context). */
  constructor(rt: Runtime, at: Placement, options: AiSdkApprovalsOptions = {}) {
    this.#rt = rt;
    this.#at = placement(at);
    this.#options = options;
  }

  /** The effect id and call id Holdpoint knows the AI SDK call `toolCallId` by (stable for this session). */
  idsOf(toolCallId: string): { effectId: string; callId: string } {
    const d = digest(this.#at.session, toolCallId).slice(0, 40);
    let callId = toolCallId;
    try {
      checkId('callId', toolCallId);
    } catch {
      callId = `call_${d}`;
    }
    return { effectId: `aisdk_${d}`, callId };
  }

  /**
   * Holds every `tool-approval-request` part of `content` (a step's
   * `result.content`, or any parts) in Holdpoint, as an approval of the call's
   * tool and input. Parts of other types are ignored. Holding the same request
   * again is a replay. Resolves to the held calls (empty when nothing waits).
   *
   * @throws the catalog's errors for a refusal (e.g. `SessionNotFoundError`), or `OutcomeTimeoutError` (retry safe).
   */
  async hold(content: ReadonlyArray<{ type: string }>): Promise<HeldToolCall[]> {
    const held: HeldToolCall[] = [];
    for (const part of content) {
      if (part.type !== 'tool-approval-request') continue;
      const { approvalId, toolCall } = part as ApprovalRequestPart;
      const { effectId, callId } = this.idsOf(toolCall.toolCallId);
      const reason = this.#options.reason?.(toolCall.toolName, toolCall.input);
      await this.#rt.holdForApproval(this.#at, {
        effectId,
        callId,
        server: this.#options.server ?? 'ai-sdk',
        tool: toolCall.toolName,
        arguments: toolCall.input ?? null,
        ...(reason === undefined ? {} : { reason }),
      });
      held.push({ approvalId, toolCallId: toolCall.toolCallId, toolName: toolCall.toolName, input: toolCall.input, effectId, callId });
    }
    return held;
  }

  /** Waits for the person's decision on one held call. */
  async decision(held: HeldToolCall, options: { signal?: AbortSignal } = {}): Promise<Decision> {
    return this.#rt.waitForDecision(this.#at.taskId, held.effectId, {
      ...(this.#options.timeoutMs === undefined ? {} : { timeoutMs: this.#options.timeoutMs }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  /**
   * Waits for the decision on each held call and resolves to the `tool` message
   * of `tool-approval-response` parts to append: approved, or denied with the
   * person's reason (or why it closed undecided, e.g. `expired`).
   *
   * @throws `OutcomeTimeoutError` after `timeoutMs`; the signal's reason when it aborts.
   */
  async decide(held: readonly HeldToolCall[], options: { signal?: AbortSignal } = {}): Promise<ApprovalMessage> {
    const decisions = await Promise.all(held.map((h) => this.decision(h, options)));
    return {
      role: 'tool',
      content: held.map((h, i) => {
        const d = decisions[i] as Decision;
        const reason = d.approved ? undefined : d.reason ?? (d.closed ? `not approved: the request was ${d.closed}` : undefined);
        return { type: 'tool-approval-response', approvalId: h.approvalId, approved: d.approved, ...(reason === undefined ? {} : { reason }) };
      }),
    };
  }

  /**
   * `tools` with each `needsApproval` tool's `execute` wrapped: its result is
   * reported to Holdpoint as the call's result (`tool-call-finished`; an error
   * thrown becomes `tool.failed`, and is thrown on), and a call whose result
   * Holdpoint already holds is not run again: its recorded output is returned
   * (a recorded error is thrown), so a runner restarted after executing does not
   * run the call twice. A call that was not held (a `needsApproval` function that said
   * no) runs as usual. Tools without `needsApproval` are left as they are.
   */
  reporting<T extends ToolSet>(tools: T): T {
    const done = new Map<string, unknown>();
    const out: Record<string, unknown> = {};
    for (const [name, t] of Object.entries(tools)) {
      const execute = (t as { execute?: (input: unknown, options: { toolCallId: string }) => unknown }).execute;
      if (!t.needsApproval || typeof execute !== 'function') {
        out[name] = t;
        continue;
      }
      out[name] = {
        ...t,
        execute: async (input: unknown, options: { toolCallId: string }) => {
          const { effectId } = this.idsOf(options.toolCallId);
          if (done.has(effectId)) return done.get(effectId);
          // Ran before (this runner, or one restarted after executing): not again.
          const result = (await this.#rt.record(effectId))?.result as
            | { status?: string; output?: unknown; code?: string; message?: string }
            | undefined;
          if (result?.status === 'ok') return result.output;
          if (result?.status === 'error') throw new Error(`${result.code ?? 'tool.failed'}: ${result.message ?? ''}`);
          let output: unknown;
          try {
            output = await execute.call(t, input, options);
          } catch (error) {
            await this.#report(effectId, toolError('tool.failed', error instanceof Error ? error.message : String(error)));
            throw error;
          }
          await this.#report(effectId, toolOk((output ?? null) as JsonValue));
          done.set(effectId, output);
          return output;
        },
      };
    }
    return out as T;
  }

  /** Reports a result; a call that was never held (a `needsApproval` function that said no) is not Holdpoint's. */
  async #report(effectId: string, result: ToolResult): Promise<void> {
    try {
      await this.#rt.reportToolResult(effectId, result);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
}
