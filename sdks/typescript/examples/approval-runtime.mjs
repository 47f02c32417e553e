// A runtime that holds one tool call for a person's approval, runs it once when
// released, and reports its result. Run it against `holdpoint up`:
//   node examples/approval-runtime.mjs nats://127.0.0.1:4290 acme
// then approve the call it prints (`holdpoint approve <effect>`, the inbox, REST).
import { randomUUID } from 'node:crypto';

import { Runtime, placement, toolOk } from '@holdpoint/sdk/runtime';

/** The tool itself: runs once, with the arguments the person approved. */
function createPullRequest({ title }) {
  console.log(`ran create_pull_request (${title})`);
  return { url: 'https://github.example/acme/app/pull/42', title };
}

const [natsUrl = 'nats://127.0.0.1:4290', org = 'acme'] = process.argv.slice(2);
const rt = await Runtime.connect(natsUrl, org);
try {
  const run = randomUUID().slice(0, 8);
  const [session, task, effect, call] = [`ts-${run}`, `task-${run}`, `eff_${run}`, `call-${run}`];
  await rt.openSession(session);
  const events = await rt.follow({ task }); // from here on, nothing of this task is missed
  await rt.holdForApproval(placement({ session, lane: 'main', taskId: task, contextId: 'ctx-1' }), {
    effectId: effect, callId: call, server: 'github', tool: 'create_pull_request',
    arguments: { title: 'Fix the build' }, reason: 'writes to a repository',
  });
  console.log(`held ${effect}: approve it with \`holdpoint approve ${effect}\``);
  for await (const followed of events) {
    const data = followed.event.data;
    console.log(`#${followed.sequence} ${followed.name}`);
    if (followed.name === 'tool-call-released') {
      // Released exactly as held: run it once (the effect id is its key).
      await rt.reportToolResult(effect, toolOk(createPullRequest(data.arguments)));
    } else if (followed.name === 'tool-call-finished') {
      console.log(`finished: ${JSON.stringify(data.result)}`);
      break;
    }
  }
} finally {
  await rt.close();
}
