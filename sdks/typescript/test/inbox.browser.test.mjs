// The web inbox in a real headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core), against a real ingress, worker and nats-server. The page
// is opened with the link `holdpoint up --dev-jwt` prints. Every request the
// browser makes is checked to stay on the ingress's origin.
//
// HOLDPOINT_CHROMIUM overrides the browser; HOLDPOINT_SCREENSHOTS=<dir> saves
// the README's screenshots there.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { chromium } from 'playwright-core';

import { EditRefusedError, HoldpointRest, UnavailableError } from '../dist/index.js';
import { Holdpoint, collect, freePort, impatientProxy, until } from './harness.mjs';

const CHROMIUM = process.env.HOLDPOINT_CHROMIUM ?? '/usr/bin/chromium';
// This machine's network is closed: nothing may try to reach out.
const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const SHOTS = process.env.HOLDPOINT_SCREENSHOTS ? resolve(process.env.HOLDPOINT_SCREENSHOTS) : null;

/** A fresh browser profile and context; records page errors and any foreign request. */
async function browser(origin) {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run ops/test.sh (it installs Debian's chromium)`);
  const profile = mkdtempSync(join(tmpdir(), 'holdpoint-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1100, height: 860 },
    locale: 'en-GB',
    timezoneId: 'UTC',
  });
  const problems = [];
  const foreign = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.origin !== origin) {
      foreign.push(url.href);
      return route.abort();
    }
    return route.continue();
  });
  return {
    context,
    problems,
    foreign,
    /** A new tab; `record: false` for a tab whose own errors are the point. */
    async page({ record = true } = {}) {
      const page = await context.newPage();
      if (!record) return page;
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error' && !/Failed to load resource|ERR_ABORTED|net::/.test(m.text())) problems.push(`console: ${m.text()}`);
      });
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** The link with another token in its fragment. */
function linkWith(link, token) {
  return `${link.slice(0, link.indexOf('#'))}#token=${token}`;
}

const card = (page, id) => page.locator(`li[data-interaction-id="${id}"]`);

async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

