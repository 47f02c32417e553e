/**
 * An agent's `AGENT.md`: YAML front matter between `---` lines, then Markdown.
 * Holdpoint reads `name`, `description` and `loop.connections`;
 * `requestConnection` is off unless the front matter says
 * `loop: {connections: true}` (as the Rust client's `manifest` module and the
 * Python SDK read it).
 *
 * @module
 */
/// <reference types="node" />
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';

import { ManifestError } from './runtime-errors.js';

function optionalString(data: Record<string, unknown>, key: string): string | undefined {
  const value = data[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  throw new ManifestError(`AGENT.md: ${key} must be a string, not ${typeof value}`);
}

/** The parts of an agent manifest Holdpoint reads; other keys are ignored (the manifest belongs to the harness). */
export class AgentManifest {
  /** The agent's name. */
  readonly name: string | undefined;
  /** What it does. */
  readonly description: string | undefined;
  /** `loop.connections`: turns `requestConnection` on. Off by default. */
  readonly connections: boolean;

  constructor(init: { name?: string | undefined; description?: string | undefined; connections?: boolean } = {}) {
    this.name = init.name;
    this.description = init.description;
    this.connections = init.connections ?? false;
  }

  /**
   * Parses the front matter of an `AGENT.md` text. A text without front matter
   * (or with an empty one) is a manifest with every default.
   *
   * Throws {@link ManifestError} when the front matter is not closed with `---`,
   * is not YAML, or is not of this shape (`loop` not a mapping, `connections`
   * not a boolean).
   */
  static fromMarkdown(text: string): AgentManifest {
    const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
    if (lines.length === 0 || lines[0]?.trimEnd() !== '---') return new AgentManifest();
    const end = lines.findIndex((line, i) => i > 0 && line.trimEnd() === '---');
    if (end < 0) throw new ManifestError('AGENT.md: front matter is not closed with ---');
    const front = lines.slice(1, end).join('\n');
    if (!front.trim()) return new AgentManifest();
    let data: unknown;
    try {
      data = parseYaml(front);
    } catch (error) {
      throw new ManifestError(`AGENT.md: ${(error as Error).message}`);
    }
    if (data === null || data === undefined) return new AgentManifest();
    if (typeof data !== 'object' || Array.isArray(data)) throw new ManifestError('AGENT.md: the front matter must be a mapping');
    const record = data as Record<string, unknown>;
    const loop = record.loop ?? {};
    if (typeof loop !== 'object' || loop === null || Array.isArray(loop)) throw new ManifestError('AGENT.md: loop must be a mapping');
    const connections = (loop as Record<string, unknown>).connections ?? false;
    if (typeof connections !== 'boolean') throw new ManifestError('AGENT.md: loop.connections must be true or false');
    return new AgentManifest({
      name: optionalString(record, 'name'),
      description: optionalString(record, 'description'),
      connections,
    });
  }

  /** Reads and parses an `AGENT.md` file; {@link ManifestError} when it cannot be read or is invalid. */
  static async fromPath(path: string): Promise<AgentManifest> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw new ManifestError(`AGENT.md: ${path}: ${(error as Error).message}`);
    }
    return AgentManifest.fromMarkdown(text);
  }

  /** True when `requestConnection` is on. */
  get connectionsEnabled(): boolean {
    return this.connections;
  }
}
