// The tests' harness: real processes only. It starts the built `holdpoint`
// (`holdpoint up`, or nats-server + `holdpoint worker` + `holdpoint ingress`
// separately) on free loopback ports with a temporary store, plays the runtime
// with `holdpoint runtime …`, mints tokens with `holdpoint dev-token`, and waits
// for exact conditions with deadlines. Every process it starts is stopped by pid
// when the test ends.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, createServer as createHttpServer } from 'node:http';
import { connect as tcpConnect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The repository's root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The built `holdpoint` binary: `HOLDPOINT_BIN`, else `$CARGO_TARGET_DIR/debug`, else `target/debug`. */
export function holdpointBinary() {
  const candidates = [
    process.env.HOLDPOINT_BIN,
    process.env.CARGO_TARGET_DIR && join(resolve(ROOT, process.env.CARGO_TARGET_DIR), 'debug/holdpoint'),
    join(ROOT, 'target/debug/holdpoint'),
  ].filter(Boolean);
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`no holdpoint binary (tried ${candidates.join(', ')}): run ops/test.sh, or cargo build`);
  return found;
}

/** The nats-server: `HOLDPOINT_NATS_SERVER`, else what ops/setup.sh recorded. */
export function natsBinary() {
  if (process.env.HOLDPOINT_NATS_SERVER) return process.env.HOLDPOINT_NATS_SERVER;
  const recorded = join(ROOT, '.tools/nats-server.path');
  if (existsSync(recorded)) return readFileSync(recorded, 'utf8').trim();
  throw new Error('no nats-server: run ops/setup.sh (or ops/test.sh), or set HOLDPOINT_NATS_SERVER');
}

/** A free TCP port on 127.0.0.1. */
export async function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** Waits until `check()` returns a truthy value (returned), or fails after `ms` naming `what`. */
export async function until(what, check, ms = 15000, every = 50) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

/** A child process with its output kept, stopped by pid. */
class Proc {
  constructor(name, command, args, options) {
    this.name = name;
    this.out = '';
    this.err = '';
    this.child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout.setEncoding('utf8').on('data', (d) => { this.out += d; });
    this.child.stderr.setEncoding('utf8').on('data', (d) => { this.err += d; });
    this.exited = new Promise((r) => this.child.once('exit', (code, signal) => r({ code, signal })));
  }

  /** Waits for a stdout line matching `re`; returns the match. */
  async line(re, ms = 30000) {
    return until(`${this.name} to print ${re}`, () => {
      if (this.child.exitCode !== null) {
        throw new Error(`${this.name} exited ${this.child.exitCode}: ${this.err.slice(-2000)}`);
      }
      return this.out.match(re);
    }, ms);
  }