describe('the inbox in Chromium, against holdpoint up', () => {
  /** @type {Holdpoint} */
  let hp;
  let b;
  let rest;
  let page;
  let origin;

  before(async () => {
    hp = await new Holdpoint().up();
    origin = new URL(hp.api).origin;
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'ana') });
    await hp.session('acme', 's1');
    b = await browser(origin);
    page = await b.page();
    await page.goto(hp.inboxLink);
    await page.locator('#connection.live').waitFor();
    await page.evaluate(() => { window.loadedOnce = true; });
  });

  after(async () => {
    await b?.close();
    await hp?.close();
  });

  test('the link carries the token in the fragment only; the page drops it and never logs it', async () => {
    const link = new URL(hp.inboxLink);
    assert.equal(link.pathname, '/inbox');
    assert.equal(link.search, '');
    const token = new URLSearchParams(link.hash.slice(1)).get('token');
    assert.ok(token && token.split('.').length === 3, hp.inboxLink);
    assert.equal(new URL(page.url()).hash, '', 'the page removed the token from the address');
    assert.match(await page.locator('#who').textContent(), /Signed in as dev · acme/);
    const logs = hp.logs().replace(hp.inboxLink, '');
    assert.ok(!logs.includes(token), 'the token appears in a server log');
  });

  test('a held call appears without reload, is approved with its digest, disappears, and finishes', async () => {
    const args = { repo: 'acme/app', title: 'Fix the <b>flaky</b> test', labels: ['ci', 'bug'], draft: false };
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'tb1', after: 0, signal: controller.signal }), controller);
    try {
      await hp.hold('acme', { session: 's1', task: 'tb1', call: 'call-b1', effect: 'eff_b1', args, reason: 'writes to a repository' });
      const c = card(page, 'eff_b1');
      await c.waitFor();
      assert.equal(await c.locator('h3').textContent(), 'Approve github / create_pull_request?');
      const facts = await c.locator('dl.facts').innerText();
      assert.match(facts, /Server\s+github/);
      assert.match(facts, /Tool\s+create_pull_request/);
      assert.match(facts, /Reason held\s+writes to a repository/);
      const view = await rest.get('eff_b1');
      assert.deepEqual(view.call.arguments, args);
      assert.equal(await c.locator('pre.args').textContent(), JSON.stringify(view.call.arguments, null, 2));
      assert.equal(await c.locator('pre.args b').count(), 0);
      await shot(page, 'inbox-approval');

      const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_b1/approve'));
      // By keyboard: focus the button, press Enter.
      await c.getByRole('button', { name: 'Approve' }).focus();
      await page.keyboard.press('Enter');
      const request = await posted;
      assert.deepEqual(JSON.parse(request.postData()), { approved: true, argumentsDigest: view.call.argumentsDigest });
      assert.match(request.headers().authorization, /^Bearer /);
      await c.waitFor({ state: 'detached' });

      const released = await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      assert.deepEqual(released.event.data.arguments, args);
      assert.equal(released.event.data.approvedBy, 'dev');
      await hp.toolResult('acme', 'eff_b1', { url: 'https://example.invalid/pull/7' });
      const finished = await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.equal(finished.event.data.callId, 'call-b1');
      assert.equal(await page.evaluate(() => window.loadedOnce), true, 'the page was not reloaded');
    } finally {
      await events.stop();
    }
  });

  test('a two-question ask_user keeps its options in order and is answered with the REST question body', async () => {
    const questions = [
      { text: 'Which environment first?', options: ['staging', 'canary', 'production'] },
      { text: 'What should happen to duplicates?', options: ['Merge', 'Delete', 'Keep both'], multiple: true, allowText: true },
    ];
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'tq1', after: 0, signal: controller.signal }), controller);
    try {
      const q = await hp.ask('acme', { session: 's1', task: 'tq1', call: 'call-q1', questions });
      const asked = await events.waitFor('question-asked', (e) => e.name === 'question-asked');
      const c = card(page, q);
      await c.waitFor();
      const fieldsets = c.locator('fieldset');
      assert.equal(await fieldsets.count(), 2);
      for (const [i, sent] of asked.event.data.questions.entries()) {
        const fs = fieldsets.nth(i);
        assert.equal(await fs.locator('legend').textContent(), `${i + 1}. ${sent.text}`);
        assert.deepEqual(await fs.locator('.option label').allTextContents(), sent.options, 'options in engine order');
        const type = sent.multiple ? 'checkbox' : 'radio';
        assert.equal(await fs.locator(`input[type=${type}]`).count(), sent.options.length);
        assert.equal(await fs.locator('textarea').count(), sent.allowText ? 1 : 0, 'free text only where allowed');
      }
      await fieldsets.nth(0).getByLabel('production').check();
      await fieldsets.nth(1).getByLabel('Merge').check();
      await fieldsets.nth(1).getByLabel('Keep both').check();
      await fieldsets.nth(1).getByLabel('In your own words (optional)').fill('Keep both and reconcile nightly.');
      await shot(page, 'inbox-question');
      const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith(`/v1/questions/${q}/answer`));
      await c.getByRole('button', { name: 'Send answers' }).click();
      const body = (await posted).postData();
      assert.equal(body, JSON.stringify({ answers: [{ options: [2] }, { options: [0, 2], text: 'Keep both and reconcile nightly.' }] }));
      await c.waitFor({ state: 'detached' });
      await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.deepEqual((await rest.get(q)).resolution.answer.answers, JSON.parse(body).answers);
    } finally {
      await events.stop();
    }
  });

  test('a connection shows the app and the reason, and Not connected answers it', async () => {
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'tc1', after: 0, signal: controller.signal }), controller);
    try {
      const id = await hp.connect('acme', { session: 's1', task: 'tc1', call: 'call-c1', app: 'Linear', reason: 'file the bugs it finds' });
      const c = card(page, id);
      await c.waitFor();
      assert.equal(await c.locator('h3').textContent(), 'Connect Linear: file the bugs it finds');
      const facts = await c.locator('dl.facts').innerText();
      assert.match(facts, /App\s+Linear/);
      assert.match(facts, /Reason\s+file the bugs it finds/);
      await shot(page, 'inbox-connection');
      await c.getByRole('button', { name: 'Not connected' }).click();
      await c.waitFor({ state: 'detached' });
      const finished = await events.waitFor('tool-call-finished', (e) => e.name === 'tool-call-finished');
      assert.match(JSON.stringify(finished.event.data.result), /Not connected: Linear/);
    } finally {
      await events.stop();
    }
  });

  test("another organisation's token sees nothing of acme's", async () => {
    await hp.hold('acme', { session: 's1', task: 'tx1', call: 'call-x1', effect: 'eff_x1' });
    await card(page, 'eff_x1').waitFor();
    const other = await b.page();
    await other.goto(linkWith(hp.inboxLink, await hp.token('globex', 'eve')));
    await other.locator('#connection.live').waitFor();
    assert.match(await other.locator('#who').textContent(), /eve · globex/);
    await hp.session('globex', 'g1');
    await hp.hold('acme', { session: 's1', task: 'tx2', call: 'call-x2', effect: 'eff_x2' });
    await hp.hold('globex', { session: 'g1', task: 'tg1', call: 'call-g1', effect: 'eff_g1', tool: 'merge' });
    // globex's own call arrives live; acme's two never do.
    await card(other, 'eff_g1').waitFor();
    await card(page, 'eff_x2').waitFor();
    assert.deepEqual(await other.locator('li[data-interaction-id]').evaluateAll((l) => l.map((e) => e.dataset.interactionId)), ['eff_g1']);
    assert.equal(await card(page, 'eff_g1').count(), 0);
    await other.close();
  });

  // Control characters never reach a page: a runtime cannot open with them (NRY-0001,
  // tests/integration/text.rs). HTML and a bidi override can, and show as text.
  test('a runtime-supplied prompt holding <script> and a bidi override is shown as text', async () => {
    const hostile = '<script>window.pwned = 1</script> <img src=x id=evil> \u202eevil';
    const q = await hp.ask('acme', {
      session: 's1', task: 'th1', call: 'call-h1',
      questions: [{ text: hostile, options: ['<b>bold</b>', 'two\u202ethree'], allowText: true }],
    });
    await hp.hold('acme', {
      session: 's1', task: 'th2', call: 'call-h2', effect: 'eff_h2',
      reason: '</dd><script>window.pwned = 2</script>', args: { note: '</pre><img src=x id=evil2>' },
    });
    const c = card(page, q);
    await c.waitFor();
    const heading = await c.locator('h3').textContent();
    assert.equal(heading, '<script>window.pwned = 1</script> <img src=x id=evil> ⟨U+202E⟩evil');
    assert.deepEqual(await c.locator('.option label').allTextContents(), ['<b>bold</b>', 'two⟨U+202E⟩three']);
    const held = card(page, 'eff_h2');
    await held.waitFor();
    assert.match(await held.locator('dl.facts').innerText(), /<\/dd><script>window\.pwned = 2<\/script>/);
    assert.equal(await held.locator('pre.args').textContent(), JSON.stringify({ note: '</pre><img src=x id=evil2>' }, null, 2));
    await shot(page, 'inbox-hostile-text');
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.equal(await page.locator('main script, main img, main b, #evil, #evil2').count(), 0);
  });

  test('errors show the NRY title and message: a misfit answer, then 401 for a bad token', async () => {
    const q = await hp.ask('acme', {
      session: 's1', task: 'tf1', call: 'call-f1',
      questions: [{ text: 'Pick one', options: ['a', 'b'] }],
    });
    const c = card(page, q);
    await c.waitFor();
    await c.getByRole('button', { name: 'Send answer' }).click();
    const alert = c.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /^Answer does not fit \(NRY-0003\)/);
    assert.equal(await c.getByRole('button', { name: 'Send answer' }).isEnabled(), true);

    const bad = await b.page();
    await bad.goto(linkWith(hp.inboxLink, 'not-a-token'));
    await bad.locator('#sign-in').waitFor();
    assert.match(await bad.locator('#sign-in-why').textContent(), /^Unauthenticated \(NRY-0011\): /);
    await bad.close();
  });

  test('the browser enforces the policy: no HTML sinks, no inline script', async () => {
    const response = await fetch(`${origin}/inbox`);
    assert.match(response.headers.get('content-security-policy'), /require-trusted-types-for 'script'/);
    const probe = await b.page({ record: false });
    await probe.goto(`${origin}/inbox`);
    const outcome = await probe.evaluate(() => {
      const tried = {};
      try {
        document.body.insertAdjacentHTML('beforeend', '<b id="sink">x</b>');
        tried.sink = 'allowed';
      } catch (e) {
        tried.sink = e.name;
      }
      const s = document.createElement('script');
      try {
        s.textContent = 'window.inline = 1';
        document.body.append(s);
      } catch (e) {
        tried.inline = e.name;
      }
      tried.ran = window.inline === 1;
      return tried;
    });
    assert.equal(outcome.sink, 'TypeError');
    assert.equal(outcome.ran, false);
    await probe.close();
  });

  test('Edit, then approve: invalid JSON and non-objects are refused in the page, the diff is shown, the edit goes with the shown digest', async () => {
    const args = { repo: 'acme/app', title: 'Fix', labels: ['ci'], draft: false };
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'te1', after: 0, signal: controller.signal }), controller);
    const posts = [];
    const onRequest = (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_e1/approve')) posts.push(r);
    };
    page.on('request', onRequest);
    try {
      await hp.hold('acme', { session: 's1', task: 'te0', call: 'call-e0', effect: 'eff_e0', args });
      await hp.hold('acme', { session: 's1', task: 'te1', call: 'call-e1', effect: 'eff_e1', args, editable: true });
      const fixed = card(page, 'eff_e0');
      const c = card(page, 'eff_e1');
      await fixed.waitFor();
      await c.waitFor();
      assert.equal(await fixed.getByRole('button', { name: 'Edit', exact: true }).count(), 0, 'a hold without editable offers no Edit');
      const view = await rest.get('eff_e1');
      assert.equal(view.call.editable, true);

      const edit = c.getByRole('button', { name: 'Edit', exact: true });
      await edit.click();
      assert.equal(await edit.getAttribute('aria-expanded'), 'true');
      const box = c.getByLabel('Edited arguments (JSON object)');
      assert.deepEqual(JSON.parse(await box.inputValue()), args, 'the editor starts from the held arguments');
      assert.equal(await c.locator('ul.diff').innerText(), 'No changes.');
      const go = c.getByRole('button', { name: 'Approve with edits' });
      const error = c.locator('.edit-error');

      // Refused before sending: not JSON, then JSON that is not an object.
      for (const [typed, said] of [['{"repo": ', /^Not valid JSON/], ['[1, 2]', /must be a JSON object/], ['null', /must be a JSON object/]]) {
        await box.fill(typed);
        assert.match(await error.textContent(), said, typed);
        assert.equal(await box.getAttribute('aria-invalid'), 'true');
        await go.click();
        assert.equal(await c.count(), 1, 'the card stays');
      }
      assert.equal(posts.length, 0, 'nothing was sent for an edit the page refused');

      // A real edit: the diff against the held arguments, then the edit with the shown digest.
      const edited = { repo: 'acme/app', title: 'Fix the <b>login</b> bug', draft: true, reviewers: ['bo'] };
      await box.fill(JSON.stringify(edited, null, 2));
      assert.equal(await error.isHidden(), true);
      const lines = (await c.locator('ul.diff li').allInnerTexts()).map((l) => l.trim());
      assert.deepEqual(lines.sort(), [
        '+ reviewers: ["bo"]',
        '~ draft: false → true',
        '~ title: "Fix" → "Fix the <b>login</b> bug"',
        '− labels: ["ci"]',
      ].sort());
      assert.equal(await c.locator('ul.diff b').count(), 0, 'the diff is text, never markup');
      await shot(page, 'inbox-edit');
      const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_e1/approve'));
      await go.click();
      const request = await posted;
      assert.deepEqual(JSON.parse(request.postData()), {
        approved: true, argumentsDigest: view.call.argumentsDigest, editedArguments: edited,
      });
      await c.waitFor({ state: 'detached' });
      assert.equal(posts.length, 1);

      const released = await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      assert.deepEqual(released.event.data.arguments, edited);
      assert.equal(released.event.data.edited, true);
      assert.equal(released.event.data.argumentsDigest, view.call.argumentsDigest);
      assert.match(released.event.data.editedArgumentsDigest, /^[0-9a-f]{64}$/);
      assert.notEqual(released.event.data.editedArgumentsDigest, view.call.argumentsDigest);
      assert.deepEqual((await rest.get('eff_e1')).resolution.answer.editedArguments, edited);
      // The SDK refuses an edit of the hold that forbids it, and nothing is decided.
      await assert.rejects(
        rest.approve('eff_e0', { approved: true, argumentsDigest: view.call.argumentsDigest, editedArguments: { repo: 'x' } }),
        (e) => e instanceof EditRefusedError && e.code === 'NRY-0028',
      );
      assert.equal((await rest.get('eff_e0')).state, 'pending');
      await rest.approve('eff_e0', { approved: false, reason: 'cleanup' });
    } finally {
      page.off('request', onRequest);
      await events.stop();
    }
  });

  test('a card names its agent and session, and counts down to what its deadline decides', async () => {
    await hp.hold('acme', { session: 's1', task: 'tdl1', call: 'call-dl1', effect: 'eff_dl1', args: {}, agent: 'coder', expiresIn: 600 });
    const c = card(page, 'eff_dl1');
    await c.waitFor();
    const facts = await c.locator('dl.facts').innerText();
    assert.match(facts, /Agent\s+coder/);
    assert.match(facts, /Session\s+s1/);
    const deadline = c.locator('.deadline');
    const first = await deadline.textContent();
    assert.match(first, /^Deadline in 9m \d+s: then it denies the call\.$/);
    // It counts down in place: the text changes within a few seconds.
    await page.waitForFunction(
      ([id, before]) => document.querySelector(`li[data-interaction-id="${id}"] .deadline`)?.textContent !== before,
      ['eff_dl1', first],
      { timeout: 5000 },
    );
    assert.match(await deadline.textContent(), /^Deadline in 9m \d+s: then it denies the call\.$/);
    // Without a deadline there is no such line.
    await hp.hold('acme', { session: 's1', task: 'tdl2', call: 'call-dl2', effect: 'eff_dl2', args: {} });
    await card(page, 'eff_dl2').waitFor();
    assert.equal(await card(page, 'eff_dl2').locator('.deadline').count(), 0);
    await rest.approve('eff_dl1', { approved: false, reason: 'cleanup' });
    await rest.approve('eff_dl2', { approved: false, reason: 'cleanup' });
    await c.waitFor({ state: 'detached' });
  });

  test('a question with a form: native inputs checked in the page, and a value the page lets through refused by the server', async () => {
    const schema = {
      type: 'object',
      properties: {
        email: { type: 'string', format: 'email', title: 'Work email' },
        seats: { type: 'integer', minimum: 1, maximum: 10, title: 'Seats' },
        plan: { type: 'string', enum: ['team', 'business'], enumNames: ['Team', 'Business'] },
        renew: { type: 'boolean', title: 'Renew yearly' },
      },
      required: ['email', 'seats'],
    };
    const q = await hp.ask('acme', { session: 's1', task: 'tform1', call: 'call-form1', questions: [{ text: 'Who gets the licence?', schema }] });
    const c = card(page, q);
    await c.waitFor();
    assert.equal(await c.locator('h3').textContent(), 'Who gets the licence?');
    const email = c.getByLabel('Work email (required)');
    const seats = c.getByLabel('Seats (required)');
    assert.equal(await email.getAttribute('type'), 'email');
    assert.equal(await seats.getAttribute('type'), 'number');
    assert.equal(await seats.getAttribute('max'), '10');
    assert.equal(await c.locator('select option').count(), 3);
    const posts = [];
    const onRequest = (r) => { if (r.method() === 'POST' && r.url().endsWith(`/v1/interactions/${q}/respond`)) posts.push(r); };
    page.on('request', onRequest);
    try {
      // Out of bounds: the page refuses it, nothing is sent.
      await email.fill('ana@acme.example');
      await seats.fill('0');
      await c.getByRole('button', { name: 'Send answer' }).click();
      assert.equal(await seats.evaluate((i) => i.validity.valid), false);
      assert.equal(posts.length, 0);
      // The browser's email check lets `ana@acme` through; the server's does not.
      await email.fill('ana@acme');
      await seats.fill('3');
      await c.getByLabel('Renew yearly').check();
      const refused = page.waitForResponse((r) => r.url().endsWith(`/v1/interactions/${q}/respond`));
      await c.getByRole('button', { name: 'Send answer' }).click();
      const reply = await refused;
      assert.equal(reply.status(), 400);
      const body = await reply.json();
      assert.equal(body.code, 'NRY-0036');
      assert.equal(body.pointer, '/email');
      assert.deepEqual(JSON.parse(posts[0].postData()), { value: { email: 'ana@acme', seats: 3, renew: true } });
      const problem = c.locator('.problem');
      await problem.waitFor();
      assert.match(await problem.textContent(), /NRY-0036/);
      assert.match(await problem.textContent(), /\/email/);
      assert.equal((await rest.get(q)).state, 'pending');
      // Fixed, it is answered.
      await email.fill('ana@acme.example');
      await c.locator('select').selectOption('business');
      await c.getByRole('button', { name: 'Send answer' }).click();
      await c.waitFor({ state: 'detached' });
      const v = await rest.get(q);
      assert.deepEqual(v.resolution.answer.value, { email: 'ana@acme.example', seats: 3, plan: 'business', renew: true });
    } finally {
      page.off('request', onRequest);
    }
  });

  test('several approvals selected are approved together, each card showing its own outcome', async () => {
    for (const n of [1, 2, 3]) {
      await hp.hold('acme', { session: 's1', task: `tm${n}`, call: `call-m${n}`, effect: `eff_m${n}`, args: { n } });
    }
    // A tab that learns nothing new after its first listing (its event stream and
    // later listings cut), so a card answered elsewhere stays on it until pressed.
    const tab = await b.page({ record: false });
    try {
      await tab.route('**/v1/events*', (route) => route.abort());
      await tab.goto(hp.inboxLink);
      for (const n of [1, 2, 3]) await card(tab, `eff_m${n}`).waitFor();
      await tab.route('**/v1/interactions?*', (route) => route.abort());
      // Someone else denies the third meanwhile.
      const bob = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'bob') });
      await bob.approve('eff_m3', { approved: false, reason: 'mine' });

      assert.equal(await tab.locator('#bulk').isHidden(), true);
      for (const n of [1, 2, 3]) await card(tab, `eff_m${n}`).getByLabel('Select for approving or denying together').check();
      assert.equal(await tab.locator('#bulk-count').textContent(), '3 selected');
      const posted = tab.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/answers'));
      const answered = tab.waitForResponse((r) => r.url().endsWith('/v1/answers'));
      await tab.getByRole('button', { name: 'Approve selected' }).click();
      const sent = JSON.parse((await posted).postData());
      const views = await Promise.all([1, 2, 3].map((n) => rest.get(`eff_m${n}`)));
      assert.deepEqual(
        sent.items.map((i) => [i.interactionId, i.operation, i.body]),
        views.map((v) => [v.interactionId, 'approve', { approved: true, argumentsDigest: v.call.argumentsDigest }]),
      );
      assert.equal(new Set(sent.items.map((i) => i.idempotencyKey)).size, 3, 'a key per item');
      const reply = await (await answered).json();
      assert.deepEqual(reply.results.map((r) => [r.interactionId, r.status, r.code ?? null]),
        [['eff_m1', 204, null], ['eff_m2', 204, null], ['eff_m3', 409, 'NRY-0009']]);

      await card(tab, 'eff_m1').waitFor({ state: 'detached' });
      await card(tab, 'eff_m2').waitFor({ state: 'detached' });
      const third = card(tab, 'eff_m3');
      const problem = third.locator('.problem');
      await problem.waitFor();
      assert.match(await problem.textContent(), /NRY-0009/);
      assert.match(await problem.textContent(), /no longer waiting for you/);
      assert.equal(await third.getByLabel('Select for approving or denying together').isDisabled(), true);
      for (const n of [1, 2]) {
        const v = await rest.get(`eff_m${n}`);
        assert.equal(v.resolution.answer.approved, true);
        assert.equal(v.resolution.by, 'dev');
      }
      const v3 = await rest.get('eff_m3');
      assert.equal(v3.resolution.by, 'bob');
      assert.equal(v3.resolution.answer.approved, false);
    } finally {
      await tab.close();
    }
  });

  test('remember: the choice is offered where the rules allow one, is refused with an edit, and a remembered approval decides the next matching call', async () => {
    const ana = await hp.token('acme', 'ana');
    const asAna = (path, init = {}) => fetch(`${hp.api}${path}`, { ...init, headers: { Authorization: `Bearer ${ana}`, ...init.headers } });
    // A session and tools of their own, so the rule written here decides nothing of the other tests.
    await hp.session('acme', 'sr1');
    await hp.hold('acme', { session: 'sr1', task: 'trm1', call: 'call-rm1', effect: 'eff_rm1', server: 'deploys', tool: 'ship', args: { env: 'staging' }, agent: 'shipper' });
    await hp.hold('acme', { session: 'sr1', task: 'trm0', call: 'call-rm0', effect: 'eff_rm0', server: 'deploys', tool: 'inspect', args: { env: 'staging' }, editable: true });
    const c = card(page, 'eff_rm1');
    const plain = card(page, 'eff_rm0');
    await c.waitFor();
    await plain.waitFor();
    assert.deepEqual(await c.locator('fieldset.remember label').allTextContents(),
      ['Only this call', 'This session (sr1)', 'This agent (shipper), in any session']);
    assert.equal(await c.getByLabel('Only this call').isChecked(), true, 'nothing is remembered unless chosen');
    // Without an agent named by the runtime, there is no agent choice (the server would refuse it, NRY-0026).
    assert.deepEqual(await plain.locator('fieldset.remember label').allTextContents(), ['Only this call', 'This session (sr1)']);

    // An edit is never remembered: the page refuses it before sending anything.
    const edits = [];
    const onRequest = (r) => { if (r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_rm0/approve')) edits.push(r); };
    page.on('request', onRequest);
    try {
      await plain.getByLabel('This session (sr1)').check();
      await plain.getByRole('button', { name: 'Edit', exact: true }).click();
      await plain.getByLabel('Edited arguments (JSON object)').fill('{"env": "prod"}');
      await plain.getByRole('button', { name: 'Approve with edits' }).click();
      assert.match(await plain.locator('.edit-error').textContent(), /^An edit is never remembered/);
      assert.equal(edits.length, 0, 'nothing was sent');
      assert.equal((await rest.get('eff_rm0')).state, 'pending');
    } finally {
      page.off('request', onRequest);
    }
    await shot(page, 'inbox-remember');

    const view = await rest.get('eff_rm1');
    await c.getByLabel('This session (sr1)').check();
    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_rm1/approve'));
    await c.getByRole('button', { name: 'Approve', exact: true }).click();
    assert.deepEqual(JSON.parse((await posted).postData()), {
      approved: true, argumentsDigest: view.call.argumentsDigest, remember: { scope: 'session' },
    });
    await c.waitFor({ state: 'detached' });
    const rules = await (await asAna('/v1/rules')).json();
    const rule = rules.items.find((r) => r.fromInteraction === 'eff_rm1');
    assert.ok(rule, JSON.stringify(rules));
    assert.deepEqual([rule.effect, rule.server, rule.tool, rule.scope, rule.session, rule.createdBy],
      ['allow', 'deploys', 'ship', 'session', 'sr1', 'dev']);

    // The next matching call in the session is decided by the rule at once: no person, no card.
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'trm2', after: 0, signal: controller.signal }), controller);
    try {
      await hp.hold('acme', { session: 'sr1', task: 'trm2', call: 'call-rm2', effect: 'eff_rm2', server: 'deploys', tool: 'ship', args: { env: 'prod' } });
      const released = await events.waitFor('tool-call-released', (e) => e.name === 'tool-call-released');
      assert.equal(released.event.data.approvedBy, `dev (rule ${rule.id})`);
      assert.deepEqual(released.event.data.arguments, { env: 'prod' });
      const decided = await rest.get('eff_rm2');
      assert.equal(decided.resolution.resolvedBy, 'rule');
      assert.equal(await card(page, 'eff_rm2').count(), 0);
    } finally {
      await events.stop();
    }
    // A call of another session is not the rule's: it waits for a person.
    await hp.session('acme', 'sr2');
    await hp.hold('acme', { session: 'sr2', task: 'trm3', call: 'call-rm3', effect: 'eff_rm3', server: 'deploys', tool: 'ship', args: { env: 'prod' } });
    await card(page, 'eff_rm3').waitFor();
    assert.equal((await rest.get('eff_rm3')).state, 'pending');
    // Cleanup: the rule revoked, the others denied.
    assert.equal((await asAna(`/v1/rules/${rule.id}`, { method: 'DELETE' })).status, 200);
    await rest.approve('eff_rm0', { approved: false, reason: 'cleanup' });
    await rest.approve('eff_rm3', { approved: false, reason: 'cleanup' });
    await plain.waitFor({ state: 'detached' });
    await card(page, 'eff_rm3').waitFor({ state: 'detached' });
  });

  test("History: what was decided, by whom or by which rule or deadline, when, with what arguments, paged, and never another organisation's", async () => {
    // More decisions than a page holds: 30 held calls, denied together by ana.
    await hp.session('acme', 'shist');
    const ids = [];
    for (let n = 1; n <= 30; n++) {
      ids.push(await hp.hold('acme', { session: 'shist', task: `thist${n}`, call: `call-hist${n}`, effect: `eff_hist${n}`, server: 'files', tool: 'delete', args: { path: `/tmp/${n}` } }));
    }
    const denied = await rest.answerMany(ids.map((id) => ({ interactionId: id, operation: 'approve', body: { approved: false, reason: 'not today' } })));
    assert.deepEqual(denied.map((r) => r.status), ids.map(() => 204));
    // One decided by its deadline.
    const controller = new AbortController();
    const events = collect(rest.events({ task: 'thx1', after: 0, signal: controller.signal }), controller);
    try {
      await hp.hold('acme', { session: 'shist', task: 'thx1', call: 'call-hx1', effect: 'eff_hx1', server: 'files', tool: 'purge', args: { all: true }, expiresIn: 1 });
      await events.waitFor('the deadline to decide', (e) => e.name === 'interaction-resolved' || e.name === 'interaction-closed', 20000);
    } finally {
      await events.stop();
    }
    // Another organisation decides too: a person's approval that writes a rule, and the call the rule then decides.
    const globex = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('globex', 'gus') });
    await hp.session('globex', 'ghist');
    await hp.hold('globex', { session: 'ghist', task: 'tgh1', call: 'call-gh1', effect: 'eff_gh1', server: 'files', tool: 'delete', args: { path: '/globex' } });
    await until('globex\'s hold to be listed', async () => (await globex.get('eff_gh1')).state === 'pending');
    await globex.approve('eff_gh1', { approved: true, remember: { scope: 'session' } });
    await hp.hold('globex', { session: 'ghist', task: 'tgh2', call: 'call-gh2', effect: 'eff_gh2', server: 'files', tool: 'delete', args: { path: '/globex/2' } });
    await until('globex\'s rule to decide', async () => (await globex.get('eff_gh2')).resolution?.resolvedBy === 'rule');

    const lists = [];
    const onRequest = (r) => {
      const u = new URL(r.url());
      if (u.pathname === '/v1/interactions' || u.pathname === '/v1/audit') lists.push(u);
    };
    page.on('request', onRequest);
    try {
      await page.getByRole('button', { name: 'Show history' }).click();
      const history = page.locator('#history');
      const audit = page.locator('#audit');
      await page.locator('#history-body[aria-busy="false"]').waitFor();
      assert.equal(await page.locator('#history-more').isVisible(), true, 'more than a page: the next one is offered');
      assert.equal(await page.locator('#audit-more').isVisible(), true, 'the audit too');
      for (const more of ['#history-more', '#audit-more']) {
        while (await page.locator(more).isVisible()) {
          await page.locator(more).click();
          await page.locator('#history-body[aria-busy="false"]').waitFor();
        }
      }
      const decided = lists.filter((u) => u.pathname === '/v1/interactions');
      assert.ok(decided.length >= 2, 'read in pages');
      assert.ok(decided.every((u) => u.searchParams.get('state') === 'all' && u.searchParams.get('limit') === '25'));
      assert.equal(decided[0].searchParams.get('cursor'), null);
      assert.ok(decided.slice(1).every((u) => u.searchParams.get('cursor')), 'later pages follow nextCursor');
      const auditReads = lists.filter((u) => u.pathname === '/v1/audit');
      assert.ok(auditReads.length >= 2 && auditReads[0].searchParams.get('after') === '0');

      // Every one of the 30 is there once, denied by ana, with its arguments.
      for (const [i, id] of ids.entries()) {
        const entry = history.locator(`li[data-interaction-id="${id}"]`);
        assert.equal(await entry.count(), 1, id);
        assert.equal(await entry.locator('.outcome').textContent(), 'Denied by ana');
        assert.equal(await entry.locator('pre.held-args').textContent(), JSON.stringify({ path: `/tmp/${i + 1}` }, null, 2));
        assert.match(await entry.locator('dl.facts').innerText(), /Reason given\s+not today/);
      }
      // The deadline's decision, and when.
      const expired = history.locator('li[data-interaction-id="eff_hx1"]');
      assert.equal(await expired.locator('.outcome').textContent(), 'Denied by the deadline (nobody answered in time)');
      const at = (await rest.get('eff_hx1')).resolution.at;
      assert.match(await expired.locator('dl.facts').innerText(), new RegExp(`When\\s+${new Date(at).toLocaleString('en-GB', { timeZone: 'UTC' }).replace(/[/]/g, '\\/')}`));
      // The audit has the same decisions, by person and by deadline.
      const auditOf = (id) => audit.locator(`li[data-interaction-id="${id}"]`);
      assert.equal(await auditOf('eff_hist1').locator('h4').textContent(), 'Denied: files / delete');
      assert.match(await auditOf('eff_hist1').locator('dl.facts').innerText(), /Decided by\s+ana/);
      assert.equal(await auditOf('eff_hx1').locator('h4').textContent(), 'Expired: files / purge');
      assert.match(await auditOf('eff_hx1').locator('dl.facts').innerText(), /Decided by\s+the deadline/);
      // The rule written earlier in this page (when that test ran) is in the audit with its author.
      const written = audit.locator('li[data-rule-id]');
      for (const r of await written.all()) assert.match(await r.locator('dl.facts').innerText(), /Written by\s+dev|Revoked by\s+ana/);

      // Nothing of globex's, anywhere on acme's page.
      for (const id of ['eff_gh1', 'eff_gh2']) assert.equal(await page.locator(`[data-interaction-id="${id}"]`).count(), 0, id);
      assert.doesNotMatch(await page.locator('.history').innerText(), /gus|globex/);
    } finally {
      page.off('request', onRequest);
    }

    // globex's own History shows its person's and its rule's decisions, and nothing of acme's.
    const other = await b.page();
    try {
      await other.goto(linkWith(hp.inboxLink, await hp.token('globex', 'gus')));
      await other.locator('#connection.live').waitFor();
      await other.getByRole('button', { name: 'Show history' }).click();
      await other.locator('#history-body[aria-busy="false"]').waitFor();
      const mine = await other.locator('#history li[data-interaction-id]').evaluateAll((l) => l.map((e) => e.dataset.interactionId));
      assert.deepEqual(mine.sort(), ['eff_gh1', 'eff_gh2']);
      assert.equal(await other.locator('#history li[data-interaction-id="eff_gh1"] .outcome').textContent(), 'Approved by gus');
      assert.match(await other.locator('#history li[data-interaction-id="eff_gh2"] .outcome').textContent(), /^Approved by a remembered rule: gus \(rule rul_[0-9a-f]{32}\)$/);
      const audited = await other.locator('#audit li').evaluateAll((l) => l.map((e) => e.dataset.interactionId || `rule:${e.dataset.ruleId}`));
      assert.equal(audited.length, 3, JSON.stringify(audited));
      assert.deepEqual(audited.filter((x) => !x.startsWith('rule:')).sort(), ['eff_gh1', 'eff_gh2']);
      assert.doesNotMatch(await other.locator('.history').innerText(), /eff_hist|eff_hx1|eff_rm|acme|\bana\b/);
    } finally {
      await other.close();
    }
  });

  test('assignees: cards for you come first, cards for others offer nothing to press, and a reassignment redraws the card', async () => {
    const position = (id) => page.locator('#pending > li').evaluateAll((l, want) => l.findIndex((e) => e.dataset.interactionId === want), id);
    await hp.hold('acme', { session: 's1', task: 'tas1', call: 'call-as1', effect: 'eff_as_all', args: { n: 1 } });
    await hp.hold('acme', { session: 's1', task: 'tas2', call: 'call-as2', effect: 'eff_as_other', args: { n: 2 }, people: ['zoe'], groups: ['payments'] });
    await hp.hold('acme', { session: 's1', task: 'tas3', call: 'call-as3', effect: 'eff_as_me', args: { n: 3 }, people: ['dev'] });
    const [all, other, mine] = ['eff_as_all', 'eff_as_other', 'eff_as_me'].map((id) => card(page, id));
    await Promise.all([all.waitFor(), other.waitFor(), mine.waitFor()]);

    // For you first: before every card that is not for this person.
    assert.equal(await position('eff_as_me'), 0, 'the card for you comes first');
    assert.ok(await position('eff_as_all') > 0 && await position('eff_as_other') > 0);
    assert.equal(await mine.locator('.for-you').textContent(), 'For you');
    assert.equal(await mine.getByRole('button', { name: 'Approve' }).count(), 1);
    // For others: shown, with nothing to press or select, saying who may answer.
    assert.equal(await other.locator('button, input, textarea, select').count(), 0);
    assert.equal(await other.locator('.assigned-others').textContent(), 'Assigned to zoe and group payments: you cannot answer this one.');
    assert.equal(await all.locator('.for-you').count(), 0);
    assert.equal(await all.getByRole('button', { name: 'Approve' }).count(), 1);
    await shot(page, 'inbox-assignees');

    // The runtime reassigns it to this person: the card is drawn again, for you.
    assert.equal(await hp.runtime('acme', 'reassign', 'eff_as_other', '--assign-person', 'dev'), 'reassigned eff_as_other');
    await other.locator('.for-you').waitFor();
    assert.ok(await position('eff_as_other') < await position('eff_as_all'), 'now for you: before the card open to all');
    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_as_other/approve'));
    await other.getByRole('button', { name: 'Approve' }).click();
    await posted;
    await other.waitFor({ state: 'detached' });
    assert.equal((await rest.get('eff_as_other')).resolution.by, 'dev');
    // Leave nothing waiting for the tests after this one.
    for (const c of [mine, all]) {
      await c.getByRole('button', { name: 'Deny' }).click();
      await c.waitFor({ state: 'detached' });
    }
  });

  test('two-person approvals: the card counts who approved, redraws when someone else does, and never offers a second approval', async () => {
    const approveAs = async (person, effect, key) => {
      const response = await fetch(`${hp.api}/v1/interactions/${effect}/approve`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${await hp.token('acme', person)}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
        body: JSON.stringify({ approved: true }),
      });
      return { status: response.status, body: response.status === 204 ? null : await response.json() };
    };
    // Someone else approves first: the card shows it without a reload.
    await hp.hold('acme', { session: 's1', task: 'tnm1', call: 'call-nm1', effect: 'eff_nm1', args: { amount: 9000 }, approvals: 2 });
    const first = card(page, 'eff_nm1');
    await first.waitFor();
    assert.match(await first.locator('dl.facts').innerText(), /Approvals\s+0 of 2 approvals/);
    assert.equal(await first.locator('fieldset').count(), 0, 'nothing to remember on a two-person hold');
    assert.deepEqual(await approveAs('ana', 'eff_nm1', 'k-ana-nm1'), { status: 202, body: { interactionId: 'eff_nm1', approvals: { given: 1, required: 2 } } });
    await page.waitForFunction(() => document.querySelector('li[data-interaction-id="eff_nm1"] dl.facts')?.innerText.includes('1 of 2 approvals (ana)'));
    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/v1/interactions/eff_nm1/approve'));
    await card(page, 'eff_nm1').getByRole('button', { name: 'Approve' }).click();
    await posted;
    await card(page, 'eff_nm1').waitFor({ state: 'detached' });
    const done = await rest.get('eff_nm1');
    assert.equal(done.state, 'resolved');
    assert.deepEqual(done.approvals.given.map((g) => g.by), ['ana', 'dev']);

    // This person approves first: the card stays, says so, and offers only Deny.
    await hp.hold('acme', { session: 's1', task: 'tnm2', call: 'call-nm2', effect: 'eff_nm2', args: { amount: 9001 }, approvals: 2 });
    await card(page, 'eff_nm2').waitFor();
    await card(page, 'eff_nm2').getByRole('button', { name: 'Approve' }).click();
    await page.locator('li[data-interaction-id="eff_nm2"] .approved-already').waitFor();
    const mine = card(page, 'eff_nm2');
    assert.equal(await mine.locator('.approved-already').textContent(), 'You approved. It waits for 1 more person; you may still deny it.');
    assert.equal(await mine.getByRole('button', { name: 'Approve' }).count(), 0);
    assert.equal(await mine.getByRole('button', { name: 'Deny' }).count(), 1);
    assert.equal(await mine.locator('input.select').count(), 0, 'not offered for approving together');
    assert.match(await mine.locator('dl.facts').innerText(), /1 of 2 approvals \(dev\)/);
    await shot(page, 'inbox-two-person');
    // The other person completes it: the card leaves.
    assert.equal((await approveAs('ana', 'eff_nm2', 'k-ana-nm2')).status, 204);
    await mine.waitFor({ state: 'detached' });
    assert.equal((await rest.get('eff_nm2')).resolution.by, 'ana');
  });

  test('the page asked for nothing outside the ingress and raised no errors', () => {
    assert.deepEqual(b.foreign, []);
    assert.deepEqual(b.problems, []);
  });
});

