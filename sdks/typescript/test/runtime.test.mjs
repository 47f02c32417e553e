// The runtime side (`@holdpoint/sdk/runtime`, on the official NATS client) against
// a real Holdpoint: `holdpoint up --dev-jwt`, or a nats-server with workers the
// test starts and stops. A call is held, a person approves over REST, the tool
// runs once and `tool-call-finished` arrives once; a command retried after a
// timeout (the same Nats-Msg-Id) is decided once; `follow` resumes from a sequence.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  AgentManifest, AlreadyApprovedError, ConflictError, ConnectionsDisabledError, DeadlineError, HoldpointRest, InvalidIdError, InvalidRequestError, NotAssigneeError, NotFoundError,
  OutcomeTimeoutError, RuleRefusedError, Runtime, SessionNotFoundError, argumentsDigest, openCommand, approvalRequest, placement, toolOk, wire,
} from '../dist/node.js';
import { jetstreamManager } from '@nats-io/jetstream';

import { Holdpoint, ROOT, until } from './harness.mjs';

const ORG = 'acme';
const unique = (prefix) => `${prefix}-${randomUUID().replaceAll('-', '').slice(0, 12)}`;

/** How many events named `name` of `task` HP_EVENTS holds (per-subject counts of the stream itself). */
async function stored(rt, task, name) {
  const jsm = await jetstreamManager(rt.connection);
  const subject = `hp.evt.${ORG}.${task}.${name}`;
  const info = await jsm.streams.info('HP_EVENTS', { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

/** Collects a followed stream in the background until `stop()`. */
async function following(rt, options) {
  const controller = new AbortController();
  const events = await rt.follow({ ...options, signal: controller.signal });
  const seen = [];
  let failure;
  const done = (async () => {
    try {
      for await (const f of events) seen.push(f);
    } catch (error) {
      failure = error;
    }
  })();
  return {
    seen,
    /** Events named `name` about `id` (the interaction, or its call). */
    named(name, id) {
      if (failure) throw failure;
      return seen.filter((f) => f.name === name && [f.event.subject, f.event.data?.interactionId, f.event.data?.callId].includes(id));
    },
    async stop() {
      controller.abort();
      await done;
    },
  };
}

describe('the TypeScript runtime against holdpoint up', () => {
  /** @type {Holdpoint} */
  let hp;
  let rest;
  before(async () => {
    hp = await new Holdpoint().up();
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'ana@acme.example') });
  });
  after(async () => {
    await hp?.close();
  });

  test('hold, a person approves over REST, the tool result is reported, tool-call-finished arrives once', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    const [session, task, effect, call] = [unique('sess'), unique('task'), unique('eff'), unique('call')];
    const live = await following(rt, { task });
    try {
      assert.equal(await rt.openSession(session), 'opened');
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const args = { title: 'Fix — ünïcode', n: 12345678901234567890123n, x: [1.5, { b: 2, a: 1 }] };
      const hold = { effectId: effect, callId: call, server: 'github', tool: 'create_pull_request', arguments: args, reason: 'writes to a repository' };
      assert.equal(await rt.holdForApproval(at, hold), effect);
      // The same hold again is a replay of the first: no second opening.
      assert.equal(await rt.holdForApproval(at, hold), effect);

      const view = await rest.get(effect);
      assert.equal(view.state, 'pending');
      assert.equal(view.call.argumentsDigest, argumentsDigest(args));
      await rest.approve(effect, { approved: true, argumentsDigest: view.call.argumentsDigest });

      const released = await until('the release', () => live.named('tool-call-released', call)[0] ?? live.named('tool-call-released', effect)[0]);
      assert.equal(released.event.data.arguments.n, 12345678901234567890123, 'released as held');
      let runs = 0;
      const result = toolOk({ url: 'https://example.test/pr/1', runs: ++runs });
      assert.equal(await rt.reportToolResult(effect, result), 'finished');
      // Reported again: the same command, decided once.
      assert.equal(await rt.reportToolResult(effect, result), 'finished');
      assert.equal(rt.lastPublishDuplicate, true);
      const finished = await until('tool-call-finished', () => live.named('tool-call-finished', call)[0]);
      assert.deepEqual(finished.event.data.result, { status: 'ok', output: { url: 'https://example.test/pr/1', runs: 1 } });
      assert.equal(finished.event.type, 'dev.holdpoint.tool-call-finished');

      // Stored once: a follower from the start of the stream sees one of each, in order.
      const replay = await following(rt, { task, fromStart: true });
      try {
        await until('the replay', () => replay.named('tool-call-finished', call).length > 0);
        const last = await rt.lastEventSequence();
        await until('the replay to catch up', () => replay.seen.at(-1)?.sequence >= Math.min(last, live.seen.at(-1).sequence));
        assert.equal(replay.named('tool-call-finished', call).length, 1);
        assert.equal(replay.named('approval-requested', effect).length, 1);
        const seqs = replay.seen.map((f) => f.sequence);
        assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b));
        assert.deepEqual(seqs, live.seen.map((f) => f.sequence), 'the live follower saw the same events');
        assert.equal(await stored(rt, task, 'tool-call-finished'), 1);
        assert.equal(await stored(rt, task, 'approval-requested'), 1);
      } finally {
        await replay.stop();
      }
    } finally {
      await live.stop();
      await rt.close();
    }
    assert.equal(live.named('tool-call-finished', call).length, 1);
  });

  test('follow resumes after a sequence, each event once', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const [session, task] = [unique('sess'), unique('task')];
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const hold = () => rt.holdForApproval(at, { effectId: unique('eff'), callId: unique('call'), server: 's', tool: 't', arguments: {} });
      const first = await following(rt, { task, name: 'approval-requested' });
      const e1 = await hold();
      await until('the first opening', () => first.named('approval-requested', e1).length);
      await first.stop();
      const resumeAfter = first.seen.at(-1).sequence;
      const e2 = await hold();
      const e3 = await hold();
      const resumed = await following(rt, { task, name: 'approval-requested', after: resumeAfter });
      try {
        await until('both later openings', () => resumed.named('approval-requested', e3).length);
      } finally {
        await resumed.stop();
      }
      assert.deepEqual(resumed.seen.map((f) => f.event.subject), [e2, e3]);
      assert.ok(resumed.seen.every((f) => f.sequence > resumeAfter));
    } finally {
      await rt.close();
    }
  });

  test('askUserForm: the form reaches the view, a misfit value is refused with its pointer, a fitting one resolves', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const [session, task] = [unique('sess'), unique('task')];
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const schema = {
        type: 'object',
        properties: { email: { type: 'string', format: 'email' }, seats: { type: 'integer', minimum: 1 } },
        required: ['email'],
      };
      const qid = await rt.askUserForm(at, { callId: unique('call'), text: 'Who?', schema });
      assert.deepEqual((await rest.get(qid)).detail.questions[0].schema, schema);
      await assert.rejects(
        rest.respond(qid, { email: 'ana@acme.example', seats: 0 }),
        (e) => e.code === 'NRY-0036' && e.status === 400 && e.pointer === '/seats',
      );
      assert.equal((await rest.get(qid)).state, 'pending');
      await rest.respond(qid, { email: 'ana@acme.example', seats: 2 });
      assert.deepEqual((await rest.get(qid)).resolution.answer.value, { email: 'ana@acme.example', seats: 2 });
    } finally {
      await rt.close();
    }
  });

  test('questions, connections (AGENT.md), deadlines and closing', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const [session, task] = [unique('sess'), unique('task')];
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const qid = await rt.askUser(at, {
        callId: unique('call'),
        questions: [{ text: 'Which database?', options: ['Postgres', 'SQLite'] }, { text: 'Anything else?', allowText: true }],
      });
      await rest.answerQuestion(qid, [{ options: [1] }, { options: [], text: 'no' }]);
      assert.equal((await rest.get(qid)).state, 'finished');

      const off = AgentManifest.fromMarkdown('---\nname: coder\n---\n');
      await assert.rejects(rt.requestConnection(off, at, { callId: unique('call'), app: 'calendar', reason: 'why' }), ConnectionsDisabledError);
      const agentMd = join(hp.dir, 'AGENT.md');
      writeFileSync(agentMd, '---\nname: coder\nloop: {connections: true}\n---\n# Coder\n');
      const on = await AgentManifest.fromPath(agentMd);
      const con = await rt.requestConnection(on, at, { callId: unique('call'), app: 'A'.repeat(100), reason: 'r'.repeat(300) });
      assert.match(con, /^con_[0-9a-f]{32}$/);
      const view = await rest.get(con);
      assert.equal(view.kind, 'connection');
      const text = JSON.stringify(view);
      assert.ok(text.includes('A'.repeat(80)) && !text.includes('A'.repeat(81)), 'app cut at 80');
      assert.ok(text.includes('r'.repeat(280)) && !text.includes('r'.repeat(281)), 'reason cut at 280');
      await rest.respond(con, { connected: true });
      assert.equal((await rest.get(con)).state, 'finished');

      const held = await rt.holdForApproval(at, { effectId: unique('eff'), callId: unique('call'), server: 's', tool: 't', arguments: [1] });
      // The pinned nats-server (2.15) has message schedules: set, move, clear.
      assert.equal(await rt.setDeadline(held, { expiresIn: 600 }), 'rescheduled');
      const atTime = new Date(Date.now() + 30 * 60_000);
      assert.equal(await rt.setDeadline(held, { expiresAt: atTime }), 'rescheduled');
      assert.equal((await rest.get(held)).expiresAt, wire.formatTimestamp(atTime));
      await assert.rejects(rt.setDeadline(held, { expiresAt: new Date(Date.now() - 60_000) }), DeadlineError);
      assert.equal(await rt.setDeadline(held, {}), 'rescheduled');
      assert.equal((await rest.get(held)).expiresAt ?? null, null);
      assert.equal(await rt.closeInteraction(held, 'canceled'), 'closed');
      assert.equal((await rest.get(held)).state, 'closed');
      assert.equal(await rt.closeInteraction(held, 'interrupted'), 'closed');
      await assert.rejects(rt.reportToolResult(unique('eff'), toolOk(1)), NotFoundError);
      assert.throws(() => placement({ session: 'has space', lane: 'main', taskId: 't', contextId: 'c' }), InvalidIdError);
    } finally {
      await rt.close();
    }
  });

  test('turns on a lane', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const session = unique('sess');
      await assert.rejects(rt.startTurn(session, 'main', 'turn-1'), SessionNotFoundError);
      assert.equal(await rt.openSession(session, 'product', { laneCapacity: 2 }), 'opened');
      // The refused command again: its stored refusal (NRY-0002) is provisional, so
      // it is published under a fresh id and decided anew.
      assert.equal(await rt.startTurn(session, 'main', 'turn-1'), 'admitted');
      assert.equal(rt.lastPublishDuplicate, true);
      assert.equal(await rt.startTurn(session, 'main', 'turn-1'), 'admitted');
      await assert.rejects(rt.startTurn(session, 'main', 'turn-2'), ConflictError);
      assert.equal(await rt.finishTurn(session, 'main', 'turn-1'), 'unchanged');
      assert.equal(await rt.startTurn(session, 'main', 'turn-3'), 'admitted');
      assert.equal(await rt.closeSession(session), 'closed');
      assert.equal(await rt.endSession(session), 'closed');
      await assert.rejects(rt.startTurn(session, 'main', 'turn-4'), SessionNotFoundError);
    } finally {
      await rt.close();
    }
  });

  test("the worker records the command under the TypeScript's id and binds the approval to its digest", async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    try {
      const [session, task, effect] = [unique('sess'), unique('task'), unique('eff')];
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx'), agent: 'coder', expiry: { expiresIn: 900, onExpiry: 'close' } });
      const args = {
        日本: [1e-5, 1e16, 5e-324, -0, 2.0, 0.1, 12345678901234567890123n, -(2n ** 63n), 1e21],
        '😀': { é: '„Zitat“ \u2028 \x01', '': null, Z: true },
        a: [[[]], {}],
      };
      const command = openCommand(at, effect, unique('call'), approvalRequest('s', 't', args, 'why ✓'));
      assert.equal(await rt.send(command), 'opened');
      const { Kvm } = await import('@nats-io/kv');
      const kv = await new Kvm(rt.connection).open('HP_STATE');
      const record = (await kv.get(`int.acme.${effect}`)).json();
      assert.ok(record.outbox.map((t) => t.commandId).includes(wire.commandId(rt.envelope(command))));
      assert.equal(record.spec.argumentsDigest, argumentsDigest(args));
    } finally {
      await rt.close();
    }
  });

  test('a hold that needs two people: each approval counted once (202, then NRY-0038 for the same person), released on the second', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    const bob = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'bob@acme.example') });
    const [session, task, effect, call] = [unique('sess'), unique('task'), unique('eff'), unique('call')];
    const live = await following(rt, { task });
    try {
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const args = { amount: 10000, to: 'acme-savings' };
      assert.equal(await rt.holdForApproval(at, { effectId: effect, callId: call, server: 'bank', tool: 'transfer', arguments: args, approvals: 2 }), effect);
      const decision = rt.waitForDecision(task, effect, { timeoutMs: 60000 });
      let decided = false;
      void decision.then(() => { decided = true; }, () => {});
      const held = await rest.get(effect);
      assert.equal(held.approvals?.required, 2);
      assert.deepEqual(held.approvals?.given, []);
      const digest = held.call.argumentsDigest;

      // Ana's approval counts; the call waits for someone else's.
      const key = unique('k');
      const progress = await rest.approve(effect, { approved: true, argumentsDigest: digest }, { idempotencyKey: key });
      assert.deepEqual(progress, { given: 1, required: 2 });
      const counted = await until('approval-counted', () => live.named('approval-counted', effect)[0]);
      assert.deepEqual(counted.event.data, { interactionId: effect, by: 'ana@acme.example', given: 1, required: 2 });
      const waitingView = await rest.get(effect);
      assert.equal(waitingView.state, 'pending');
      assert.deepEqual(waitingView.approvals?.given.map((g) => g.by), ['ana@acme.example']);
      assert.equal(waitingView.approvals?.byYou, true);
      assert.equal((await bob.get(effect)).approvals?.byYou, false);
      assert.equal(decided, false);
      assert.equal(live.named('tool-call-released', effect).length, 0);
      // The same key replays the count; a new key is Ana approving twice: refused, nothing changes.
      assert.deepEqual(await rest.approve(effect, { approved: true, argumentsDigest: digest }, { idempotencyKey: key }), progress);
      await assert.rejects(rest.approve(effect, { approved: true, argumentsDigest: digest }), (e) => {
        assert.ok(e instanceof AlreadyApprovedError, e);
        assert.ok(e instanceof ConflictError);
        assert.equal(e.code, 'NRY-0038');
        assert.equal(e.status, 409);
        assert.equal(e.title, 'Already approved by you');
        return true;
      });
      await assert.rejects(rest.respond(effect, true), (e) => e instanceof AlreadyApprovedError);
      await assert.rejects(
        bob.approve(effect, { approved: true, remember: { scope: 'session' } }, { retryForMs: 0 }),
        (e) => e instanceof RuleRefusedError && e.code === 'NRY-0025',
      );
      assert.equal((await rest.get(effect)).approvals?.given.length, 1);

      // Bob's is the second one needed: released, naming both.
      assert.equal(await bob.approve(effect, { approved: true, argumentsDigest: digest }), undefined);
      const decisionMade = await decision;
      assert.equal(decisionMade.approved, true);
      assert.equal(decisionMade.by, 'bob@acme.example');
      assert.deepEqual(decisionMade.approvals, ['ana@acme.example', 'bob@acme.example']);
      const released = await until('the release', () => live.named('tool-call-released', effect)[0]);
      assert.deepEqual(released.event.data.approvals, ['ana@acme.example', 'bob@acme.example']);
      assert.deepEqual(released.event.data.arguments, args);

      // In a batch: a counted item is 202 with its progress; the same person again 409 NRY-0038; the last 204.
      const other = await rt.holdForApproval(placement({ session, lane: 'main', taskId: unique('task'), contextId: unique('ctx') }), {
        effectId: unique('eff'), callId: unique('call'), server: 'bank', tool: 'transfer', arguments: { amount: 1 }, approvals: 2,
      });
      const item = { interactionId: other, operation: 'approve', body: { approved: true } };
      const [first] = await rest.answerMany([item]);
      assert.equal(first.status, 202);
      assert.deepEqual(first.approvals, { given: 1, required: 2 });
      const [twice] = await rest.answerMany([item]);
      assert.deepEqual([twice.status, twice.code], [409, 'NRY-0038']);
      const [last] = await bob.answerMany([item]);
      assert.equal(last.status, 204);
      assert.equal(last.approvals ?? undefined, undefined);
      assert.notEqual((await rest.get(other)).state, 'pending');
    } finally {
      await live.stop();
      await rt.close();
    }
  });

  test('reassign: a person outside the assignees answers once the runtime reassigns to them; a retried change is published once', async () => {
    const rt = await Runtime.connect(hp.natsUrl, ORG);
    const bob = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'bob@acme.example') });
    const [session, task, effect] = [unique('sess'), unique('task'), unique('eff')];
    const live = await following(rt, { task });
    try {
      await rt.openSession(session);
      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx'), assignees: { people: ['ana@acme.example'] } });
      await rt.holdForApproval(at, { effectId: effect, callId: unique('call'), server: 'k8s', tool: 'deploy', arguments: { service: 'api' } });
      await assert.rejects(bob.approve(effect, { approved: true }), NotAssigneeError);

      const toBob = { people: ['bob@acme.example'], groups: ['oncall'] };
      assert.equal(await rt.reassign(effect, toBob, 'chg-to-bob'), 'reassigned');
      // The same change again is a replay; the same assignees under a new change are unchanged.
      assert.equal(await rt.reassign(effect, toBob, 'chg-to-bob'), 'reassigned');
      assert.equal(await rt.reassign(effect, toBob), 'unchanged');
      const changes = await until('the reassignment', () => live.named('interaction-reassigned', effect).length > 0 && live.named('interaction-reassigned', effect));
      assert.deepEqual(changes[0].event.data.assignees, toBob);
      assert.deepEqual(changes[0].event.data.previous, { people: ['ana@acme.example'] });
      await assert.rejects(rt.reassign(effect, { people: ['bob@acme.example', 'bob@acme.example'] }), InvalidRequestError);

      await bob.approve(effect, { approved: true });
      await until('the release', () => live.named('interaction-resolved', effect).length > 0);
      assert.equal(live.named('interaction-reassigned', effect).length, 1);
      await assert.rejects(rt.reassign(effect, undefined), ConflictError);

      // This server has no warning lead: an escalation would never fire, so nothing opens.
      const escalating = placement({
        session, lane: 'main', taskId: unique('task'), contextId: unique('ctx'),
        expiry: { expiresIn: 600 }, escalation: { groups: ['oncall'] },
      });
      const refused = unique('eff');
      await assert.rejects(
        rt.holdForApproval(escalating, { effectId: refused, callId: unique('call'), server: 'k8s', tool: 'deploy', arguments: {} }),
        (e) => e instanceof InvalidRequestError && /warning lead/.test(e.message),
      );
      assert.equal(await rt.record(refused), undefined);
    } finally {
      await live.stop();
      await rt.close();
    }
  });

  test('the README quick start (examples/approval-runtime.mjs) runs as pasted: one run, one tool-call-finished', async () => {
    const script = join(ROOT, 'sdks/typescript/examples/approval-runtime.mjs');
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const block = `${readme.split('## TypeScript runtime quick start')[1].split('```js\n')[1].split('\n```')[0]}\n`;
    assert.equal(block, readFileSync(script, 'utf8'), "README's block differs from the example");
    let out = '';
    const child = execFile(process.execPath, [script, hp.natsUrl, ORG], { cwd: join(ROOT, 'sdks/typescript') });
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const exited = new Promise((r) => child.once('exit', (code) => r(code)));
    try {
      const effect = (await until('the hold', () => out.match(/^held (\S+):/m), 30000))[1];
      const view = await rest.get(effect);
      await rest.approve(effect, { approved: true, argumentsDigest: view.call.argumentsDigest });
      assert.equal(await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30000))]), 0, out);
    } finally {
      child.kill();
    }
    assert.equal(out.match(/^ran create_pull_request/gm)?.length, 1, out);
    assert.equal(out.match(/ tool-call-finished$/gm)?.length, 1, out);
    assert.match(out, /^finished: \{"status":"ok","output":\{"title":"Fix the build","url":"https:\/\/github\.example\/acme\/app\/pull\/42"\}\}$/m);
  });
});

