// events() across an ingress restart: nats-server, a worker and the ingress run
// as separate processes; the ingress is stopped while the runtime keeps opening
// interactions, then started again on the same port. The iterator reconnects by
// itself with Last-Event-ID and yields what was stored meanwhile, once each.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { HoldpointRest } from '../dist/index.js';
import { Holdpoint, collect, freePort, until } from './harness.mjs';

let hp;
after(async () => {
  await hp?.close();
});

test('an event stream resumes across an ingress restart: no gap, no repeat', async () => {
  hp = new Holdpoint();
  await hp.nats();
  await hp.worker();
  const port = await freePort();
  let ingress = await hp.ingress(port);
  const rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'ana') });
  await hp.session('acme', 's1');

  const drops = [];
  const controller = new AbortController();
  const stream = collect(rest.events({
    type: 'approval-requested',
    after: 0,
    signal: controller.signal,
    reconnectDelayMs: 100,
    maxReconnectDelayMs: 400,
    onReconnect: (info) => drops.push(info),
  }), controller);
  try {
    await hp.hold('acme', { session: 's1', task: 't1', call: 'c1', effect: 'eff_before' });
    const before = await stream.waitFor('eff_before', (e) => e.event.data.interactionId === 'eff_before');

    await ingress.stop();
    await until('the stream to notice the drop', () => drops.length > 0);
    // Stored while no ingress runs: the worker and NATS carry on.
    for (const n of [1, 2, 3]) {
      await hp.hold('acme', { session: 's1', task: `t-gap${n}`, call: `c-gap${n}`, effect: `eff_gap${n}` });
    }
    ingress = await hp.ingress(port);
    await hp.hold('acme', { session: 's1', task: 't-after', call: 'c-after', effect: 'eff_after' });
    await stream.waitFor('eff_after', (e) => e.event.data.interactionId === 'eff_after', 30000);

    const ids = stream.seen.map((e) => e.event.data.interactionId);
    assert.deepEqual(ids, ['eff_before', 'eff_gap1', 'eff_gap2', 'eff_gap3', 'eff_after']);
    const sequences = stream.seen.map((e) => e.sequence);
    assert.deepEqual([...sequences].sort((a, b) => a - b), sequences, 'in stored order');
    assert.equal(new Set(sequences).size, sequences.length, 'no repeats');
    assert.ok(drops.every((d) => d.lastSequence === before.sequence), 'resumed from the last event seen');
  } finally {
    await stream.stop();
  }
});