describe('the inbox in Chromium, against separate processes', () => {
  let hp;
  let b;
  let rest;
  let page;

  before(async () => {
    hp = new Holdpoint();
    await hp.nats();
    await hp.worker();
    await hp.ingress(await freePort(), ['--outcome-timeout-ms', '1000']);
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'ana') });
    await hp.session('acme', 's1');
    b = await browser(new URL(hp.api).origin);
    page = await b.page();
    await page.goto(`${hp.api}/inbox#token=${await hp.token('acme', 'dev')}`);
    await page.locator('#connection.live').waitFor();
  });

  after(async () => {
    await b?.close();
    await hp?.close();
  });

  test('503: the page shows it, retries with the same key, and the answer resolves once', async () => {
    await hp.hold('acme', { session: 's1', task: 'tu1', call: 'call-u1', effect: 'eff_u1' });
    const c = card(page, 'eff_u1');
    await c.waitFor();
    await hp.procs.find((p) => p.name === 'holdpoint worker').stop();
    const keys = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/v1/interactions/eff_u1/approve')) keys.push(r.headers()['idempotency-key']);
    });
    await c.getByRole('button', { name: 'Approve' }).click();
    const sending = c.getByRole('status');
    // Two attempts answered 503 (the third is waiting): then the worker comes back.
    // Meanwhile the card says it is sending, never that it failed.
    await until('two 503s', async () => /^Sending… not confirmed yet \(NRY-0050\); trying again in 1 s with the same key \(attempt 3\)/.test(await sending.textContent()));
    assert.equal(await c.getByRole('alert').isVisible(), false, 'no failure is shown while it retries');
    await shot(page, 'inbox-retrying');
    await hp.worker();
    await c.waitFor({ state: 'detached', timeout: 20000 });
    assert.ok(keys.length >= 2, `retried: ${keys.length} request(s)`);
    assert.equal(new Set(keys).size, 1, 'every attempt used the same Idempotency-Key');
    const view = await rest.get('eff_u1');
    assert.equal(view.resolution.answer.approved, true);
  });

  test('409: an interaction someone else answered shows No longer waiting', async () => {
    // Without the live stream (refused here, as a proxy might), the page still
    // shows the list, so it can be answered after someone else did.
    const live = await b.page();
    await live.route('**/v1/events**', (route) => route.abort());
    await hp.hold('acme', { session: 's1', task: 'tv1', call: 'call-v1', effect: 'eff_v1' });
    await live.goto(`${hp.api}/inbox#token=${await hp.token('acme', 'dev')}`);
    const c = card(live, 'eff_v1');
    await c.waitFor();
    assert.match(await live.locator('#connection').textContent(), /reconnecting/);
    // This ingress gives the worker 1 s: a busy machine may answer 503, retried with the same key.
    const decision = { approved: false, reason: 'someone else was faster' };
    await until('the other answer', () => rest.approve('eff_v1', decision, { idempotencyKey: 'other:eff_v1' }).then(
      () => true,
      (e) => { if (e instanceof UnavailableError) return false; throw e; },
    ));
    await c.getByRole('button', { name: 'Approve' }).click();
    const alert = c.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.textContent(), /^No longer waiting \(NRY-0009\)/);
    assert.equal(await c.getByRole('button', { name: 'Approve' }).isDisabled(), true);
    await shot(live, 'inbox-conflict');
    assert.equal((await rest.get('eff_v1')).resolution.answer.approved, false);
    await live.close();
  });

  test('this page too asked for nothing outside the ingress', () => {
    assert.deepEqual(b.foreign, []);
    assert.deepEqual(b.problems, []);
  });
});