describe('the TypeScript runtime against a worker that is stopped and started', () => {
  /** @type {Holdpoint} */
  let hp;
  before(async () => {
    hp = new Holdpoint();
    await hp.nats();
  });
  after(async () => {
    await hp?.close();
  });

  test('a command retried after a timeout (the same Nats-Msg-Id) is decided once', async () => {
    const first = await hp.worker(); // makes the streams and buckets
    await first.stop();
    const rt = await Runtime.connect(hp.natsUrl, ORG, { timeoutMs: 1000 });
    try {
      const [session, task, effect] = [unique('sess'), unique('task'), unique('eff')];
      await assert.rejects(rt.openSession(session), OutcomeTimeoutError);
      assert.equal(rt.lastPublishDuplicate, false);
      let worker = await hp.worker();
      // The retry carries the same Nats-Msg-Id: JetStream drops it as a duplicate
      // and the outcome is read from the record the first publish wrote.
      rt.timeoutMs = 15000;
      assert.equal(await rt.openSession(session), 'opened');
      assert.equal(rt.lastPublishDuplicate, true);

      const at = placement({ session, lane: 'main', taskId: task, contextId: unique('ctx') });
      const hold = { effectId: effect, callId: unique('call'), server: 's', tool: 't', arguments: { a: 1 } };
      await worker.stop();
      rt.timeoutMs = 1000;
      await assert.rejects(rt.holdForApproval(at, hold), OutcomeTimeoutError);
      worker = await hp.worker();
      rt.timeoutMs = 15000;
      assert.equal(await rt.holdForApproval(at, hold), effect);
      assert.equal(rt.lastPublishDuplicate, true);
      const opened = await following(rt, { task, fromStart: true });
      try {
        await until('the opening', () => opened.named('approval-requested', effect).length);
      } finally {
        await opened.stop();
      }
      assert.equal(opened.named('approval-requested', effect).length, 1);
      assert.equal(await stored(rt, task, 'approval-requested'), 1, 'stored once');
    } finally {
      await rt.close();
    }
  });
});
