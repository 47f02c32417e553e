// The SDK against a real Holdpoint: `holdpoint up --dev-jwt` (its own nats-server
// on a free port with a temporary store, a worker, the ingress), the runtime
// played with `holdpoint runtime`. No mocks.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  ArgumentsChangedError,
  AnswerDoesNotFitError,
  ConflictError,
  EditRefusedError,
  HoldpointA2A,
  HoldpointError,
  HoldpointRest,
  NotFoundError,
  TaskState,
  UnauthenticatedError,
  UnsupportedOperationError,
  waiting,
} from '../dist/index.js';
import { Holdpoint, collect, freePort, impatientProxy, until } from './harness.mjs';

const ORG = 'acme';
const TWO_QUESTIONS = [
  { text: 'Which branch?', options: ['main', 'release'] },
  { text: 'Duplicates?', options: ['Delete', 'Merge', 'Keep both'], allowText: true },
];

describe('the SDK against holdpoint up', () => {
  /** @type {Holdpoint} */
  let hp;
  let token;
  let rest;
  let a2a;

  before(async () => {
    hp = await new Holdpoint().up();
    token = await hp.token(ORG, 'ana');
    rest = new HoldpointRest({ baseUrl: hp.api, token });
    a2a = await HoldpointA2A.connect({ baseUrl: hp.api, token });
    await hp.session(ORG, 's1');
  });

  after(async () => {
    await hp?.close();
  });

  /** Follows one task's events from the start of the stream. */
  function follow(task) {
    const controller = new AbortController();
    return collect(rest.events({ task, after: 0, signal: controller.signal }), controller);
  }

  test('answers an approval over A2A: the task works again, the call is released and finishes once', async () => {
    await hp.hold(ORG, { session: 's1', task: 'ta1', call: 'call-a1', effect: 'eff_a1', args: { repo: 'acme/app', title: 'Fix' } });
    const task = await a2a.getTask('ta1');
    assert.equal(task.status.state, TaskState.TASK_STATE_AUTH_REQUIRED);
    const open = waiting(task);
    assert.deepEqual(open, {
      interactionId: 'eff_a1',
      kind: 'approval',
      prompt: 'Approve github / create_pull_request?',
      detail: { server: 'github', tool: 'create_pull_request' },
    });
    const events = follow('ta1');
    try {
      const answered = await a2a.answer({
        taskId: task.id,
        contextId: task.contextId,
        interactionId: open.interactionId,
        approved: true,
        messageId: `answer:${open.interactionId}`,
      });
      assert.equal(answered.id, 'ta1');
      assert.equal(answered.status.state, TaskState.TASK_STATE_WORKING);
      assert.equal(waiting(answered), undefined);
      const released = await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      assert.deepEqual(released.event.data.arguments, { repo: 'acme/app', title: 'Fix' });
      assert.equal(released.event.data.approvedBy, 'ana');
      await hp.toolResult(ORG, 'eff_a1', { url: 'https://example.invalid/pull/1' });
      const finished = await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.equal(finished.event.data.callId, 'call-a1');
      assert.equal(events.seen.filter((e) => e.name === 'tool-call-finished').length, 1);
      assert.equal((await rest.get('eff_a1')).state, 'finished');
    } finally {
      await events.stop();
    }
  });

  test('answers a question over A2A with a value shaped like the REST question body', async () => {
    const q = await hp.ask(ORG, { session: 's1', task: 'tq1', call: 'call-q1', questions: TWO_QUESTIONS });
    const task = await a2a.getTask('tq1');
    assert.equal(task.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    const open = waiting(task);
    assert.equal(open.kind, 'question');
    assert.equal(open.interactionId, q);
    assert.deepEqual(open.detail.questions.map((x) => x.options), [['main', 'release'], ['Delete', 'Merge', 'Keep both']]);
    const value = { answers: [{ options: [0] }, { options: [2], text: 'Keep both and reconcile nightly.' }] };
    const answered = await a2a.answer({ taskId: 'tq1', contextId: task.contextId, interactionId: q, value, messageId: `answer:${q}` });
    assert.equal(answered.status.state, TaskState.TASK_STATE_WORKING);
    const view = await rest.get(q);
    assert.equal(view.state === 'resolved' || view.state === 'finished', true, view.state);
    assert.deepEqual(view.resolution.answer.answers, value.answers);
  });

  test('a form value that does not fit, over A2A: a typed refusal with the pointer of its first failing field, nothing changed', async () => {
    const schema = {
      type: 'object',
      properties: { email: { type: 'string', format: 'email' }, seats: { type: 'integer', minimum: 1 } },
      required: ['email', 'seats'],
    };
    const q = await hp.ask(ORG, { session: 's1', task: 'tqf1', call: 'call-qf1', questions: [{ text: 'Who?', schema }] });
    const task = await a2a.getTask('tqf1');
    assert.deepEqual(waiting(task).detail.questions[0].schema, schema);
    for (const [n, [value, pointer]] of [[{ email: 'ana', seats: 2 }, '/email'], [{ email: 'ana@acme.example', seats: 0 }, '/seats']].entries()) {
      await assert.rejects(
        a2a.answer({ taskId: 'tqf1', contextId: task.contextId, interactionId: q, value, messageId: `misfit-${n}:${q}` }),
        (e) => e instanceof AnswerDoesNotFitError && e.code === 'NRY-0036' && e.pointer === pointer,
      );
    }
    assert.equal((await rest.get(q)).state, 'pending');
    const fits = { email: 'ana@acme.example', seats: 2 };
    await a2a.answer({ taskId: 'tqf1', contextId: task.contextId, interactionId: q, value: fits, messageId: `answer:${q}` });
    assert.deepEqual((await rest.get(q)).resolution.answer.value, fits);
  });

  test('answers a connection over A2A: Connected: <app> comes back as the call result', async () => {
    const id = await hp.connect(ORG, { session: 's1', task: 'tc1', call: 'call-c1', app: 'Linear', reason: 'file tickets' });
    const task = await a2a.getTask('tc1');
    const open = waiting(task);
    assert.deepEqual(open, { interactionId: id, kind: 'connection', prompt: 'Connect Linear: file tickets', detail: { app: 'Linear', reason: 'file tickets' } });
    const events = follow('tc1');
    try {
      const answered = await a2a.answer({ taskId: 'tc1', interactionId: id, value: { connected: true }, messageId: `answer:${id}` });
      assert.equal(answered.status.state, TaskState.TASK_STATE_WORKING);
      const finished = await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.match(JSON.stringify(finished.event.data.result), /Connected: Linear/);
    } finally {
      await events.stop();
    }
  });

  test('a retry with the same messageId answers once; another messageId is a typed conflict', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tr1', call: 'call-r1', effect: 'eff_r1' });
    const events = follow('tr1');
    try {
      const params = { taskId: 'tr1', contextId: 'ctx-1', interactionId: 'eff_r1', approved: true, messageId: 'm-2' };
      const first = await a2a.answer(params);
      const again = await a2a.answer(params);
      assert.equal(first.status.state, TaskState.TASK_STATE_WORKING);
      assert.equal(again.status.state, TaskState.TASK_STATE_WORKING);
      assert.equal(again.id, first.id);
      // A later body under the same key changes nothing either.
      const denied = await a2a.answer({ ...params, approved: false });
      assert.equal(denied.status.state, TaskState.TASK_STATE_WORKING);
      await assert.rejects(a2a.answer({ ...params, messageId: 'm-3' }), (e) => {
        assert.ok(e instanceof ConflictError, e);
        assert.equal(e.code, 'NRY-0009');
        assert.equal(e.title, 'No longer waiting');
        assert.equal(e.retryable, false);
        return true;
      });
      await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      await hp.toolResult(ORG, 'eff_r1', { ok: true });
      await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      // Everything the four answers could have caused is stored before the call finished.
      const count = (name) => events.seen.filter((e) => e.name === name).length;
      assert.equal(count('interaction-resolved'), 1);
      assert.equal(count('tool-call-released'), 1);
      assert.equal(count('tool-call-finished'), 1);
      const view = await rest.get('eff_r1');
      assert.equal(view.resolution.answer.approved, true);
    } finally {
      await events.stop();
    }
  });

  test('A2A: edit, then approve releases the edit; a non-object edit is a typed refusal that changes nothing', async () => {
    const args = { repo: 'acme/app', title: 'Fix' };
    await hp.hold(ORG, { session: 's1', task: 'ted1', call: 'call-ed1', effect: 'eff_ed1', args, editable: true });
    const events = follow('ted1');
    try {
      const held = await rest.get('eff_ed1');
      const params = { taskId: 'ted1', interactionId: 'eff_ed1', approved: true, argumentsDigest: held.call.argumentsDigest };
      await assert.rejects(
        a2a.answer({ ...params, editedArguments: ['not', 'an', 'object'], messageId: 'm-ed-bad' }),
        (e) => e instanceof EditRefusedError && e.code === 'NRY-0029',
      );
      assert.equal((await rest.get('eff_ed1')).state, 'pending');
      const edit = { repo: 'acme/app', title: 'Fixed over A2A' };
      const answered = await a2a.answer({ ...params, editedArguments: edit, messageId: 'm-ed-1' });
      assert.equal(answered.status.state, TaskState.TASK_STATE_WORKING);
      const released = await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      assert.deepEqual(released.event.data.arguments, edit);
      assert.equal(released.event.data.edited, true);
      assert.equal(released.event.data.argumentsDigest, held.call.argumentsDigest);
    } finally {
      await events.stop();
    }
  });

  test('text on an approval is refused with the typed error and changes nothing', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tt1', call: 'call-t1', effect: 'eff_t1' });
    await assert.rejects(
      a2a.answer({ taskId: 'tt1', interactionId: 'eff_t1', text: 'yes, go ahead', messageId: 'm-text' }),
      (e) => {
        assert.ok(e instanceof UnsupportedOperationError, e);
        assert.ok(e instanceof HoldpointError);
        assert.equal(e.code, 'NRY-0020');
        assert.equal(e.title, 'Unsupported operation');
        assert.equal(e.retryable, false);
        assert.equal(e.rpcCode, -32004);
        return true;
      },
    );
    assert.equal((await rest.get('eff_t1')).state, 'pending');
    assert.equal(waiting(await a2a.getTask('tt1')).interactionId, 'eff_t1');
  });

  test('subscribe() yields the task, then its status update when it is answered', async () => {
    await hp.hold(ORG, { session: 's1', task: 'ts1', call: 'call-s1', effect: 'eff_s1' });
    const controller = new AbortController();
    const stream = a2a.subscribe('ts1', { signal: controller.signal });
    try {
      const first = await stream.next();
      assert.equal(first.value.payload.$case, 'task');
      assert.equal(first.value.payload.value.status.state, TaskState.TASK_STATE_AUTH_REQUIRED);
      const view = await rest.get('eff_s1');
      await rest.approve('eff_s1', { approved: true, argumentsDigest: view.call.argumentsDigest });
      const next = await stream.next();
      assert.equal(next.value.payload.$case, 'statusUpdate');
      assert.equal(next.value.payload.value.status.state, TaskState.TASK_STATE_WORKING);
    } finally {
      controller.abort();
      await stream.return(undefined);
    }
  });

  test('REST: answerQuestion with the REST question body; a misfit and a second answer are typed errors', async () => {
    const q = await hp.ask(ORG, { session: 's1', task: 'tq2', call: 'call-q2', questions: TWO_QUESTIONS });
    await assert.rejects(rest.answerQuestion(q, [{ options: [5] }, { options: [0] }]), AnswerDoesNotFitError);
    const answers = [{ options: [0] }, { options: [2], text: 'Keep both and reconcile nightly.' }];
    await rest.answerQuestion(q, answers, { idempotencyKey: 'k-q2' });
    await rest.answerQuestion(q, answers, { idempotencyKey: 'k-q2' });
    await assert.rejects(rest.answerQuestion(q, [{ options: [1] }, { options: [0] }]), (e) => {
      assert.ok(e instanceof ConflictError);
      assert.equal(e.status, 409);
      assert.equal(e.code, 'NRY-0009');
      return true;
    });
    assert.deepEqual((await rest.get(q)).resolution.answer.answers, answers);
  });

  test('REST: approve binds to argumentsDigest; respond answers a connection', async () => {
    await hp.hold(ORG, { session: 's1', task: 'td1', call: 'call-d1', effect: 'eff_d1', args: { branch: 'main' } });
    await assert.rejects(
      rest.approve('eff_d1', { approved: true, argumentsDigest: '0'.repeat(64) }),
      (e) => e instanceof ArgumentsChangedError && e.code === 'NRY-0010' && e.status === 409,
    );
    const view = await rest.get('eff_d1');
    assert.deepEqual(view.call.arguments, { branch: 'main' });
    await rest.approve('eff_d1', { approved: false, reason: 'not on a Friday', argumentsDigest: view.call.argumentsDigest });
    const decided = await rest.get('eff_d1');
    assert.equal(decided.resolution.answer.approved, false);

    const id = await hp.connect(ORG, { session: 's1', task: 'tc2', call: 'call-c2', app: 'Notion', reason: 'read the spec' });
    const events = follow('tc2');
    try {
      await rest.respond(id, { connected: false }, { idempotencyKey: `respond:${id}` });
      const finished = await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.match(JSON.stringify(finished.event.data.result), /Not connected: Notion/);
    } finally {
      await events.stop();
    }
  });

  test('REST: answerMany decides each item on its own, in order; the same keys decide nothing twice', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tb1', call: 'call-b1', effect: 'eff_b1', args: { n: 1 } });
    await hp.hold(ORG, { session: 's1', task: 'tb2', call: 'call-b2', effect: 'eff_b2', args: { n: 2 } });
    await hp.hold(ORG, { session: 's1', task: 'tb3', call: 'call-b3', effect: 'eff_b3', args: { n: 3 } });
    // Someone else answers the third first.
    const bob = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(ORG, 'bob') });
    await bob.approve('eff_b3', { approved: true });
    const items = [
      { interactionId: 'eff_b1', operation: 'approve', body: { approved: true }, idempotencyKey: 'batch-1' },
      { interactionId: 'eff_b2', operation: 'approve', body: { approved: false, reason: 'later' }, idempotencyKey: 'batch-2' },
      { interactionId: 'eff_b3', operation: 'approve', body: { approved: true }, idempotencyKey: 'batch-3' },
      { interactionId: 'eff_nope', operation: 'approve', body: { approved: true }, idempotencyKey: 'batch-4' },
    ];
    const first = await rest.answerMany(items);
    assert.deepEqual(
      first.map((r) => [r.interactionId, r.status, r.code ?? null]),
      [['eff_b1', 204, null], ['eff_b2', 204, null], ['eff_b3', 409, 'NRY-0009'], ['eff_nope', 404, 'NRY-0004']],
    );
    assert.deepEqual(await rest.answerMany(items), first);
    assert.equal((await rest.get('eff_b1')).resolution.answer.approved, true);
    assert.equal((await rest.get('eff_b2')).resolution.answer.approved, false);
    assert.equal((await rest.get('eff_b3')).resolution.by, 'bob');
    await assert.rejects(rest.answerMany([]), (e) => e instanceof HoldpointError && e.code === 'NRY-0034' && e.status === 400);
  });

  test('pending() walks every page in the order the interactions were opened', async () => {
    const pager = 'pager';
    await hp.session(pager, 'sp');
    for (const n of [1, 2, 3]) {
      await hp.hold(pager, { session: 'sp', task: `tp${n}`, call: `call-p${n}`, effect: `eff_p${n}` });
    }
    const mine = new HoldpointRest({ baseUrl: hp.api, token: await hp.token(pager, 'pat') });
    const seen = [];
    for await (const item of mine.pending({ limit: 1 })) seen.push(item.interactionId);
    assert.deepEqual(seen, ['eff_p1', 'eff_p2', 'eff_p3']);
    const page = await mine.list({ limit: 2 });
    assert.equal(page.items.length, 2);
    assert.ok(page.nextCursor);
  });

  test("another organisation's token sees nothing, a bad token is Unauthenticated", async () => {
    await hp.hold(ORG, { session: 's1', task: 'ti1', call: 'call-i1', effect: 'eff_i1' });
    const other = await hp.token('globex', 'eve');
    const theirs = new HoldpointRest({ baseUrl: hp.api, token: other });
    await assert.rejects(theirs.get('eff_i1'), NotFoundError);
    for await (const item of theirs.pending()) assert.fail(`globex sees ${item.interactionId}`);
    await assert.rejects(theirs.approve('eff_i1', { approved: true }), NotFoundError);
    const theirA2A = await HoldpointA2A.connect({ baseUrl: hp.api, token: () => other });
    await assert.rejects(theirA2A.getTask('ti1'), (e) => e instanceof NotFoundError && e.code === 'NRY-0004');
    assert.equal((await rest.get('eff_i1')).state, 'pending');
    const forged = new HoldpointRest({ baseUrl: hp.api, token: `${token.slice(0, -4)}AAAA` });
    await assert.rejects(forged.list(), (e) => e instanceof UnauthenticatedError && e.status === 401);
  });

  test('events() filters by type and resumes after a given sequence', async () => {
    await hp.hold(ORG, { session: 's1', task: 'te1', call: 'call-e1', effect: 'eff_e1' });
    const controller = new AbortController();
    const first = collect(rest.events({ type: 'approval-requested', after: 0, signal: controller.signal }), controller);
    const mine = await first.waitFor('approval-requested of eff_e1', (e) => e.event.data.interactionId === 'eff_e1');
    assert.ok(first.seen.every((e) => e.name === 'approval-requested'));
    await first.stop();
    await hp.hold(ORG, { session: 's1', task: 'te2', call: 'call-e2', effect: 'eff_e2' });
    const c2 = new AbortController();
    const resumed = collect(rest.events({ type: 'approval-requested', after: mine.sequence, signal: c2.signal }), c2);
    const next = await resumed.waitFor('approval-requested of eff_e2', (e) => e.event.data.interactionId === 'eff_e2');
    assert.ok(resumed.seen.every((e) => e.sequence > mine.sequence));
    assert.equal(resumed.seen[0].sequence, next.sequence, 'the first event after eff_e1 is eff_e2');
    await resumed.stop();
  });
});

