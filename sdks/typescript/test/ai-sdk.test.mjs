// The Vercel AI SDK adapter (`@holdpoint/sdk/ai-sdk`) with the real `ai` package
// and its MockLanguageModelV3 (a scripted model: no network, no API key) against
// a real `holdpoint up`: a tool with `needsApproval` is held in Holdpoint, a
// person decides over REST, and the run continues with the decision, the tool
// running once when approved and never when denied; across a worker killed -9
// and a runtime process (test/ai-sdk-runtime.mjs) killed -9 and started again,
// one release, one execution, one tool-call-finished; and docs/integrations.md's
// example runs as pasted.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { jetstreamManager } from '@nats-io/jetstream';

import { AiSdkApprovals } from '../dist/ai-sdk.js';
import { HoldpointRest, Runtime, placement } from '../dist/node.js';
import { run, scriptedModel } from '../examples/ai-sdk-approval.mjs';
import { Holdpoint, ROOT, until } from './harness.mjs';

const ORG = 'acme';
const unique = (prefix) => `${prefix}-${randomUUID().replaceAll('-', '').slice(0, 12)}`;

async function stored(rt, task, name) {
  const jsm = await jetstreamManager(rt.connection);
  const subject = `hp.evt.${ORG}.${task}.${name}`;
  const info = await jsm.streams.info('HP_EVENTS', { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

/** The last `tool-call-finished` of `task`, read from the stream. */
async function finishedOf(rt, task) {
  const controller = new AbortController();
  const events = await rt.follow({ task, name: 'tool-call-finished', fromStart: true, signal: controller.signal });
  for await (const f of events) {
    controller.abort();
    return f.event.data;
  }
  return undefined;
}

describe('the Vercel AI SDK adapter against holdpoint up', () => {
  /** @type {Holdpoint} */
  let hp;
  let rest;
  let rt;
  before(async () => {
    hp = await new Holdpoint().up();
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'ana@acme.example') });
    rt = await Runtime.connect(hp.natsUrl, ORG);
  });
  after(async () => {
    await rt?.close();
    await hp?.close();
  });

  async function at() {
    const p = placement({ session: unique('sess'), lane: 'main', taskId: unique('task'), contextId: unique('ctx') });
    await rt.openSession(p.session);
    return p;
  }

  test('needsApproval: held in Holdpoint, approved over REST, the tool runs once, tool-call-finished once', async () => {
    const where = await at();
    const heldIds = [];
    const turn = run({
      model: scriptedModel(), rt, at: where,
      onHeld: (h) => heldIds.push(h.effectId),
    });
    const effect = await until('the hold', () => heldIds[0]);
    const view = await rest.get(effect);
    assert.equal(view.state, 'pending');
    assert.equal(view.call.tool, 'createPullRequest');
    assert.deepEqual(view.call.arguments, { title: 'Fix the build' });
    await rest.approve(effect, { approved: true, argumentsDigest: view.call.argumentsDigest });
    const { text, runs } = await turn;
    assert.deepEqual(runs, ['Fix the build']);
    assert.equal(text, 'Done: {"url":"https://github.example/acme/app/pull/42","title":"Fix the build"}');
    await until('tool-call-finished', async () => (await stored(rt, where.taskId, 'tool-call-finished')) === 1);
    assert.deepEqual((await finishedOf(rt, where.taskId)).result, {
      status: 'ok', output: { url: 'https://github.example/acme/app/pull/42', title: 'Fix the build' },
    });
    assert.equal((await rest.get(effect)).state, 'finished');
  });

  test("docs/integrations.md's AI SDK block is examples/ai-sdk-approval.mjs, and it runs as pasted: held, approved over REST, done", async () => {
    const example = join(ROOT, 'sdks/typescript/examples/ai-sdk-approval.mjs');
    const doc = readFileSync(join(ROOT, 'docs/integrations.md'), 'utf8');
    const block = `${doc.split('## Vercel AI SDK')[1].split('```js\n')[1].split('\n```')[0]}\n`;
    assert.equal(block, readFileSync(example, 'utf8'));
    const child = hp.node('examples/ai-sdk-approval.mjs', example, [hp.natsUrl, ORG]);
    const effect = (await child.line(/^held (\S+): approve it with `holdpoint approve \1`$/m, 90000))[1];
    const view = await rest.get(effect);
    await rest.approve(effect, { approved: true, argumentsDigest: view.call.argumentsDigest });
    const exited = await Promise.race([child.exited, new Promise((r) => setTimeout(() => r('timeout'), 60000))]);
    assert.deepEqual(exited, { code: 0, signal: null }, child.out + child.err);
    assert.equal(child.out.split('\n').at(-2), 'Done: {"url":"https://github.example/acme/app/pull/42","title":"Fix the build"}', child.out);
    assert.equal((await rest.get(effect)).state, 'finished');
  });

  test('a denial reaches the model as execution-denied with the reason; the tool never runs', async () => {
    const where = await at();
    const heldIds = [];
    const turn = run({ model: scriptedModel(), rt, at: where, onHeld: (h) => heldIds.push(h.effectId) });
    const effect = await until('the hold', () => heldIds[0]);
    await rest.approve(effect, { approved: false, reason: 'not on a Friday' });
    const { text, runs } = await turn;
    assert.deepEqual(runs, []);
    assert.equal(text, 'Not done: not on a Friday');
    const finished = await until('tool-call-finished', () => finishedOf(rt, where.taskId));
    assert.equal(finished.result.status, 'error');
    assert.equal(finished.result.code, 'tool.denied');
    assert.equal(await stored(rt, where.taskId, 'tool-call-finished'), 1);
  });

  test('a runner restarted between the hold and the decision holds the same call again and continues once', async () => {
    const where = await at();
    const approvalPart = {
      type: 'tool-approval-request', approvalId: 'aitxt-1',
      toolCall: { type: 'tool-call', toolCallId: 'call_restart', toolName: 'createPullRequest', input: { title: 'Fix' } },
    };
    const first = new AiSdkApprovals(rt, where);
    const [held] = await first.hold([approvalPart]);
    // The runner goes away; the person approves while it is down.
    const view = await rest.get(held.effectId);
    await rest.approve(held.effectId, { approved: true, argumentsDigest: view.call.argumentsDigest });
    // A new process (its own connection) holds the same request again: a replay.
    const rt2 = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const second = new AiSdkApprovals(rt2, where);
      const again = await second.hold([approvalPart]);
      assert.equal(again[0].effectId, held.effectId);
      const message = await second.decide(again);
      assert.deepEqual(message, { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: 'aitxt-1', approved: true }] });
      let runs = 0;
      const tools = second.reporting({
        createPullRequest: { needsApproval: true, execute: async () => ({ n: ++runs }) },
      });
      assert.deepEqual(await tools.createPullRequest.execute({ title: 'Fix' }, { toolCallId: 'call_restart' }), { n: 1 });
      assert.deepEqual(await tools.createPullRequest.execute({ title: 'Fix' }, { toolCallId: 'call_restart' }), { n: 1 });
      assert.equal(runs, 1);
    } finally {
      await rt2.close();
    }
    assert.equal(await stored(rt, where.taskId, 'approval-requested'), 1);
    await until('tool-call-finished', async () => (await stored(rt, where.taskId, 'tool-call-finished')) === 1);
  });

  test('an approval closed undecided is answered as not approved', async () => {
    const where = await at();
    const approvals = new AiSdkApprovals(rt, where);
    const [held] = await approvals.hold([{
      type: 'tool-approval-request', approvalId: 'aitxt-2',
      toolCall: { toolCallId: 'call_close', toolName: 'deploy', input: {} },
    }]);
    const waiting = approvals.decide([held]);
    assert.equal(await rt.closeInteraction(held.effectId, 'canceled'), 'closed');
    const message = await waiting;
    assert.equal(message.content[0].approved, false);
    assert.match(message.content[0].reason, /canceled/);
  });
});

