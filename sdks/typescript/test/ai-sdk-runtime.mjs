// A Vercel AI SDK runtime as a process of its own, for ai-sdk.test.mjs's restart
// test (not a test file: run with no arguments, as `node --test test/` does, it
// does nothing): `generateText` with a `needsApproval` tool and the AI SDK's
// MockLanguageModelV3 (no network, no API key), the approval held in Holdpoint
// through AiSdkApprovals, the tool wrapped by `reporting`. At the approval it
// saves the conversation and the step's approval requests to a file, as a
// runner that can die saves them.
//
//   node ai-sdk-runtime.mjs NATS_URL SESSION TASK CALL_ID STATE RUNS [--stop-in-tool before|after]
//
// Started with no STATE file, it runs to the approval, holds it, saves the state
// and prints `held <effect>`, then waits for the decision; started with one (a
// restart) it prints `restarted`, holds the saved requests again (a replay) and
// waits. Then it calls the model again with the decision: the AI SDK runs the
// approved tool, whose side effect appends a line to the file RUNS.
// `--stop-in-tool before` makes the tool print `executing` and wait for ever
// before the side effect; `after` makes it print `reported` and wait for ever
// once it ran and its result was reported to Holdpoint (the test kills it -9
// there). At the end it prints `done <text>`.
import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

import { generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

import { AiSdkApprovals } from '../dist/ai-sdk.js';
import { Runtime, placement } from '../dist/node.js';

const args = process.argv.slice(2);
if (args.length >= 6) await main(args);

function model(callId) {
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last.role !== 'tool') {
        return {
          content: [{ type: 'tool-call', toolCallId: callId, toolName: 'createPullRequest', input: JSON.stringify({ title: 'Fix the build' }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
        };
      }
      const output = last.content.find((p) => p.type === 'tool-result')?.output;
      const text = output?.type === 'execution-denied' ? `Not done: ${output.reason ?? 'denied'}` : `Done: ${JSON.stringify(output?.value)}`;
      return { content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

async function main([natsUrl, session, task, callId, state, runs, flag, stopInTool]) {
  const stop = flag === '--stop-in-tool' ? stopInTool : undefined;
  const forever = () => new Promise(() => setInterval(() => {}, 1 << 30));
  const rt = await Runtime.connect(natsUrl, 'acme');
  try {
    const at = placement({ session, lane: 'main', taskId: task, contextId: 'ctx-1' });
    const approvals = new AiSdkApprovals(rt, at, { reason: () => 'writes to a repository', timeoutMs: 60000 });
    const reported = approvals.reporting({
      createPullRequest: tool({
        description: 'Opens a pull request',
        inputSchema: z.object({ title: z.string() }),
        needsApproval: true,
        execute: async ({ title }) => {
          if (stop === 'before') {
            console.log('executing');
            await forever(); // killed -9 here by the test
          }
          appendFileSync(runs, `createPullRequest ${title}\n`); // the side effect, counted by the test
          return { url: 'https://github.example/acme/app/pull/42' };
        },
      }),
    });
    const execute = reported.createPullRequest.execute;
    const tools = {
      createPullRequest: {
        ...reported.createPullRequest,
        execute: async (input, options) => {
          const out = await execute(input, options); // ran, and its result reported
          if (stop === 'after') {
            console.log('reported');
            await forever(); // killed -9 here by the test
          }
          return out;
        },
      },
    };
    let messages;
    let requests;
    if (existsSync(state)) {
      console.log('restarted');
      ({ messages, requests } = JSON.parse(readFileSync(state, 'utf8')));
    } else {
      await rt.openSession(session);
      messages = [{ role: 'user', content: 'Open a pull request that fixes the build' }];
      const first = await generateText({ model: model(callId), tools, messages });
      messages.push(...first.response.messages);
      requests = first.content.filter((p) => p.type === 'tool-approval-request');
    }
    const held = await approvals.hold(requests);
    if (!existsSync(state)) {
      writeFileSync(`${state}.tmp`, JSON.stringify({ messages, requests }));
      renameSync(`${state}.tmp`, state);
      for (const h of held) console.log(`held ${h.effectId}`);
    }
    messages.push(await approvals.decide(held));
    const result = await generateText({ model: model(callId), tools, messages });
    console.log(`done ${result.text}`);
  } finally {
    await rt.close();
  }
}