describe('the inbox behind a proxy whose timeout is shorter than the outcome wait', () => {
  /** @type {Holdpoint} */
  let hp;
  let proxy;
  let b;
  let rest;
  let page;

  before(async () => {
    hp = new Holdpoint();
    await hp.nats();
    await hp.worker();
    // The ingress waits its default 5 s for an outcome; the proxy only 2 s.
    await hp.ingress(await freePort());
    proxy = await impatientProxy(hp.api, 2000);
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'ana') });
    await hp.session('acme', 's1');
    b = await browser(new URL(proxy.url).origin);
    page = await b.page();
    await page.goto(`${proxy.url}/inbox#token=${await hp.token('acme', 'dev')}`);
    await page.locator('#connection.live').waitFor();
  });

  after(async () => {
    await b?.close();
    await proxy?.close();
    await hp?.close();
  });

  test('504 from the proxy: the card says sending, retries with the same key, and ends resolved', async () => {
    await hp.hold('acme', { session: 's1', task: 'tp1', call: 'call-p1', effect: 'eff_p1' });
    const c = card(page, 'eff_p1');
    await c.waitFor();
    // Every alert the page ever shows, from now on.
    await page.evaluate(() => {
      window.alertsShown = [];
      const look = () => {
        for (const a of document.querySelectorAll('[role="alert"]')) {
          if (!a.hidden && a.textContent) window.alertsShown.push(a.textContent);
        }
      };
      new MutationObserver(look).observe(document.body, {
        subtree: true, childList: true, attributes: true, characterData: true,
      });
    });
    const worker = hp.procs.find((p) => p.name === 'holdpoint worker');
    await worker.stop();
    const approve = `/v1/interactions/eff_p1/approve`;
    await c.getByRole('button', { name: 'Approve' }).click();
    // The proxy gives up after 2 s and answers 504 while the ingress still waits;
    // the page sends it again with the same key, and gets 504 again.
    await until('the proxy\'s 504', () => proxy.answers.some((a) => a.path === approve && a.status === 504), 15000);
    await until('the card to say it is sending', async () => /^Sending… not confirmed yet \(HTTP 504\)/.test(await c.getByRole('status').textContent()));
    await until('a second 504', () => proxy.answers.filter((a) => a.path === approve && a.status === 504).length >= 2, 15000);
    // The worker comes back: the decision is recorded several seconds after the
    // click, well after the 504s the person would otherwise have seen.
    await hp.worker();
    await c.waitFor({ state: 'detached', timeout: 30000 });
    const view = await rest.get('eff_p1');
    assert.equal(view.state === 'resolved' || view.state === 'finished', true, view.state);
    assert.equal(view.resolution.answer.approved, true);
    const sent = proxy.answers.filter((a) => a.path === approve);
    assert.ok(sent.length >= 2, `retried: ${JSON.stringify(sent)}`);
    assert.equal(new Set(sent.map((a) => a.key)).size, 1, 'every attempt used the same Idempotency-Key');
    assert.equal(view.resolution.by, 'dev', 'resolved by the page\'s person');
    assert.deepEqual(await page.evaluate(() => window.alertsShown), [], 'no failure was ever shown');
  });

  test('this page asked for nothing outside the proxy', () => {
    assert.deepEqual(b.foreign, []);
    assert.deepEqual(b.problems, []);
  });
});

