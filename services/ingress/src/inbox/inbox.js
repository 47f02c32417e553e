// Holdpoint inbox: the organisation's pending interactions, live, answered through
// the REST API. A client like any other: every request carries the person's
// `Authorization: Bearer` token (or none, when a proxy in front adds it).
//
// Data flow:
//   1. open `GET /v1/events` (SSE over fetch, parsed by eventsource-parser);
//   2. once it is open, list `GET /v1/interactions?state=pending` (paged), so
//      nothing opened in between is missed;
//   3. `approval-requested` / `question-asked` / `connection-requested`: load the
//      interaction (`GET /v1/interactions/{id}`, which holds the call's arguments)
//      and show it; `interaction-resolved` / `interaction-closed`: take it away;
//   4. on a drop, reconnect with `Last-Event-ID` (no gap, no repeat);
//   5. `approval-counted` (a hold that needs several people, README "Two-person
//      approvals"): draw the card again with who approved so far.
// Approvals can be selected and approved or denied together: one
// `POST /v1/answers`, each card bound to the digest it shows and given its own
// outcome (one may have been answered by someone else meanwhile).
// An approval card may remember its decision for the session or the agent
// (`remember: {scope}`); an edit never does. The History (on demand) pages
// through the decided interactions and the decision audit.
// While the stream cannot be opened at all (a proxy that refuses long-lived
// responses, say), the list is still shown and read again every
// `RESYNC_MS`, so the page stays usable, only not live.
//
// Every piece of data reaches the page through `textContent` (the page's
// Content-Security-Policy requires Trusted Types, so an HTML sink would throw).

import { createParser } from './vendor/eventsource-parser.js';

const TOKEN_KEY = 'holdpoint.inbox.token';
const INTERACTION_EVENTS = new Set(['approval-requested', 'question-asked', 'connection-requested']);
const GONE_EVENTS = new Set(['interaction-resolved', 'interaction-closed']);
/** Answers retried with the same key: the ingress or a gateway in front ran out of time. */
const RETRY_STATUSES = new Set([502, 503, 504]);
/** The pauses between retries of an answer without `Retry-After`, ms (the last repeats). */
const SEND_BACKOFF_MS = [500, 1000, 2000, 4000, 5000];
/** How long an answer is retried before the page says it is not confirmed, ms. */
const SEND_FOR_MS = 60000;
const RESYNC_MS = 10000;

const $ = (id) => document.getElementById(id);

// The API is next to the page: `/inbox` -> `/v1/...`, `/hp/inbox` -> `/hp/v1/...`.
const apiRoot = location.pathname.replace(/\/inbox\/?$/, '');
const apiUrl = (path) => new URL(apiRoot + path, location.origin).toString();

let token = takeToken();
let lastSequence = null; // `id:` of the last event seen, for Last-Event-ID
let stream = null; // the AbortController of the open event stream
let cardSeq = 0;
let lastSync = 0; // when the pending list was last read (ms)
const cards = new Map(); // interactionId -> { li, view }
const gone = new Set(); // answered or closed: never shown again

/** The token from `#token=…` (then dropped from the address bar), else the tab's. */
function takeToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get('token');
  if (given) {
    history.replaceState(null, '', location.pathname + location.search);
    remember(given);
    return given;
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

function remember(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (private mode): the token lives in this page only.
  }
}

const C0 = ['NUL', 'SOH', 'STX', 'ETX', 'EOT', 'ENQ', 'ACK', 'BEL', 'BS', 'HT', 'LF', 'VT', 'FF', 'CR', 'SO', 'SI',
  'DLE', 'DC1', 'DC2', 'DC3', 'DC4', 'NAK', 'SYN', 'ETB', 'CAN', 'EM', 'SUB', 'ESC', 'FS', 'GS', 'RS', 'US'];

/**
 * Text as a person should see it: C0 controls (but tab and newlines) and DEL are
 * named (ESC -> ⟨ESC⟩), and so are bidirectional controls (⟨U+202E⟩), so a
 * runtime-supplied string can neither hide nor reorder text. Any font shows it.
 */
function visible(value) {
  return String(value)
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, (c) =>
      `⟨${c === '\u007F' ? 'DEL' : C0[c.charCodeAt(0)]}⟩`)
    .replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g, (c) =>
      `⟨U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}⟩`);
}

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === undefined || value === null) continue;
    if (name === 'text') node.textContent = visible(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(visible(child)) : child);
  }
  return node;
}

function announce(message) {
  const a = $('announcer');
  a.textContent = '';
  // A separate task, so screen readers notice the change.
  setTimeout(() => { a.textContent = visible(message); }, 50);
}

function setConnection(state, message) {
  const c = $('connection');
  c.className = `connection ${state}`;
  c.textContent = visible(message);
}

/** An error the API answered: `{code, title, message}` and the status. */
class Problem extends Error {
  constructor(status, code, title, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.title = title;
    this.retryAfter = retryAfter;
  }
}

async function problemOf(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's page): the status speaks.
  }
  const retryAfter = Number.parseInt(response.headers.get('Retry-After') ?? '', 10);
  return new Problem(
    response.status,
    typeof body.code === 'string' ? body.code : `HTTP ${response.status}`,
    typeof body.title === 'string' ? body.title : (response.statusText || 'Request failed'),
    typeof body.message === 'string' ? body.message : '',
    Number.isFinite(retryAfter) ? retryAfter : null,
  );
}