describe('the Vercel AI SDK adapter across a worker killed (-9) between approval and execution', () => {
  /** @type {Holdpoint} */
  let hp;
  before(async () => {
    hp = new Holdpoint();
    await hp.nats();
  });
  after(async () => {
    await hp?.close();
  });

  test('one release, one execution, one tool-call-finished', async () => {
    const worker = await hp.worker();
    await hp.ingress();
    const rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'ana@acme.example') });
    const where = placement({ session: unique('sess'), lane: 'main', taskId: unique('task'), contextId: unique('ctx') });
    const part = {
      type: 'tool-approval-request', approvalId: 'aitxt-9',
      toolCall: { type: 'tool-call', toolCallId: 'call_kill', toolName: 'createPullRequest', input: { title: 'Fix' } },
    };
    // Runner 1 holds the call and goes away.
    const rt1 = await Runtime.connect(hp.natsUrl, ORG);
    await rt1.openSession(where.session);
    const [held] = await new AiSdkApprovals(rt1, where).hold([part]);
    await rt1.close();
    // The person approves; the worker is killed (-9) and another one started.
    const view = await until('the hold', () => rest.get(held.effectId));
    await rest.approve(held.effectId, { approved: true, argumentsDigest: view.call.argumentsDigest });
    worker.child.kill('SIGKILL');
    await worker.exited;
    await hp.worker();
    // Runner 2 (a new process's connection) continues: the call runs once.
    const rt2 = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const approvals = new AiSdkApprovals(rt2, where);
      const again = await approvals.hold([part]);
      const message = await approvals.decide(again);
      assert.equal(message.content[0].approved, true);
      let runs = 0;
      const tools = approvals.reporting({ createPullRequest: { needsApproval: true, execute: async () => ({ n: ++runs }) } });
      await tools.createPullRequest.execute({ title: 'Fix' }, { toolCallId: 'call_kill' });
      assert.equal(runs, 1);
      await until('tool-call-finished', async () => (await stored(rt2, where.taskId, 'tool-call-finished')) === 1);
      assert.equal(await stored(rt2, where.taskId, 'tool-call-released'), 1);
      assert.equal(await stored(rt2, where.taskId, 'approval-requested'), 1);
      assert.deepEqual((await finishedOf(rt2, where.taskId)).result, { status: 'ok', output: { n: 1 } });
      // Runner 3, as if runner 2 died after executing: the recorded output, no second run.
      const third = new AiSdkApprovals(rt2, where).reporting({
        createPullRequest: { needsApproval: true, execute: async () => ({ n: ++runs }) },
      });
      assert.deepEqual(await third.createPullRequest.execute({ title: 'Fix' }, { toolCallId: 'call_kill' }), { n: 1 });
      assert.equal(runs, 1);
      assert.equal(await stored(rt2, where.taskId, 'tool-call-finished'), 1);
    } finally {
      await rt2.close();
    }
  });
  for (const stopInTool of ['before', 'after']) {
    test(`a runtime process killed (-9) in the tool ${stopInTool} it ran, after a worker kill, continues from its saved conversation: one release, one execution, one tool-call-finished`, async () => {
      const hp = new Holdpoint(); // its own nats-server: one worker at a time
      await hp.nats();
      const worker = await hp.worker();
      await hp.ingress();
      const rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'ana@acme.example') });
      const rt = await Runtime.connect(hp.natsUrl, ORG);
      const [session, task, callId] = [unique('sess'), unique('task'), unique('call')];
      const [state, runs] = [join(hp.dir, 'state.json'), join(hp.dir, 'runs')];
      const script = join(ROOT, 'sdks/typescript/test/ai-sdk-runtime.mjs');
      const args = [hp.natsUrl, session, task, callId, state, runs];
      const ran = () => (existsSync(runs) ? readFileSync(runs, 'utf8').split('\n').filter(Boolean) : []);
      try {
        const first = hp.node('ai-sdk runtime', script, [...args, '--stop-in-tool', stopInTool]);
        const effect = (await first.line(/^held (\S+)$/m, 90000))[1];
        assert.ok(existsSync(state));
        const view = await until('the hold', () => rest.get(effect));
        await rest.approve(effect, { approved: true, argumentsDigest: view.call.argumentsDigest });
        worker.child.kill('SIGKILL');
        assert.equal((await worker.exited).signal, 'SIGKILL');
        await hp.worker();
        await first.line(stopInTool === 'before' ? /^executing$/m : /^reported$/m, 60000);
        first.child.kill('SIGKILL');
        assert.equal((await first.exited).signal, 'SIGKILL');
        assert.deepEqual(ran(), stopInTool === 'before' ? [] : ['createPullRequest Fix the build']);

        const second = hp.node('ai-sdk runtime (restarted)', script, args);
        const exited = await Promise.race([second.exited, new Promise((r) => setTimeout(() => r('timeout'), 90000))]);
        assert.deepEqual(exited, { code: 0, signal: null }, second.out + second.err);
        assert.match(second.out, /^restarted$/m);
        assert.doesNotMatch(second.out, /^held /m);
        assert.match(second.out, /^done Done: \{"url":"https:\/\/github\.example\/acme\/app\/pull\/42"\}$/m, second.out);
        assert.deepEqual(ran(), ['createPullRequest Fix the build'], 'the tool ran twice');
        await until('tool-call-finished', async () => (await stored(rt, task, 'tool-call-finished')) === 1, 30000);
        assert.equal(await stored(rt, task, 'approval-requested'), 1);
        assert.equal(await stored(rt, task, 'interaction-resolved'), 1);
        assert.equal(await stored(rt, task, 'tool-call-released'), 1);
        assert.equal(await stored(rt, task, 'tool-call-finished'), 1);
        assert.deepEqual((await finishedOf(rt, task)).result, { status: 'ok', output: { url: 'https://github.example/acme/app/pull/42' } });
        assert.equal((await rest.get(effect)).state, 'finished');
      } finally {
        await rt.close();
        await hp.close();
      }
    });
  }
});
