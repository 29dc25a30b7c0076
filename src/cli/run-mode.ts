// How `cacheward run` reaches each agent's traffic: Claude Code through the forward proxy (HTTPS_PROXY and
// the local CA, its base URL untouched), everything else through the base URL (Codex's WebSocket included).
// It only decides and writes environment; it never starts the proxy or the agent.

import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { InputError } from '../core/errors.js';

/** The agents `run` knows apart. */
export type AgentKind = 'claude' | 'codex' | 'other';

/** `forward`: HTTPS_PROXY at the proxy, the CA trusted; `base-url`: ANTHROPIC_BASE_URL / OPENAI_BASE_URL. */
export type RunMode = 'forward' | 'base-url';

const stem = (p: string | undefined) => (p ? basename(p).replace(/\.(c?js|mjs|exe|cmd)$/, '') : '');

/** Which agent a command is: its own name, or a node launcher's script (Claude Code's, Codex's). */
export function agentKind(command: string, args: readonly string[]): AgentKind {
  const viaNode = /^(node|nodejs)(\.exe)?$/.test(basename(command));
  const script = viaNode ? args[0] : command;
  const name = stem(script);
  if (name === 'codex') return 'codex';
  if (name === 'claude') return 'claude';
  // Claude Code's npm package run by node: `node …/@anthropic-ai/claude-code/cli.js` (or its wrapper).
  if (
    viaNode &&
    /[/\\]claude-code[^/\\]*[/\\](cli|cli-wrapper)$/.test((script ?? '').replace(/\.(c?js|mjs)$/, ''))
  )
    return 'claude';
  return 'other';
}

/** The mode for `agent`: Claude Code forward unless `--base-url`, others base URL unless `--forward`. */
export function runMode(agent: AgentKind, flags: { forward?: boolean; baseUrl?: boolean }): RunMode {
  if (flags.forward && flags.baseUrl) throw new InputError('--forward and --base-url: choose one');
  if (flags.forward) return 'forward';
  if (flags.baseUrl) return 'base-url';
  return agent === 'claude' ? 'forward' : 'base-url';
}

/** The forward-mode environment and what to remove after the run (a CA bundle made for it). */
export interface ForwardEnv {
  env: NodeJS.ProcessEnv;
  /** Warnings for the user (a base URL of theirs that forward mode will not see). */
  notes: string[];
  cleanup(): void;
}

/**
 * Turns `env` (the base-URL environment `agentEnv` made) into forward mode's: the base URLs back to what
 * the user had, HTTPS_PROXY (and https_proxy) at the proxy, NODE_EXTRA_CA_CERTS at the CA, or at a bundle
 * of the user's own extra CAs and it when they had some.
 */
export function forwardEnv(
  env: NodeJS.ProcessEnv,
  user: NodeJS.ProcessEnv,
  proxyUrl: string,
  caPath: string,
  openHosts: readonly string[],
): ForwardEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  const notes: string[] = [];
  for (const name of ['ANTHROPIC_BASE_URL', 'OPENAI_BASE_URL'] as const) {
    const mine = user[name];
    if (mine === undefined) delete out[name];
    else {
      out[name] = mine;
      let host = '';
      try {
        host = new URL(mine).hostname.toLowerCase();
      } catch {}
      if (!openHosts.includes(host))
        notes.push(
          `${name}=${mine} is set: forward mode only sees ${openHosts.join(', ')}; add --open-host ${host || 'HOST'} to capture it, or --base-url`,
        );
    }
  }
  if (user.HTTPS_PROXY || user.https_proxy)
    notes.push('your HTTPS_PROXY is replaced for the agent: cacheward does not chain to another proxy');
  out.HTTPS_PROXY = proxyUrl;
  out.https_proxy = proxyUrl;
  let cleanup = () => {};
  const theirs = user.NODE_EXTRA_CA_CERTS;
  if (theirs && theirs !== caPath) {
    // NODE_EXTRA_CA_CERTS names one file: theirs and the CA in one bundle, for this run.
    const bundle = `${caPath.replace(/\.pem$/, '')}-run-${process.pid}.pem`;
    let text: string;
    try {
      text = `${readText(theirs)}\n${readText(caPath)}`;
    } catch (err) {
      throw new InputError(`NODE_EXTRA_CA_CERTS=${theirs}: cannot read it: ${(err as Error).message}`);
    }
    writeFileSync(bundle, text, { mode: 0o644 });
    cleanup = () => rmSync(bundle, { force: true });
    out.NODE_EXTRA_CA_CERTS = bundle;
  } else out.NODE_EXTRA_CA_CERTS = caPath;
  return { env: out, notes, cleanup };
}

/** A small file of certificates, read before the agent starts. */
function readText(path: string): string {
  return readFileSync(path, 'utf8');
}

/** How the start line names the mode. */
export function modePhrase(agent: AgentKind, mode: RunMode): string {
  if (mode === 'forward') return 'the forward proxy (HTTPS_PROXY and the local CA; its base URL untouched)';
  return agent === 'codex' ? 'its base URL (Responses over WebSocket)' : 'its base URL';
}

/** The summary's transport line, from the proxy's final health. */
export function transportLine(
  mode: RunMode,
  websockets: { sockets: number; responses: number } | undefined,
): string {
  const how =
    mode === 'forward'
      ? 'forward proxy (HTTPS_PROXY, the local CA; base URL untouched)'
      : 'base URL (ANTHROPIC_BASE_URL, OPENAI_BASE_URL)';
  const ws = websockets?.responses
    ? `; ${websockets.responses} response${websockets.responses === 1 ? '' : 's'} over ${websockets.sockets} WebSocket${websockets.sockets === 1 ? '' : 's'}`
    : '';
  return `  transport: ${how}${ws}`;
}