describe('the inbox in Chromium: escalation', () => {
  let hp;
  let b;
  let rest;
  let page;

  before(async () => {
    // A 27 s warning lead: a hold expiring in 30 s escalates 3 s after it opens.
    hp = await new Holdpoint().up(['--deadline-warning-secs', '27']);
    rest = new HoldpointRest({ baseUrl: hp.api, token: await hp.token('acme', 'ana') });
    await hp.session('acme', 's1');
    b = await browser(new URL(hp.api).origin);
    page = await b.page();
    await page.goto(hp.inboxLink);
    await page.locator('#connection.live').waitFor();
  });

  after(async () => {
    await b?.close();
    await hp?.close();
  });

  test('a card for others is escalated to this person at the warning stage: redrawn, badged, answerable', async () => {
    await hp.hold('acme', {
      session: 's1', task: 'tes1', call: 'call-es1', effect: 'eff_es1', expiresIn: 30, people: ['zoe'], escalatePeople: ['dev'],
    });
    const c = card(page, 'eff_es1');
    await c.waitFor();
    // Before the warning stage: assigned to zoe only, nothing to press.
    assert.equal(await c.locator('button, input, textarea, select').count(), 0);
    // At the warning stage the escalation adds dev: the card is drawn again.
    await c.locator('.escalated').waitFor({ timeout: 20000 });
    assert.equal(await c.locator('.escalated').textContent(), 'Escalated to dev');
    assert.equal(await c.locator('.for-you').textContent(), 'For you');
    await shot(page, 'inbox-escalated');
    await c.getByRole('button', { name: 'Approve' }).click();
    await c.waitFor({ state: 'detached' });
    const view = await rest.get('eff_es1');
    assert.equal(view.resolution.by, 'dev');
    assert.ok(view.escalatedAt, 'the view says when it escalated');
  });

  test('this page raised no errors', () => {
    assert.deepEqual(b.foreign, []);
    assert.deepEqual(b.problems, []);
  });
});