function headers(extra = {}) {
  const h = { Accept: 'application/json', ...extra };
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

/** Calls the API; resolves to the JSON body (null on 204), throws a Problem. */
async function call(method, path, body, idempotencyKey) {
  const extra = {};
  if (body !== undefined) extra['Content-Type'] = 'application/json';
  if (idempotencyKey) extra['Idempotency-Key'] = idempotencyKey;
  const response = await fetch(apiUrl(path), {
    method,
    headers: headers(extra),
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  if (response.status === 204) return null;
  if (response.ok) return response.json();
  const problem = await problemOf(response);
  if (problem.status === 401) signIn(problem);
  throw problem;
}

/** A fresh idempotency key (also outside secure contexts, unlike randomUUID). */
function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `inbox-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Identity

function showIdentity() {
  const who = $('who');
  $('forget').hidden = !token;
  if (!token) {
    who.textContent = 'No token: requests go without one (for a sign-in proxy in front of Holdpoint).';
    return;
  }
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(payload));
    const org = typeof claims.org === 'string' ? ` · ${claims.org}` : '';
    who.textContent = visible(`Signed in as ${claims.sub}${org}`);
  } catch {
    who.textContent = 'Signed in with a token';
  }
}

function signIn(problem) {
  stopStream();
  const section = $('sign-in');
  section.hidden = false;
  $('sign-in-why').textContent = visible(problem
    ? `${problem.title} (${problem.code}): ${problem.message}`
    : 'Paste a token to see what waits for you.');
  setConnection('down', 'Signed out');
  $('sign-in-heading').focus();
}

function useToken(value) {
  token = value.trim();
  remember(token);
  $('sign-in').hidden = true;
  $('token-input').value = '';
  showIdentity();
  clearCards();
  follow();
}

function clearCards() {
  for (const { li } of cards.values()) li.remove();
  cards.clear();
  gone.clear();
  lastSequence = null;
  updateCount();
  historyForget();
}

// ---------------------------------------------------------------------------
// The event stream

function stopStream() {
  if (stream) stream.abort();
  stream = null;
}

/** Follows `/v1/events` until signed out, reconnecting after drops. */
async function follow() {
  stopStream();
  const mine = new AbortController();
  stream = mine;
  let delay = 500;
  while (!mine.signal.aborted) {
    try {
      const extra = { Accept: 'text/event-stream' };
      if (lastSequence !== null) extra['Last-Event-ID'] = String(lastSequence);
      const response = await fetch(apiUrl('/v1/events'), {
        headers: headers(extra),
        cache: 'no-store',
        signal: mine.signal,
      });
      if (!response.ok) {
        const problem = await problemOf(response);
        if (problem.status === 401) {
          signIn(problem);
          return;
        }
        throw problem;
      }
      setConnection('live', 'Live');
      delay = 500;
      // The stream is open (its consumer exists), so listing now misses nothing.
      if (lastSequence === null) await syncPending();
      await readEvents(response.body, mine.signal);
      if (!mine.signal.aborted) setConnection('down', 'Connection lost; reconnecting…');
    } catch (error) {
      if (mine.signal.aborted) return;
      const what = error instanceof Problem
        ? `${error.title} (${error.code}): ${error.message}`
        : 'Live updates are not reachable';
      setConnection('down', `${what}; reconnecting…`);
      if (lastSequence === null && Date.now() - lastSync >= RESYNC_MS) {
        await syncPending().catch(() => {});
      }
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 8000);
  }
}

async function readEvents(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let chain = Promise.resolve();
  const parser = createParser({
    onEvent: (event) => {
      chain = chain.then(() => handle(event)).catch(() => {});
    },
  });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done || signal.aborted) break;
      parser.feed(value);
    }
  } finally {
    reader.releaseLock();
  }
  await chain;
}

async function handle(event) {
  if (event.id) lastSequence = event.id;
  let cloudEvent;
  try {
    cloudEvent = JSON.parse(event.data);
  } catch {
    return;
  }
  const data = cloudEvent.data ?? {};
  if (INTERACTION_EVENTS.has(event.event)) {
    await open(event.event === 'question-asked' ? data.questionId : data.interactionId, true);
  } else if (event.event === 'interaction-reassigned' || event.event === 'interaction-escalated') {
    // Who may answer changed (the runtime reassigned it, or its deadline's warning
    // stage escalated it): show the card again as this person now sees it.
    const shown = cards.get(data.interactionId);
    if (shown && shown.article.getAttribute('aria-busy') !== 'true') {
      shown.li.remove();
      cards.delete(data.interactionId);
      updateCount();
    }
    await open(data.interactionId, false);
  } else if (event.event === 'approval-counted') {
    const shown = cards.get(data.interactionId);
    if (shown && shown.article.getAttribute('aria-busy') !== 'true') await refresh(shown, false);
  } else if (GONE_EVENTS.has(event.event)) {
    const why = event.event === 'interaction-resolved'
      ? `answered by ${data.by}`
      : `closed (${data.reason})`;
    take(data.interactionId, why);
  }
}

/** Reads every page of pending interactions: shows new ones, drops the rest. */
async function syncPending() {
  lastSync = Date.now();
  const listed = new Set();
  let cursor = null;
  do {
    const query = new URLSearchParams({ state: 'pending', limit: '100' });
    if (cursor) query.set('cursor', cursor);
    const page = await call('GET', `/v1/interactions?${query}`);
    for (const view of page.items) {
      listed.add(view.interactionId);
      show(view, false);
    }
    cursor = page.nextCursor ?? null;
  } while (cursor);
  for (const [id, card] of cards) {
    if (!listed.has(id) && card.article.getAttribute('aria-busy') !== 'true') take(id, 'no longer waiting');
  }
  updateCount();
}

async function open(id, fresh) {
  if (typeof id !== 'string' || cards.has(id) || gone.has(id)) return;
  try {
    const view = await call('GET', `/v1/interactions/${encodeURIComponent(id)}`);
    show(view, fresh);
  } catch {
    // Not visible to this person (or gone): nothing to show.
  }
}

// ---------------------------------------------------------------------------
// Cards

function updateCount() {
  const n = cards.size;
  $('count').textContent = n ? `(${n})` : '';
  $('empty').hidden = n > 0;
  updateBulk();
}

/** The approval cards selected now, in page order. */
function selected() {
  return [...cards.values()].filter((c) => c.select?.checked && !c.select.disabled);
}

function updateBulk() {
  const n = selected().length;
  $('bulk').hidden = n === 0 && $('bulk-problem').hidden;
  $('bulk-count').textContent = n === 1 ? '1 selected' : `${n} selected`;
  $('bulk-approve').disabled = n === 0;
  $('bulk-deny').disabled = n === 0;
}

/**
 * Approves or denies the selected cards together (README "Answering many at
 * once"): one `POST /v1/answers` of up to 100, each item bound to the digest its
 * card shows, with a key of its own. Each card then shows its own outcome: taken
 * away when decided, its problem when refused (someone else answered it, it
 * changed). An item not confirmed in time keeps its key for a second press.
 */
async function decideSelected(approved) {
  const chosen = selected().slice(0, 100);
  if (chosen.length === 0) return;
  const problem = $('bulk-problem');
  problem.hidden = true;
  const items = chosen.map((card) => {
    const body = card.decision(approved);
    const same = card.unconfirmed?.path === 'batch' && card.unconfirmed?.body === JSON.stringify(body);
    const key = same ? card.unconfirmed.key : newKey();
    card.unconfirmed = { path: 'batch', body: JSON.stringify(body), key };
    setBusy(card, true);
    card.problem.hidden = true;
    setSending(card, 'Sending…');
    return { interactionId: card.view.interactionId, operation: 'approve', body, idempotencyKey: key };
  });
  $('bulk-approve').disabled = true;
  $('bulk-deny').disabled = true;
  let results;
  try {
    ({ results } = await call('POST', '/v1/answers', { items }));
  } catch (caught) {
    const error = caught instanceof Problem
      ? caught
      : new Problem(0, 'network', 'Holdpoint is not reachable', String(caught?.message ?? caught));
    problem.replaceChildren(el('strong', { text: `${error.title} (${error.code})` }), error.message,
      '\nNothing may have been decided; press again to send the same answers with the same keys.');
    problem.hidden = false;
    for (const card of chosen) {
      setSending(card, null);
      setBusy(card, false);
    }
    updateBulk();
    return;
  }
  chosen.forEach((card, i) => {
    const result = results?.[i] ?? { status: 0, code: 'missing', title: 'No result', message: '' };
    const id = card.view.interactionId;
    setSending(card, null);
    if (result.status === 204) {
      card.unconfirmed = null;
      take(id, approved ? 'approved' : 'denied');
      return;
    }
    if (result.status === 202) {
      // Counted toward a hold that needs several people: drawn again, still waiting.
      card.unconfirmed = null;
      refresh(card);
      return;
    }
    if (gone.has(id)) return;
    const error = new Problem(result.status, result.code, result.title, result.message ?? '', null);
    if (RETRY_STATUSES.has(result.status)) {
      showProblem(card, error, 'Not confirmed in time. It may still be recorded; select it and press '
        + 'again to send the same answer with the same key.');
      setBusy(card, false);
      return;
    }
    card.unconfirmed = null;
    if (result.status === 409 && result.code !== 'NRY-0010') {
      showProblem(card, error, 'This request is no longer waiting for you.');
      card.select.checked = false;
      card.select.disabled = true;
      card.article.setAttribute('aria-busy', 'false');
      return;
    }
    showProblem(card, error, result.code === 'NRY-0010' ? 'The call changed since it was shown.' : null);
    setBusy(card, false);
  });
  const decided = results.filter((r) => r.status === 204).length;
  const counted = results.filter((r) => r.status === 202).length;
  announce(`${decided} of ${chosen.length} ${approved ? 'approved' : 'denied'}`
    + (counted ? `; ${counted} counted, waiting for more approvals` : ''));
  updateBulk();
}

function show(view, fresh) {
  const id = view.interactionId;
  if (view.state !== 'pending' || cards.has(id) || gone.has(id)) return;
  const n = ++cardSeq;
  const render = { approval: approvalCard, question: questionCard, connection: connectionCard }[view.kind];
  if (!render) return;
  const titleId = `card-${n}-title`;
  const article = el('article', { 'aria-labelledby': titleId });
  const li = el('li', { class: `card kind-${view.kind}`, 'data-interaction-id': id }, article);
  const card = { li, view, n, article };
  render(card, titleId);
  if (view.escalatedAt) escalated(card);
  if (view.forYou === true) forYou(card);
  if (view.forYou === false) notForYou(card);
  cards.set(id, card);
  place(card);
  updateCount();
  if (fresh) announce(`New ${view.kind}: ${view.prompt}`);
}

/**
 * Puts a card in the list: those assigned to this person (`forYou`) first, in
 * the order they came, then the rest.
 */
function place(card) {
  const list = $('pending');
  if (card.view.forYou === true) {
    const firstOther = [...list.children].find((li) => li.dataset.forYou !== 'true');
    list.insertBefore(card.li, firstOther ?? null);
  } else {
    list.append(card.li);
  }
}

/** `1 of 2 (ana)` for a hold that needs several approvals; undefined otherwise. */
function approvalsText(approvals) {
  if (!approvals) return undefined;
  const names = approvals.given.map((g) => g.by);
  const who = names.length ? ` (${names.join(', ')})` : '';
  return `${approvals.given.length} of ${approvals.required} approvals${who}`;
}

/** What a person who already approved reads on the card. */
function waitingText(approvals) {
  const left = Math.max(approvals.required - approvals.given.length, 0);
  return `You approved. It waits for ${left} more ${left === 1 ? 'person' : 'people'}; you may still deny it.`;
}

/** `ana, bob and group oncall` for an interaction's assignees. */
function assigneeNames(assignees) {
  const names = [...(assignees?.people ?? []), ...(assignees?.groups ?? []).map((g) => `group ${g}`)];
  if (names.length <= 1) return names.join('');
  return `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

/**
 * Marks a card whose deadline's warning stage escalated it (README "Escalation"):
 * who was added, and when.
 */
function escalated(card) {
  card.li.dataset.escalated = 'true';
  const to = assigneeNames(card.view.escalation);
  card.article.prepend(el('p', {
    class: 'escalated',
    title: `Escalated at ${card.view.escalatedAt}`,
    text: to ? `Escalated to ${to}` : 'Escalated',
  }));
}

/** Marks a card assigned to this person (README "Assignees"). */
function forYou(card) {
  card.li.dataset.forYou = 'true';
  card.article.prepend(el('p', { class: 'for-you', text: 'For you' }));
}

/**
 * A card assigned to other people: shown, but with nothing to press or fill in,
 * since the server would refuse this person's answer (`NRY-0037`).
 */
function notForYou(card) {
  card.li.dataset.forYou = 'false';
  for (const node of card.article.querySelectorAll('.actions, .select-row, fieldset, form, textarea, label.field-label, .editor')) {
    node.remove();
  }
  card.select = null;
  card.buttons = [];
  card.decision = null;
  card.article.append(el('p', { class: 'assigned-others', text: `Assigned to ${assigneeNames(card.view.assignees)}: you cannot answer this one.` }));
}

function facts(pairs) {
  const dl = el('dl', { class: 'facts' });
  for (const [term, value] of pairs) {
    if (value === undefined || value === null || value === '') continue;
    dl.append(el('dt', { text: term }), el('dd', { text: value }));
  }
  return dl;
}

function problemBox() {
  return el('div', { class: 'problem', role: 'alert', hidden: true });
}

/**
 * Gives a card its two message boxes: `problem` (an alert, for what went wrong)
 * and `sending` (a polite status, while an answer is on its way or being retried:
 * never shown as a failure, since the answer may well be recorded).
 */
function attachBoxes(card) {
  card.sending = el('p', { class: 'sending', role: 'status', hidden: true });
  card.problem = problemBox();
  card.article.append(card.sending, card.problem);
}

function header(card, titleId, kindLabel, title) {
  card.article.append(
    el('p', { class: 'kind', text: kindLabel }),
    el('h3', { id: titleId, tabindex: '-1', text: title }),
  );
  const due = deadlineLine(card);
  if (due) card.article.append(due);
}

function placement(view) {
  return [
    ['Agent', view.agent],
    ['Session', view.sessionId],
    ['Task', view.taskId],
    ['Opened', new Date(view.openedAt).toLocaleString()],
  ];
}

/** What the deadline decides when nobody answers first (`onExpiry`, by kind). */
function expiryOutcome(view) {
  if (view.onExpiry === 'close') return 'closes it without an answer';
  return {
    approval: 'denies the call',
    question: 'closes the question without an answer',
    connection: 'answers not connected',
  }[view.kind] ?? 'closes it';
}

/** `4m 12s` for `ms` milliseconds (at least `0s`). */
function span(ms) {
  const secs = Math.max(0, Math.floor(ms / 1000));
  const [d, h, m, sec] = [Math.floor(secs / 86400), Math.floor(secs / 3600) % 24, Math.floor(secs / 60) % 60, secs % 60];
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${sec}s`;
  return `${sec}s`;
}

/** The card's deadline line: the time left and what the deadline then decides. */
function deadlineText(view, now = Date.now()) {
  const left = new Date(view.expiresAt).getTime() - now;
  const outcome = expiryOutcome(view);
  return left > 0 ? `Deadline in ${span(left)}: then it ${outcome}.` : `Deadline passed: it ${outcome}.`;
}

/** A card's deadline line, kept current every second; none without a deadline. */
function deadlineLine(card) {
  if (!card.view.expiresAt) return null;
  card.deadline = el('p', { class: 'deadline', text: deadlineText(card.view) });
  return card.deadline;
}

setInterval(() => {
  for (const card of cards.values()) {
    if (card.deadline) card.deadline.textContent = deadlineText(card.view);
  }
}, 1000);

function approvalCard(card, titleId) {
  const { view, n } = card;
  const detail = view.detail ?? {};
  const held = view.call ?? {};
  header(card, titleId, 'Approval', view.prompt);
  const selectId = `card-${n}-select`;
  card.select = el('input', { id: selectId, type: 'checkbox', class: 'select' });
  card.select.addEventListener('change', updateBulk);
  card.article.append(el('p', { class: 'select-row' }, card.select,
    el('label', { for: selectId, text: 'Select for approving or denying together' })));
  const argsId = `card-${n}-args`;
  const reasonId = `card-${n}-reason`;
  const approve = el('button', { type: 'button', class: 'go', text: 'Approve' });
  const deny = el('button', { type: 'button', class: 'stop', text: 'Deny' });
  const reason = el('textarea', { id: reasonId, rows: '2' });
  const remembering = rememberChoice(card);
  const approvals = view.approvals;
  // A hold that needs several people: one who approved may still deny, never
  // approve again (NRY-0038), and nothing about it is remembered (NRY-0025).
  const approvedAlready = approvals?.byYou === true;
  card.article.append(
    facts([
      ['Server', detail.server ?? held.server],
      ['Tool', detail.tool ?? held.tool],
      ['Reason held', detail.reason],
      ['Approvals', approvalsText(approvals)],
      ...placement(view),
    ]),
    el('p', { class: 'args-label', id: argsId, text: 'Arguments' }),
    el('pre', { class: 'args', tabindex: '0', 'aria-labelledby': argsId, text: JSON.stringify(held.arguments ?? null, null, 2) }),
    el('label', { class: 'field-label', for: reasonId, text: 'Reason (optional; sent with your decision)' }),
    reason,
    ...(approvals ? [] : [remembering.fieldset]),
    ...(approvedAlready ? [el('p', { class: 'approved-already', text: waitingText(approvals) })] : []),
    el('div', { class: 'actions' }, ...(approvedAlready ? [deny] : [approve, deny])),
  );
  card.buttons = approvedAlready ? [deny] : [approve, deny];
  if (approvedAlready) {
    card.article.querySelector('.select-row')?.remove();
    card.select = null;
  }
  const path = `/v1/interactions/${encodeURIComponent(view.interactionId)}/approve`;
  // The digest of the arguments this card shows: every decision is bound to it.
  const shown = held.argumentsDigest;
  const withReason = (body) => {
    const text = reason.value.trim();
    if (text) body.reason = text;
    return body;
  };
  // A plain decision carries the remember choice; an edit never does (NRY-0033).
  const plain = (approved) => {
    const body = withReason({ approved, argumentsDigest: shown });
    const scope = remembering.scope();
    if (scope) body.remember = { scope };
    return body;
  };
  if (held.editable === true) {
    editor(card, held, (edited) => {
      if (remembering.scope()) {
        return 'An edit is never remembered: choose "Only this call" to approve with edits.';
      }
      submit(card, path, withReason({ approved: true, argumentsDigest: shown, editedArguments: edited }), 'Approved with edits');
      return null;
    });
  }
  attachBoxes(card);
  const decide = (approved) => {
    const body = plain(approved);
    const done = approved ? 'Approved' : 'Denied';
    submit(card, path, body, body.remember ? `${done} and remembered` : done);
  };
  card.decision = plain;
  approve.addEventListener('click', () => decide(true));
  deny.addEventListener('click', () => decide(false));
}

/**
 * Edit, then approve (README "Edit, then approve"): an Edit button that opens a
 * JSON editor on a copy of the held arguments. What is typed is parsed as it
 * changes; anything but a JSON object is refused here, before anything is sent
 * (the server checks again). The changes against the held arguments are listed
 * under the editor, and "Approve with edits" sends the edit with the digest of
 * the arguments the card shows (`send(edited)`).
 */
function editor(card, held, send) {
  const { n } = card;
  const open = el('button', { type: 'button', class: 'edit', 'aria-expanded': 'false', text: 'Edit' });
  const boxId = `card-${n}-edit`;
  const errId = `card-${n}-edit-error`;
  const text = el('textarea', {
    id: boxId, class: 'json', rows: '8', spellcheck: 'false', 'aria-describedby': errId,
  });
  text.value = JSON.stringify(held.arguments ?? {}, null, 2);
  const error = el('p', { class: 'edit-error', id: errId, role: 'alert', hidden: true });
  const changes = el('ul', { class: 'diff', 'aria-label': 'Changes against the held arguments' });
  const go = el('button', { type: 'button', class: 'go', text: 'Approve with edits' });
  const section = el('div', { class: 'editor', hidden: true },
    el('label', { class: 'field-label', for: boxId, text: 'Edited arguments (JSON object)' }),
    text, error,
    el('p', { class: 'args-label', text: 'Changes' }), changes,
    el('div', { class: 'actions' }, go));
  card.article.querySelector('.actions').append(open);
  card.article.append(section);
  card.buttons.push(open, go);
  /** The edit as typed: `{value}`, or `{problem}` saying why it cannot be sent. */
  const read = () => {
    let value;
    try {
      value = JSON.parse(text.value);
    } catch (e) {
      return { problem: `Not valid JSON: ${e.message}` };
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return { problem: 'The arguments must be a JSON object ({ … }).' };
    }
    return { value };
  };
  const redraw = () => {
    const r = read();
    error.hidden = !r.problem;
    error.textContent = r.problem ? visible(r.problem) : '';
    text.setAttribute('aria-invalid', r.problem ? 'true' : 'false');
    const lines = r.problem ? [] : diff(held.arguments ?? {}, r.value);
    changes.replaceChildren(...(lines.length
      ? lines.map(([mark, line]) => el('li', { class: `diff-${mark}`, text: `${{ add: '+', del: '−', mod: '~' }[mark]} ${line}` }))
      : [el('li', { class: 'diff-none', text: r.problem ? 'Fix the JSON to see the changes.' : 'No changes.' })]));
    return r;
  };
  text.addEventListener('input', redraw);
  open.addEventListener('click', () => {
    section.hidden = !section.hidden;
    open.setAttribute('aria-expanded', section.hidden ? 'false' : 'true');
    if (!section.hidden) { redraw(); text.focus(); }
  });
  go.addEventListener('click', () => {
    const r = redraw();
    if (r.problem) { text.focus(); return; }
    const refused = send(r.value);
    if (refused) {
      error.textContent = visible(refused);
      error.hidden = false;
    }
  });
}

/**
 * The "remember" choice of an approval card (README "Remembered rules"): only
 * this call (the default), this session, or this agent in any session, the last
 * only where the runtime named the agent (else the server refuses it, NRY-0026).
 * Questions and connections have none (NRY-0025). `scope()` is the choice's
 * `remember.scope`, or null.
 */
function rememberChoice(card) {
  const { view, n } = card;
  const name = `card-${n}-remember`;
  const choices = [['', 'Only this call'], ['session', `This session (${view.sessionId})`]];
  if (view.agent) choices.push(['agent', `This agent (${view.agent}), in any session`]);
  const inputs = [];
  const fieldset = el('fieldset', { class: 'remember' },
    el('legend', { text: 'Remember this decision for' }));
  choices.forEach(([scope, label], i) => {
    const id = `${name}-${i}`;
    const input = el('input', { type: 'radio', name, id, value: scope, checked: i === 0 });
    inputs.push(input);
    fieldset.append(el('div', { class: 'option' }, input, el('label', { for: id, text: label })));
  });
  fieldset.append(el('p', { class: 'hint', text: 'A remembered approval or denial writes a rule: later calls of this tool '
    + 'there are decided at once, without asking. An edit is never remembered.' }));
  return {
    fieldset,
    scope: () => inputs.find((i) => i.checked)?.value || null,
  };
}

/**
 * The differences between two JSON values, as `[mark, line]` pairs (`add`,
 * `del`, `mod`), each line a JSON path and the values (`title: "a" → "b"`).
 * Objects are compared key by key; arrays and scalars as whole values.
 */
function diff(before, after, at = '') {
  const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  const show = (v) => JSON.stringify(v);
  if (isObject(before) && isObject(after)) {
    const out = [];
    for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
      const p = at ? `${at}.${key}` : key;
      if (!Object.hasOwn(after, key)) out.push(['del', `${p}: ${show(before[key])}`]);
      else if (!Object.hasOwn(before, key)) out.push(['add', `${p}: ${show(after[key])}`]);
      else out.push(...diff(before[key], after[key], p));
    }
    return out;
  }
  return show(before) === show(after) ? [] : [['mod', `${at || '(arguments)'}: ${show(before)} → ${show(after)}`]];
}

function questionCard(card, titleId) {
  const { view, n } = card;
  const questions = Array.isArray(view.detail?.questions) ? view.detail.questions : [];
  if (questions.length === 1 && questions[0].schema && typeof questions[0].schema === 'object') {
    formCard(card, titleId, questions[0]);
    return;
  }
  header(card, titleId, questions.length > 1 ? `Questions (${questions.length})` : 'Question',
    questions.length === 1 ? questions[0].text : 'The agent asks');
  card.article.append(facts(placement(view)));
  const read = [];
  questions.forEach((q, qi) => {
    const name = `card-${n}-q${qi}`;
    const multiple = q.multiple === true;
    const fieldset = el('fieldset', {},
      el('legend', { text: questions.length === 1 ? 'Your answer' : `${qi + 1}. ${q.text}` }),
      el('p', { class: 'hint', text: multiple ? 'Choose any that apply.' : 'Choose one.' }));
    const inputs = [];
    // In the order the engine sent them: the index is the answer.
    (q.options ?? []).forEach((option, oi) => {
      const id = `${name}-o${oi}`;
      const input = el('input', { type: multiple ? 'checkbox' : 'radio', name, id, value: String(oi) });
      inputs.push(input);
      fieldset.append(el('div', { class: 'option' }, input, el('label', { for: id, text: option })));
    });
    let text = null;
    if (q.allowText === true) {
      const textId = `${name}-text`;
      text = el('textarea', { id: textId, rows: '2' });
      fieldset.append(el('label', { class: 'field-label', for: textId, text: 'In your own words (optional)' }), text);
    }
    card.article.append(fieldset);
    read.push(() => {
      const answer = { options: inputs.filter((i) => i.checked).map((i) => Number(i.value)) };
      const words = text ? text.value.trim() : '';
      if (words) answer.text = words;
      return answer;
    });
  });
  const send = el('button', { type: 'button', class: 'go', text: questions.length > 1 ? 'Send answers' : 'Send answer' });
  card.article.append(el('div', { class: 'actions' }, send));
  card.buttons = [send];
  attachBoxes(card);
  send.addEventListener('click', () => {
    submit(card, `/v1/questions/${encodeURIComponent(view.interactionId)}/answer`,
      { answers: read.map((r) => r()) }, 'Answered');
  });
}

/**
 * A question with a form (README "Questions with a form"): one native input per
 * property (text, email, url, date, datetime-local, number, a checkbox, a select
 * for an enum) with the schema's bounds as the input's own constraints, so the
 * page checks them before sending (`reportValidity`); the server checks again
 * and names the first field that does not fit (`NRY-0036`), shown on the card.
 */
function formCard(card, titleId, q) {
  const { view, n } = card;
  header(card, titleId, 'Question', q.text);
  card.article.append(facts(placement(view)));
  const props = q.schema.properties && typeof q.schema.properties === 'object' ? q.schema.properties : {};
  const required = new Set(Array.isArray(q.schema.required) ? q.schema.required : []);
  const form = el('form', { class: 'form', novalidate: false });
  const read = [];
  Object.entries(props).forEach(([name, p], i) => {
    const id = `card-${n}-f${i}`;
    const label = `${p.title ?? name}${required.has(name) ? ' (required)' : ''}`;
    let input;
    if (p.type === 'boolean') {
      input = el('input', { id, type: 'checkbox' });
      if (p.default === true) input.checked = true;
      form.append(el('div', { class: 'option' }, input, el('label', { for: id, text: label })));
      read.push(() => [name, input.checked, true]);
    } else {
      if (p.type === 'string' && Array.isArray(p.enum)) {
        input = el('select', { id });
        input.append(el('option', { value: '', text: '—' }));
        p.enum.forEach((v, k) => input.append(el('option', { value: String(v), text: String(p.enumNames?.[k] ?? v) })));
      } else {
        const type = p.type === 'number' || p.type === 'integer' ? 'number'
          : ({ email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' }[p.format] ?? 'text');
        input = el('input', { id, type });
        if (type === 'number') input.step = p.type === 'integer' ? '1' : 'any';
        if (p.minimum !== undefined) input.min = String(p.minimum);
        if (p.maximum !== undefined) input.max = String(p.maximum);
        if (p.minLength !== undefined) input.minLength = Number(p.minLength);
        if (p.maxLength !== undefined) input.maxLength = Number(p.maxLength);
      }
      if (required.has(name)) input.required = true;
      if (p.default !== undefined) input.value = String(p.default);
      form.append(el('label', { class: 'field-label', for: id, text: label }), input);
      if (p.description) form.append(el('p', { class: 'hint', text: p.description }));
      read.push(() => {
        const raw = input.value;
        if (raw === '') return [name, undefined, false];
        if (p.type === 'number' || p.type === 'integer') return [name, Number(raw), true];
        // datetime-local has no zone: the person's local time, sent as UTC.
        if (p.format === 'date-time') return [name, new Date(raw).toISOString(), true];
        return [name, raw, true];
      });
    }
  });
  const send = el('button', { type: 'submit', class: 'go', text: 'Send answer' });
  form.append(el('div', { class: 'actions' }, send));
  card.article.append(form);
  card.buttons = [send];
  attachBoxes(card);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    const value = {};
    for (const r of read) {
      const [name, v, present] = r();
      if (present) value[name] = v;
    }
    submit(card, `/v1/interactions/${encodeURIComponent(view.interactionId)}/respond`, { value }, 'Answered');
  });
}

function connectionCard(card, titleId) {
  const { view } = card;
  const detail = view.detail ?? {};
  header(card, titleId, 'Connection', view.prompt);
  const yes = el('button', { type: 'button', class: 'go', text: 'Connected' });
  const no = el('button', { type: 'button', class: 'stop', text: 'Not connected' });
  card.article.append(
    facts([['App', detail.app], ['Reason', detail.reason], ...placement(view)]),
    el('p', { class: 'hint', text: 'Connect the app where your product keeps its connections, then say so here.' }),
    el('div', { class: 'actions' }, yes, no),
  );
  card.buttons = [yes, no];
  attachBoxes(card);
  const path = `/v1/interactions/${encodeURIComponent(view.interactionId)}/respond`;
  yes.addEventListener('click', () => submit(card, path, { value: { connected: true } }, 'Connected'));
  no.addEventListener('click', () => submit(card, path, { value: { connected: false } }, 'Not connected'));
}

function showProblem(card, problem, note) {
  const box = card.problem;
  box.replaceChildren(
    el('strong', { text: `${problem.title} (${problem.code})` }),
    problem.message,
    note ? `\n${note}` : null,
  );
  box.hidden = false;
}

function setBusy(card, busy) {
  for (const b of card.buttons) b.disabled = busy;
  card.article.setAttribute('aria-busy', busy ? 'true' : 'false');
}

/**
 * Sends one answer, and keeps sending it while nobody can say whether it was
 * recorded: a 502, 503 or 504 (the ingress out of time, or a proxy in front of it
 * out of patience) or a connection that failed is retried with the same
 * idempotency key, so the answer resolves once, after `Retry-After` when the
 * answer gives one and else with a growing pause, for at most `SEND_FOR_MS`.
 * Meanwhile the card says "Sending…", never a failure: a recorded answer ends
 * with its 204 (or the event that takes the card away). Other errors are shown
 * as they are.
 */
async function submit(card, path, body, done) {
  // The same answer again after a give-up reuses its key (it may be recorded);
  // another answer is another press, with a key of its own.
  const same = card.unconfirmed?.path === path && card.unconfirmed?.body === JSON.stringify(body);
  const key = same ? card.unconfirmed.key : newKey();
  card.unconfirmed = null;
  const id = card.view.interactionId;
  setBusy(card, true);
  card.problem.hidden = true;
  setSending(card, 'Sending…');
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const reply = await call('POST', path, body, key);
      setSending(card, null);
      if (reply?.approvals) {
        // Counted; the call waits for other people's approvals.
        announce(`Approval counted: ${reply.approvals.given} of ${reply.approvals.required}`);
        await refresh(card);
        return;
      }
      take(id, done.toLowerCase());
      return;
    } catch (caught) {
      const error = caught instanceof Problem
        ? caught
        : new Problem(0, 'network', 'Holdpoint is not reachable', String(caught?.message ?? caught));
      if (gone.has(id)) return; // the event stream already took it: it was recorded
      if (error.status === 0 || RETRY_STATUSES.has(error.status)) {
        const wait = error.retryAfter !== null && error.retryAfter !== undefined
          ? Math.max(1, error.retryAfter) * 1000
          : SEND_BACKOFF_MS[Math.min(attempt - 1, SEND_BACKOFF_MS.length - 1)];
        if (Date.now() - started + wait <= SEND_FOR_MS) {
          setSending(card, `Sending… not confirmed yet (${error.code}); trying again in `
            + `${(wait / 1000).toFixed(wait < 1000 ? 1 : 0)} s with the same key (attempt ${attempt + 1}).`);
          await sleep(wait);
          if (gone.has(id)) return;
          continue;
        }
        setSending(card, null);
        showProblem(card, error, 'Not confirmed after a minute of trying. It may still be recorded '
          + '(the request then leaves this page); send the same answer again to be sure: it goes '
          + 'with the same key.');
        card.unconfirmed = { path, body: JSON.stringify(body), key };
        setBusy(card, false);
        return;
      }
      setSending(card, null);
      if (error.code === 'NRY-0028' || error.code === 'NRY-0029') {
        showProblem(card, error, 'Nothing was decided: the call still waits, as held.');
        setBusy(card, false);
        return;
      }
      if (error.status === 409 && error.code !== 'NRY-0010') {
        // No longer waiting: someone answered it, or the host closed it.
        showProblem(card, error, 'This request is no longer waiting for you.');
        card.article.setAttribute('aria-busy', 'false');
        return;
      }
      if (error.code === 'NRY-0010') {
        showProblem(card, error, 'The call changed since it was shown; review it again below.');
        await refresh(card);
        return;
      }
      showProblem(card, error, error.status === 401 ? 'Sign in again, then retry.' : null);
      setBusy(card, false);
      return;
    }
  }
}

function setSending(card, text) {
  if (!card.sending) return;
  card.sending.textContent = text ? visible(text) : '';
  card.sending.hidden = !text;
}

/**
 * Re-reads an interaction and draws its card again (its problem kept); `focus`
 * moves the focus to it (not for a change someone else made).
 */
async function refresh(card, focus = true) {
  const id = card.view.interactionId;
  try {
    const view = await call('GET', `/v1/interactions/${encodeURIComponent(id)}`);
    const problem = card.problem;
    cards.delete(id);
    const before = card.li;
    show(view, false);
    const fresh = cards.get(id);
    if (fresh) {
      before.replaceWith(fresh.li);
      fresh.problem.replaceWith(problem);
      fresh.problem = problem;
      if (focus) fresh.li.querySelector('h3')?.focus();
    } else {
      before.remove();
    }
  } catch {
    setBusy(card, false);
  }
}

/** Takes an interaction off the page (answered or closed), keeping focus sensible. */
function take(id, why) {
  if (typeof id !== 'string') return;
  gone.add(id);
  const card = cards.get(id);
  if (!card) return;
  const hadFocus = card.li.contains(document.activeElement);
  const next = card.li.nextElementSibling ?? card.li.previousElementSibling;
  card.li.remove();
  cards.delete(id);
  updateCount();
  announce(`${card.view.prompt}: ${why}`);
  if (hadFocus) {
    const target = next?.querySelector('h3') ?? $('pending-heading');
    target.focus();
  }
}

// ---------------------------------------------------------------------------
// History (README "The web inbox", History): what the organisation decided, read
// on demand from two REST sources, each paged with its own cursor:
//   - "Decided": `GET /v1/interactions?state=all` in the order of their last
//     change, pending ones skipped: each entry says what was decided, by whom (a
//     person, a remembered rule, the deadline, or the host closing it), when, and
//     with what arguments (the held ones and, for an edit, those released);
//   - "Decision audit": `GET /v1/audit`, oldest first: every approval decision and
//     every rule written or revoked, as recorded (digests, never arguments).
// Both endpoints answer for the caller's organisation only, so another
// organisation's decisions never reach the page.

/** Entries per page of each part of the History. */
const HISTORY_PAGE = 25;
/** Listing requests per press at most: a page of `state=all` may be all pending. */
const HISTORY_READS = 8;

const past = {
  cursor: null, // `nextCursor` of the last interactions page read
  decidedDone: false,
  after: 0, // `nextAfter` of the last audit page read
  auditDone: false,
  entries: new Map(), // interactionId -> li, so an entry changed since is redrawn in place
  auditSeen: new Set(), // audit sequences shown
};

function historyProblem(error) {
  const box = $('history-problem');
  if (!error) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  const p = error instanceof Problem ? error : new Problem(0, 'network', 'Holdpoint is not reachable', String(error?.message ?? error));
  box.replaceChildren(el('strong', { text: `${p.title} (${p.code})` }), ` ${p.message}`);
  box.hidden = false;
}

/** Who (or what) settled an interaction, in words. */
function decidedBy(view) {
  const r = view.resolution;
  if (r) {
    if (r.resolvedBy === 'rule') return `a remembered rule: ${r.by}`;
    if (r.resolvedBy === 'expiry') return 'the deadline (nobody answered in time)';
    return r.by;
  }
  const reason = view.closure?.reason;
  return {
    expired: 'the deadline (closed without an answer)',
    superseded: 'a message on the lane instead of an answer',
    interrupted: 'the host (the turn was interrupted)',
    canceled: 'the host (canceled)',
  }[reason] ?? 'the host';
}

/** What was decided, in a few words. */
function decision(view) {
  const answer = view.resolution?.answer;
  if (!answer) return `Closed (${view.closure?.reason ?? 'no answer'})`;
  if (view.kind === 'approval') {
    if (!answer.approved) return 'Denied';
    return answer.editedArguments !== undefined ? 'Approved with edits' : 'Approved';
  }
  if (view.kind === 'connection') return answer.connected ? 'Connected' : 'Not connected';
  return 'Answered';
}

/** The answer a question or connection got, as JSON text (none for approvals). */
function answerText(view) {
  const answer = view.resolution?.answer;
  if (!answer || view.kind === 'approval') return null;
  if (answer.answers !== undefined) return JSON.stringify(answer.answers, null, 2);
  if (answer.value !== undefined) return JSON.stringify(answer.value, null, 2);
  return null;
}

function historyEntry(view) {
  const when = view.resolution?.at ?? view.closure?.at;
  const answer = view.resolution?.answer ?? {};
  const held = view.call ?? {};
  const li = el('li', { class: `past kind-${view.kind}`, 'data-interaction-id': view.interactionId });
  li.append(
    el('p', { class: 'kind', text: { approval: 'Approval', question: 'Question', connection: 'Connection' }[view.kind] ?? view.kind }),
    el('h4', { text: view.prompt }),
    el('p', { class: 'outcome', text: `${decision(view)} by ${decidedBy(view)}` }),
    facts([
      ['When', when ? new Date(when).toLocaleString() : null],
      ['Server', view.detail?.server ?? held.server],
      ['Tool', view.detail?.tool ?? held.tool],
      ['Reason given', typeof answer.reason === 'string' ? answer.reason : null],
      ['Agent', view.agent],
      ['Session', view.sessionId],
      ['Interaction', view.interactionId],
    ]),
  );
  if (view.kind === 'approval' && held.arguments !== undefined) {
    li.append(el('p', { class: 'args-label', text: answer.editedArguments !== undefined ? 'Arguments as held' : 'Arguments' }),
      el('pre', { class: 'args held-args', tabindex: '0', text: JSON.stringify(held.arguments, null, 2) }));
  }
  if (answer.editedArguments !== undefined) {
    li.append(el('p', { class: 'args-label', text: 'Arguments as released (edited)' }),
      el('pre', { class: 'args edited-args', tabindex: '0', text: JSON.stringify(answer.editedArguments, null, 2) }));
  }
  const text = answerText(view);
  if (text !== null) li.append(el('p', { class: 'args-label', text: 'Answer' }), el('pre', { class: 'args answer', tabindex: '0', text }));
  return li;
}

/** The next page of decided interactions (pending ones skipped). */
async function moreDecided() {
  let added = 0;
  for (let reads = 0; reads < HISTORY_READS && added < HISTORY_PAGE && !past.decidedDone; reads++) {
    const query = new URLSearchParams({ state: 'all', limit: String(HISTORY_PAGE) });
    if (past.cursor) query.set('cursor', past.cursor);
    const page = await call('GET', `/v1/interactions?${query}`);
    for (const view of page.items) {
      if (view.state === 'pending') continue;
      const li = historyEntry(view);
      const before = past.entries.get(view.interactionId);
      // Listed again after a later change (resolved, then finished): drawn anew at its new place.
      if (before) before.remove();
      else added++;
      past.entries.set(view.interactionId, li);
      $('history').append(li);
    }
    past.cursor = page.nextCursor ?? null;
    past.decidedDone = !past.cursor;
  }
  $('history-more').hidden = past.decidedDone;
  $('history-empty').hidden = past.entries.size > 0 || !past.decidedDone;
}

/** One audit record, in words. */
function auditEntry(entry) {
  const record = entry.record ?? {};
  const d = record.data ?? {};
  const li = el('li', { class: 'past audit', 'data-sequence': String(entry.sequence) });
  const when = record.time ? new Date(record.time).toLocaleString() : null;
  if (record.type === 'dev.holdpoint.approval-decided') {
    li.dataset.interactionId = String(d.effectId ?? '');
    const what = { allowed: 'Allowed', denied: 'Denied', expired: 'Expired' }[d.outcome] ?? (d.approved ? 'Allowed' : 'Denied');
    const by = d.decidedBy === 'rule' ? `rule ${d.rule} (${d.approvedBy ?? 'its author'})`
      : d.decidedBy === 'expiry' ? 'the deadline'
        : (d.approvedBy ?? 'a person');
    li.append(
      el('h4', { text: `${what}: ${d.server} / ${d.tool}` }),
      facts([
        ['Decided by', by],
        ['When', when],
        ['Interaction', d.effectId],
        ['Reason', d.reason],
        ['Arguments digest', d.argumentsDigest],
        ['Edited arguments', d.editedArguments !== undefined ? JSON.stringify(d.editedArguments) : null],
      ]),
    );
  } else if (record.type === 'dev.holdpoint.rule-written' || record.type === 'dev.holdpoint.rule-revoked') {
    const rule = d.rule ?? {};
    li.dataset.ruleId = String(rule.id ?? '');
    const revoked = record.type === 'dev.holdpoint.rule-revoked';
    const where = rule.scope === 'session' ? `session ${rule.session}`
      : rule.scope === 'agent' ? `agent ${rule.agent}` : 'the whole organisation';
    li.append(
      el('h4', { text: `Rule ${revoked ? 'revoked' : 'written'}: ${rule.effect} ${rule.server} / ${rule.tool}, for ${where}` }),
      facts([
        [revoked ? 'Revoked by' : 'Written by', revoked ? rule.revoked?.by : rule.createdBy],
        ['When', when],
        ['Rule', rule.id],
        ['From', rule.fromInteraction],
        ['Only the arguments with digest', rule.argumentsDigest],
        ['Expires', rule.expiresAt ? new Date(rule.expiresAt).toLocaleString() : null],
      ]),
    );
  } else {
    li.append(el('h4', { text: String(record.type ?? 'record') }), facts([['When', when]]));
  }
  return li;
}

/** The next page of the decision audit. */
async function moreAudit() {
  const query = new URLSearchParams({ after: String(past.after), limit: String(HISTORY_PAGE) });
  const page = await call('GET', `/v1/audit?${query}`);
  for (const entry of page.items) {
    if (past.auditSeen.has(entry.sequence)) continue;
    past.auditSeen.add(entry.sequence);
    $('audit').append(auditEntry(entry));
  }
  past.auditDone = page.items.length < HISTORY_PAGE || page.nextAfter === past.after;
  past.after = page.nextAfter ?? past.after;
  $('audit-more').hidden = past.auditDone;
  $('audit-empty').hidden = past.auditSeen.size > 0 || !past.auditDone;
}

/** Runs one History read with the buttons held, showing what went wrong. */
async function historyRead(...reads) {
  const buttons = ['history-more', 'audit-more', 'history-refresh'].map($);
  for (const b of buttons) b.disabled = true;
  $('history-body').setAttribute('aria-busy', 'true');
  historyProblem(null);
  try {
    await Promise.all(reads.map((r) => r()));
  } catch (error) {
    historyProblem(error);
  } finally {
    for (const b of buttons) b.disabled = false;
    $('history-body').setAttribute('aria-busy', 'false');
  }
}

/** Empties and closes the History (another person signs in). */
function historyForget() {
  past.entries.clear();
  past.auditSeen.clear();
  $('history').replaceChildren();
  $('audit').replaceChildren();
  $('history-body').hidden = true;
  $('history-show').setAttribute('aria-expanded', 'false');
  $('history-show').textContent = 'Show history';
  $('history-refresh').hidden = true;
}

/** Reads the History from its beginning. */
function historyReset() {
  past.cursor = null;
  past.decidedDone = false;
  past.after = 0;
  past.auditDone = false;
  past.entries.clear();
  past.auditSeen.clear();
  $('history').replaceChildren();
  $('audit').replaceChildren();
  return historyRead(moreDecided, moreAudit);
}

$('history-show').addEventListener('click', () => {
  const body = $('history-body');
  body.hidden = !body.hidden;
  $('history-show').setAttribute('aria-expanded', body.hidden ? 'false' : 'true');
  $('history-show').textContent = body.hidden ? 'Show history' : 'Hide history';
  $('history-refresh').hidden = body.hidden;
  if (!body.hidden) historyReset();
});
$('history-refresh').addEventListener('click', () => historyReset());
$('history-more').addEventListener('click', () => historyRead(moreDecided));
$('audit-more').addEventListener('click', () => historyRead(moreAudit));

// ---------------------------------------------------------------------------
// Start

$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const value = $('token-input').value;
  if (value.trim()) useToken(value);
});
$('bulk-approve').addEventListener('click', () => decideSelected(true));
$('bulk-deny').addEventListener('click', () => decideSelected(false));
$('forget').addEventListener('click', () => {
  token = '';
  remember('');
  clearCards();
  showIdentity();
  signIn(null);
});

showIdentity();
updateCount();
follow();