  /** SIGTERM, then SIGKILL after 5 s; resolves when it has exited. */
  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Everything one test runs: processes, a temp directory, and the runtime's verbs. */
export class Holdpoint {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'holdpoint-sdk-'));
    this.bin = holdpointBinary();
    this.procs = [];
    // The development key of `dev-token` and `--dev-jwt`: this test's own.
    this.env = {
      ...process.env, HOLDPOINT_NATS_SERVER: natsBinary(), NO_COLOR: '1', RUST_LOG: 'info',
      HOLDPOINT_DEV_JWT_DIR: join(this.dir, '.holdpoint', 'dev-jwt'),
    };
  }

  spawn(name, args) {
    const proc = new Proc(name, this.bin, args, { cwd: this.dir, env: this.env });
    this.procs.push(proc);
    return proc;
  }

  /** A Node script (`script`, a path) as a process of its own, stopped with the others. */
  node(name, script, args) {
    const proc = new Proc(name, process.execPath, [script, ...args], { cwd: join(ROOT, 'sdks/typescript'), env: process.env });
    this.procs.push(proc);
    return proc;
  }

  /**
   * `holdpoint up --dev-jwt` on free ports: its private nats-server, a worker and
   * the ingress. Sets `api`, `natsUrl` and `inboxLink` (the printed link).
   */
  async up(extra = []) {
    const up = this.spawn('holdpoint up', [
      'up', '--dev-jwt', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0',
      '--nats-port', '0', '--store', join(this.dir, 'nats'), ...extra,
    ]);
    this.upProc = up;
    this.natsUrl = (await up.line(/^holdpoint nats:\s+(\S+)$/m))[1];
    this.api = (await up.line(/^holdpoint api:\s+(\S+)$/m))[1];
    this.inboxLink = (await up.line(/^inbox: (\S+)/m))[1];
    return this;
  }

  /** A nats-server of its own (JetStream, temp store, free port), for separate services. */
  async nats() {
    const port = await freePort();
    const proc = new Proc('nats-server', natsBinary(), [
      '-js', '-a', '127.0.0.1', '-p', String(port), '-sd', join(this.dir, 'nats'),
    ], { cwd: this.dir, env: this.env });
    this.procs.push(proc);
    this.natsUrl = `nats://127.0.0.1:${port}`;
    await until('nats-server to accept connections', () => canConnect(port), 15000);
    return proc;
  }

  /** `holdpoint worker` against this test's NATS. */
  async worker() {
    const w = this.spawn('holdpoint worker', ['worker', '--nats-url', this.natsUrl]);
    await w.line(/pulling commands/);
    return w;
  }

  /** `holdpoint ingress --dev-jwt` on `port` (free when omitted) against this test's NATS, with `extra` flags. */
  async ingress(port, extra = []) {
    const listen = `127.0.0.1:${port ?? (await freePort())}`;
    const ingress = this.spawn('holdpoint ingress', [
      'ingress', '--dev-jwt', '--nats-url', this.natsUrl, '--listen', listen, '--admin-listen', '127.0.0.1:0', ...extra,
    ]);
    const [, api] = await ingress.line(/api (http:\/\/\S+)/);
    this.api = api;
    return ingress;
  }

  /** A development token for `person` of `org` (`holdpoint dev-token`, the key the ingress verifies with). */
  async token(org, person) {
    const { stdout } = await run(this.bin, ['dev-token', '--org', org, '--person', person], { cwd: this.dir, env: this.env });
    return stdout.trim();
  }

  /** `holdpoint runtime --org <org> <args>`; resolves to its stdout, trimmed. */
  async runtime(org, ...args) {
    const { stdout } = await run(this.bin, ['runtime', '--nats-url', this.natsUrl, '--org', org, ...args], {
      cwd: this.dir,
      env: this.env,
    });
    return stdout.trim();
  }

  /** Opens a blocking session `session` in `org`. */
  async session(org, session) {
    return this.runtime(org, 'session', '--session', session);
  }

  /** Holds a call for approval (assigned to `people` and `groups` when given); resolves to the effect id. */
  async hold(org, { session, task, call, effect, server = 'github', tool = 'create_pull_request', args = {}, reason, editable, agent, expiresIn, people = [], groups = [], approvals, escalatePeople = [] }) {
    const extra = reason ? ['--reason', reason] : [];
    if (approvals) extra.push('--approvals', String(approvals));
    for (const p of people) extra.push('--assign-person', p);
    for (const g of groups) extra.push('--assign-group', g);
    for (const p of escalatePeople) extra.push('--escalate-person', p);
    if (editable) extra.push('--editable');
    if (agent) extra.push('--agent', agent);
    if (expiresIn) extra.push('--expires-in', String(expiresIn));
    return this.runtime(org, 'hold', '--session', session, '--task', task, '--call', call, '--effect', effect,
      '--server', server, '--tool', tool, '--arguments', JSON.stringify(args), ...extra);
  }

  /** `ask_user`; resolves to the question id. */
  async ask(org, { session, task, call, questions }) {
    return this.runtime(org, 'ask', '--session', session, '--task', task, '--call', call,
      '--questions', JSON.stringify(questions));
  }

  /** `request_connection` (writes an AGENT.md with connections on); resolves to the interaction id. */
  async connect(org, { session, task, call, app, reason }) {
    const agent = join(this.dir, 'AGENT.md');
    writeFileSync(agent, '---\nname: coder\nloop:\n  connections: true\n---\n');
    return this.runtime(org, 'connect', '--session', session, '--task', task, '--call', call, '--agent', agent,
      '--app', app, '--reason', reason);
  }

  /** Reports a released call's result (JSON output). */
  async toolResult(org, effect, output) {
    return this.runtime(org, 'tool-result', effect, '--output', JSON.stringify(output));
  }

  /** Stops every process (reverse order) and removes the directory. */
  async close() {
    for (const p of [...this.procs].reverse()) await p.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** All output of every process, for assertions about what was logged. */
  logs() {
    return this.procs.map((p) => p.out + p.err).join('\n');
  }
}

async function canConnect(port) {
  return new Promise((r) => {
    const socket = tcpConnect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); r(true); });
    socket.once('error', () => r(false));
  });
}

/**
 * Collects `rest.events(...)` in the background; `waitFor(pred)` resolves with the
 * first collected event matching `pred` (deadline), `stop()` ends the stream.
 */
export function collect(iterable, controller) {
  const seen = [];
  let error;
  const done = (async () => {
    try {
      for await (const e of iterable) seen.push(e);
    } catch (e) {
      if (!controller.signal.aborted) error = e;
    }
  })();
  return {
    seen,
    async waitFor(what, pred, ms = 15000) {
      return until(what, () => {
        if (error) throw error;
        return seen.find(pred);
      }, ms);
    },
    async stop() {
      controller.abort();
      await done;
    },
  };
}

/**
 * A reverse proxy in front of `upstream` (`http://host:port`) that waits at most
 * `timeoutMs` for an answer, as a gateway with a short read timeout does: it then
 * answers `504 Gateway Time-out` (an HTML page, as nginx would) while the request
 * it passed on goes on to the end, its late answer dropped. The event stream
 * (`/v1/events`) is passed through without a timeout. `answers` lists what the
 * proxy answered: `{ method, path, status, key }` (the `Idempotency-Key`).
 */
export async function impatientProxy(upstream, timeoutMs) {
  const target = new URL(upstream);
  const answers = [];
  const server = createHttpServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const note = (status) => answers.push({
        method: req.method, path: req.url, status, key: req.headers['idempotency-key'],
      });
      const up = httpRequest({
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        // The client's Host is kept, as a proxy set to pass it does: the agent
        // card then names the proxy's address.
        headers: req.headers,
      }, (upRes) => {
        if (res.headersSent) {
          upRes.resume(); // too late: the client was already told 504
          return;
        }
        clearTimeout(timer);
        note(upRes.statusCode);
        res.writeHead(upRes.statusCode, upRes.headers);
        upRes.pipe(res);
      });
      up.on('error', () => {
        if (res.headersSent) return;
        clearTimeout(timer);
        note(502);
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body><h1>502 Bad Gateway</h1></body></html>');
      });
      const timer = req.url.startsWith('/v1/events') ? undefined : setTimeout(() => {
        if (res.headersSent) return;
        note(504);
        res.writeHead(504, { 'content-type': 'text/html' });
        res.end('<html><body><h1>504 Gateway Time-out</h1></body></html>');
      }, timeoutMs);
      up.end(Buffer.concat(chunks));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    answers,
    async close() {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(() => r()));
    },
  };
}
