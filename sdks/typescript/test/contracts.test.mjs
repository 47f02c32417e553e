// What the SDK and the inbox must keep in step with the rest of the repository:
// the generated types, the error catalog, the version and the packed tarball, the vendored SSE parser,
// and the answer message's exact shape (the interactions/v1 extension, README "A2A"). No server needed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { Task } from '@a2a-js/sdk';

import {
  ERROR_CATALOG,
  INTERACTIONS_EXTENSION,
  UnavailableError,
  UnsupportedOperationError,
  answerMessage,
  errorFromA2A,
  errorFromResponse,
  waiting,
} from '../dist/index.js';
import { ROOT } from './harness.mjs';

const run = promisify(execFile);
const here = join(ROOT, 'sdks/typescript');
const require = createRequire(import.meta.url);

test('the generated OpenAPI types are what openapi-typescript makes of schemas/openapi.json', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-ts-'));
  try {
    const out = join(dir, 'openapi.ts');
    const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
    // The same command as `npm run generate`, into a temporary file.
    const args = pkg.scripts.generate.split(' ').slice(1).map((a) => (a === 'src/generated/openapi.ts' ? out : a));
    const cli = join(dirname(require.resolve('openapi-typescript/package.json')), 'bin/cli.js');
    await run(process.execPath, [cli, ...args], { cwd: here });
    const committed = readFileSync(join(here, 'src/generated/openapi.ts'), 'utf8');
    assert.equal(
      readFileSync(out, 'utf8'),
      committed,
      'src/generated/openapi.ts differs from schemas/openapi.json: run `npm run generate` in sdks/typescript',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the package version is the Cargo workspace version', () => {
  const cargo = readFileSync(join(ROOT, 'Cargo.toml'), 'utf8');
  const section = cargo.slice(cargo.indexOf('[workspace.package]'));
  const version = section.match(/^version\s*=\s*"([^"]+)"/m)?.[1];
  assert.ok(version, 'no [workspace.package] version in Cargo.toml');
  const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(join(here, 'package-lock.json'), 'utf8'));
  assert.equal(pkg.version, version);
  assert.equal(lock.version, version);
});