describe('the SDK behind a proxy whose timeout is shorter than the outcome wait', () => {
  /** @type {Holdpoint} */
  let hp;
  let proxy;
  let token;

  before(async () => {
    hp = new Holdpoint();
    await hp.nats();
    await hp.worker();
    await hp.ingress(await freePort());
    proxy = await impatientProxy(hp.api, 2000);
    token = await hp.token(ORG, 'ana');
    await hp.session(ORG, 's1');
  });

  after(async () => {
    await proxy?.close();
    await hp?.close();
  });

  /** Stops the worker, runs `answer`, and brings a worker back once the proxy answered 504 to `path`. */
  async function answeredThroughA504(path, answer) {
    await hp.procs.find((p) => p.name === 'holdpoint worker' && p.child.exitCode === null).stop();
    const retries = [];
    const sent = answer((r) => retries.push(r));
    await until('the proxy\'s 504', () => proxy.answers.some((a) => a.path === path && a.status === 504), 15000);
    await hp.worker();
    await sent;
    return retries;
  }

  test('REST approve: a 504 is retried with the same key and the recorded decision returns', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tx1', call: 'call-x1', effect: 'eff_x1' });
    const rest = new HoldpointRest({ baseUrl: proxy.url, token });
    const path = '/v1/interactions/eff_x1/approve';
    const retries = await answeredThroughA504(path, (onRetry) => rest.approve('eff_x1', { approved: true }, { onRetry }));
    assert.ok(retries.some((r) => r.status === 504), JSON.stringify(retries));
    const keys = new Set(proxy.answers.filter((a) => a.path === path).map((a) => a.key));
    assert.equal(keys.size, 1, 'one Idempotency-Key for every attempt');
    assert.match([...keys][0], /^sdk-/);
    const view = await new HoldpointRest({ baseUrl: hp.api, token }).get('eff_x1');
    assert.equal(view.resolution.answer.approved, true);
  });

  test('A2A answer: a 504 is retried with the same messageId and the task comes back working', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tx2', call: 'call-x2', effect: 'eff_x2' });
    const a2a = await HoldpointA2A.connect({ baseUrl: proxy.url, token });
    const retries = await answeredThroughA504('/a2a', (onRetry) => a2a.answer(
      { taskId: 'tx2', interactionId: 'eff_x2', approved: true, messageId: 'answer:eff_x2' },
      { onRetry },
    ).then((task) => assert.equal(task.status.state, TaskState.TASK_STATE_WORKING)));
    assert.ok(retries.some((r) => r.status === 504), JSON.stringify(retries));
    const view = await new HoldpointRest({ baseUrl: hp.api, token }).get('eff_x2');
    assert.equal(view.resolution.answer.approved, true);
  });

  test('retryForMs: 0 sends once and throws what came', async () => {
    await hp.hold(ORG, { session: 's1', task: 'tx3', call: 'call-x3', effect: 'eff_x3' });
    await hp.procs.find((p) => p.name === 'holdpoint worker' && p.child.exitCode === null).stop();
    const rest = new HoldpointRest({ baseUrl: proxy.url, token });
    await assert.rejects(rest.approve('eff_x3', { approved: true }, { retryForMs: 0, idempotencyKey: 'k-x3' }),
      (e) => e instanceof HoldpointError && e.status === 504);
    await hp.worker();
    // The same key afterwards: the answer was recorded meanwhile, and replays.
    await until('the recorded answer', () => rest.approve('eff_x3', { approved: true }, { idempotencyKey: 'k-x3' }).then(() => true));
  });
});
