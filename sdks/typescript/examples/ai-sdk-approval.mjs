// The Vercel AI SDK with Holdpoint: a tool with `needsApproval` is held in
// Holdpoint, a person decides (inbox, REST, A2A, `holdpoint approve`), and the
// run continues with the decision. Run it against `holdpoint up`:
//   node examples/ai-sdk-approval.mjs nats://127.0.0.1:4290 acme
// It uses a scripted model (the AI SDK's MockLanguageModelV3) so it runs with no
// API key; pass any AI SDK model to `run` instead.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';

import { generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

import { AiSdkApprovals } from '@holdpoint/sdk/ai-sdk';
import { Runtime, placement } from '@holdpoint/sdk/runtime';

/**
 * One agent turn: the model asks for `createPullRequest`, Holdpoint holds it,
 * and once the person decided the model is called again with the decision.
 * Resolves to the final text and what the tool did.
 */
export async function run({ model, rt, at, onHeld = () => {} }) {
  const runs = [];
  const approvals = new AiSdkApprovals(rt, at, { reason: () => 'writes to a repository' });
  const tools = approvals.reporting({
    createPullRequest: tool({
      description: 'Opens a pull request',
      inputSchema: z.object({ title: z.string() }),
      needsApproval: true,
      execute: async ({ title }) => {
        runs.push(title); // the side effect: runs once, only when approved
        return { url: 'https://github.example/acme/app/pull/42', title };
      },
    }),
  });
  const messages = [{ role: 'user', content: 'Open a pull request that fixes the build' }];
  let result = await generateText({ model, tools, messages });
  messages.push(...result.response.messages);
  const held = await approvals.hold(result.content);
  for (const h of held) onHeld(h);
  if (held.length > 0) {
    messages.push(await approvals.decide(held));
    result = await generateText({ model, tools, messages });
  }
  return { text: result.text, runs };
}

/** A scripted model: asks for the tool, then says what came back. */
export function scriptedModel() {
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last.role !== 'tool') {
        return {
          content: [{ type: 'tool-call', toolCallId: `call_${randomUUID().slice(0, 8)}`, toolName: 'createPullRequest', input: JSON.stringify({ title: 'Fix the build' }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
        };
      }
      const output = last.content.find((p) => p.type === 'tool-result')?.output;
      const text = output?.type === 'execution-denied' ? `Not done: ${output.reason ?? 'denied'}` : `Done: ${JSON.stringify(output?.value)}`;
      return { content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [natsUrl = 'nats://127.0.0.1:4290', org = 'acme'] = process.argv.slice(2);
  const rt = await Runtime.connect(natsUrl, org);
  try {
    const id = randomUUID().slice(0, 8);
    const at = placement({ session: `ai-${id}`, lane: 'main', taskId: `task-${id}`, contextId: 'ctx-1' });
    await rt.openSession(at.session);
    const { text } = await run({
      model: scriptedModel(), rt, at,
      onHeld: (h) => console.log(`held ${h.effectId}: approve it with \`holdpoint approve ${h.effectId}\``),
    });
    console.log(text);
  } finally {
    await rt.close();
  }
}