test('npm pack makes the tarball the README installs, holding every entry the package exports', async () => {
  const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
  // dist is built (npm test builds first); --ignore-scripts skips prepack's rebuild.
  const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: here });
  const [packed] = JSON.parse(stdout);
  assert.equal(packed.filename, `holdpoint-sdk-${pkg.version}.tgz`);
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.includes(`npm install /tmp/${packed.filename}`), `README.md does not install ${packed.filename}`);
  const files = new Set(packed.files.map((f) => f.path));
  for (const [entry, target] of Object.entries(pkg.exports)) {
    for (const path of Object.values(target)) {
      assert.ok(files.has(path.replace(/^\.\//, '')), `${entry}: ${path} is not in the tarball`);
    }
  }
  assert.ok(![...files].some((f) => f.startsWith('test/') || f.startsWith('src/')), 'the tarball carries tests or sources');
});

test('the error catalog matches schemas/errors.json (codes and retryable)', () => {
  const { errors } = JSON.parse(readFileSync(join(ROOT, 'schemas/errors.json'), 'utf8'));
  assert.deepEqual(Object.keys(ERROR_CATALOG).sort(), errors.map((e) => e.code).sort());
  for (const e of errors) assert.equal(ERROR_CATALOG[e.code].retryable, e.retryable, e.code);
});

test('the inbox serves the exact eventsource-parser the SDK pins', () => {
  const vendored = readFileSync(join(ROOT, 'services/ingress/src/inbox/vendor/eventsource-parser.js'), 'utf8');
  const installedDir = join(here, 'node_modules/eventsource-parser');
  const pinned = readFileSync(join(installedDir, 'dist/index.js'), 'utf8');
  assert.equal(vendored, pinned, 'copy node_modules/eventsource-parser/dist/index.js to services/ingress/src/inbox/vendor/');
  const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
  const installed = JSON.parse(readFileSync(join(installedDir, 'package.json'), 'utf8'));
  assert.equal(installed.version, pkg.dependencies['eventsource-parser']);
});

test('an approval is the interactions/v1 answer message, word for word', () => {
  assert.deepEqual(
    answerMessage({ taskId: 't1.x', contextId: 'ticket-4821', interactionId: 'eff_01J', approved: true, messageId: 'm-2' }),
    {
      role: 'ROLE_USER',
      messageId: 'm-2',
      taskId: 't1.x',
      contextId: 'ticket-4821',
      parts: [{ data: { approved: true } }],
      extensions: [INTERACTIONS_EXTENSION],
      metadata: { [INTERACTIONS_EXTENSION]: { interactionId: 'eff_01J', approved: true } },
    },
  );
  const value = answerMessage({ taskId: 't', interactionId: 'q', value: { connected: true }, messageId: 'm' });
  assert.deepEqual(value.parts, [{ data: { connected: true } }]);
  assert.deepEqual(value.metadata[INTERACTIONS_EXTENSION], { interactionId: 'q', value: { connected: true } });
  assert.equal('contextId' in value, false);
  const text = answerMessage({ taskId: 't', interactionId: 'q', text: 'yes', messageId: 'm' });
  assert.deepEqual(text.parts, [{ text: 'yes' }]);
  assert.deepEqual(text.metadata[INTERACTIONS_EXTENSION], { interactionId: 'q' });
});

test('waiting() reads the open interaction from a task status (the README example)', () => {
  const task = Task.fromJSON({
    id: 't1',
    contextId: 'ctx-1',
    status: {
      state: 'TASK_STATE_AUTH_REQUIRED',
      message: {
        messageId: 'status-eff_1', role: 'ROLE_AGENT', taskId: 't1', contextId: 'ctx-1',
        parts: [{ text: 'Approve github / create_pull_request?' }],
        extensions: [INTERACTIONS_EXTENSION],
        metadata: { [INTERACTIONS_EXTENSION]: {
          interactionId: 'eff_1', kind: 'approval', prompt: 'Approve github / create_pull_request?',
          detail: { server: 'github', tool: 'create_pull_request' },
        } },
      },
    },
  });
  assert.deepEqual(waiting(task), {
    interactionId: 'eff_1',
    kind: 'approval',
    prompt: 'Approve github / create_pull_request?',
    detail: { server: 'github', tool: 'create_pull_request' },
  });
  assert.equal(waiting(Task.fromJSON({ id: 't1', status: { state: 'TASK_STATE_WORKING' } })), undefined);
});

test('errors map by code: REST bodies and A2A ErrorInfo metadata', async () => {
  const rest = await errorFromResponse(new Response(
    JSON.stringify({ code: 'NRY-0050', title: 'Temporarily unavailable', message: 'retry' }),
    { status: 503, headers: { 'retry-after': '1' } },
  ));
  assert.ok(rest instanceof UnavailableError);
  assert.deepEqual([rest.code, rest.title, rest.retryable, rest.status, rest.retryAfter], ['NRY-0050', 'Temporarily unavailable', true, 503, 1]);
  const a2a = errorFromA2A(Object.assign(new Error('text never approves'), {
    envelopeCode: -32004,
    data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'UNSUPPORTED_OPERATION', domain: 'a2a-protocol.org',
      metadata: { code: 'NRY-0020', title: 'Unsupported operation', retryable: 'false' } }],
  }));
  assert.ok(a2a instanceof UnsupportedOperationError);
  assert.deepEqual([a2a.code, a2a.title, a2a.retryable, a2a.rpcCode, a2a.reason], ['NRY-0020', 'Unsupported operation', false, -32004, 'UNSUPPORTED_OPERATION']);
  assert.equal(errorFromA2A(new TypeError('fetch failed')), undefined);
});
