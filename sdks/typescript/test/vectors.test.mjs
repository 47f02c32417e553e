// Every vector of schemas/command-vectors.json (generated from the Rust domain by
// tests/integration/vectors.rs): the TypeScript runtime computes the same subject,
// Nats-Msg-Id, canonical JSON and arguments digest, and its command builders give
// the very command Rust serializes. A vector's `input` is read with lossless-json,
// so its numbers keep their text (large integers, `1.50`, `-0`) as Rust reads them.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { parse as parseLossless } from 'lossless-json';

import {
  AgentManifest, ManifestError, PROVISIONAL_CODES, approvalRequest, closeCommand, connectionRequest, deadlineCommand,
  openCommand, placement, questionRequest, reassignCommand, sessionCommand, toolResultCommand, turnCommand, wire,
} from '../dist/node.js';
import { ROOT } from './harness.mjs';

// Read losslessly: a vector's `command` (as Rust serialized it) keeps its numbers' text.
const VECTORS = parseLossless(readFileSync(join(ROOT, 'schemas/command-vectors.json'), 'utf8'));

/** The command as the SDK's builders make it from the vector's fields. */
function rebuild(c) {
  const t = c.type;
  if (t.startsWith('session-')) return sessionCommand(t, c.session, c.mode ?? 'blocking', c.laneCapacity);
  if (t === 'open') {
    const at = placement({
      session: c.session, lane: c.lane, taskId: c.taskId, contextId: c.contextId, agent: c.agent,
      expiry: { expiresAt: c.expiresAt, expiresIn: c.expiresIn, onExpiry: c.onExpiry },
      assignees: c.assignees, escalation: c.escalation,
    });
    const r = c.request;
    let request;
    if (r.kind === 'approval') request = approvalRequest(r.server, r.tool, r.arguments, r.reason, r.editable ?? false);
    else if (r.kind === 'question') request = questionRequest(r.questions);
    else request = connectionRequest(r.app, r.reason);
    return openCommand(at, c.interactionId, c.callId, request);
  }
  if (t === 'close') return closeCommand(c.interactionId, c.reason, c.taskId);
  if (t === 'deadline') return deadlineCommand(c.interactionId, { expiresAt: c.expiresAt, expiresIn: c.expiresIn }, c.taskId, c.changeId);
  if (t === 'reassign') return reassignCommand(c.interactionId, c.changeId, c.assignees, c.taskId);
  if (t === 'tool-result') return toolResultCommand(c.interactionId, c.result, c.taskId);
  return turnCommand(t, c.session, c.lane, c.turnId);
}

/** `v` with each number replaced by its canonical text, for a structural comparison. */
function norm(v) {
  if (v && v.isLosslessNumber) return `#${wire.canonicalNumberText(v.value)}`;
  if (Array.isArray(v)) return v.map(norm);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
}

describe('command vectors', () => {
  test('the file has vectors', () => {
    assert.ok(VECTORS.vectors.length >= 20);
    assert.ok(VECTORS.vectors.some((v) => v.argumentsDigest !== undefined));
  });

  for (const v of VECTORS.vectors) {
    test(`wire: ${v.name}`, () => {
      // The command as Rust read and serialized it (numbers with their text).
      const env = v.command;
      assert.equal(wire.canonicalJson(env), v.canonical);
      assert.equal(wire.commandId(env), v.msgId);
      assert.equal(wire.commandSubject(env), v.subject);
      if (v.argumentsDigest !== undefined) {
        assert.equal(wire.argumentsDigest(env.command.request.arguments), v.argumentsDigest);
      }
      // The canonical form is what is published: read back, it is the same text.
      assert.equal(wire.canonicalJson(parseLossless(v.canonical)), v.canonical);
    });

    test(`builders: ${v.name}`, () => {
      // From the caller's input (its own key order, number spelling, defaults left out).
      const input = parseLossless(v.input);
      const built = { org: input.org, command: rebuild(input.command) };
      assert.equal(wire.canonicalJson(built), v.canonical);
      assert.equal(wire.commandId(built), v.msgId);
      assert.equal(wire.commandSubject(built), v.subject);
      // The command as published (canonical JSON) reads back as Rust serialized it.
      assert.deepEqual(norm(parseLossless(wire.canonicalJson(built))), norm(v.command));
    });
  }

  test('the provisional codes match the domain', () => {
    assert.deepEqual([...PROVISIONAL_CODES].sort(), [...VECTORS.provisional].sort());
  });

  test('question defaults are written out (the id depends on them)', () => {
    const v = VECTORS.vectors.find((x) => x.name.startsWith('open question'));
    const raw = JSON.parse(v.input).command.request.questions;
    assert.deepEqual(norm(questionRequest(raw)), norm(v.command.command.request));
  });

  test('plain JavaScript numbers and bigints are written as Rust reads what JSON.stringify writes', () => {
    assert.equal(wire.canonicalJson([2.0, -0, 1.5, 1e21, 1e-7, 0.1, 12345678901234567890123n, 9007199254740993n]),
      '[2,0,1.5,1e+21,1e-7,0.1,12345678901234567890123,9007199254740993]');
    assert.equal(wire.canonicalJson({ b: undefined, a: [undefined] }), '{"a":[null]}');
    assert.throws(() => wire.canonicalJson([Number.NaN]), TypeError);
    assert.throws(() => wire.canonicalJson({ f: () => 1 }), TypeError);
  });

  test('timestamps are written in UTC with milliseconds', () => {
    assert.equal(wire.formatTimestamp('2031-06-01T12:00:00.5+02:00'), '2031-06-01T10:00:00.500Z');
    assert.equal(wire.formatTimestamp(new Date(Date.UTC(2031, 0, 1))), '2031-01-01T00:00:00.000Z');
    assert.throws(() => wire.formatTimestamp('2031-06-01 12:00'), RangeError);
  });

  test("AGENT.md: request_connection is on only with loop.connections: true", () => {
    assert.equal(AgentManifest.fromMarkdown('---\nname: coder\nloop:\n  connections: true\n---\n# Coder\n').connectionsEnabled, true);
    for (const text of ['# no front matter', '---\nname: coder\n---\n', '---\nloop:\n  connections: false\n---\n', '']) {
      assert.equal(AgentManifest.fromMarkdown(text).connectionsEnabled, false, text);
    }
    for (const bad of ['---\nloop:\n  connections: "yes"\n---\n', '---\nloop: 3\n---\n', '---\nname: x\n', '---\n[: x\n---\n']) {
      assert.throws(() => AgentManifest.fromMarkdown(bad), ManifestError, bad);
    }
  });
});
