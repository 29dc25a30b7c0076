// Full-mode captures for the CLI tests: a short agent session sent with the official Anthropic SDK through
// a real proxy into the simulator, with a tool added mid-session (one tools_changed miss).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { VirtualClock } from '../../src/core/clock.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';

type Json = Record<string, unknown>;

export interface Captured {
  dir: string;
  /** Record ids in the order sent. */
  ids: string[];
  /** The bodies as sent, in the same order. */
  bodies: Json[];
}

export async function fullCapture(): Promise<Captured> {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const dir = join(mkdtempSync(join(tmpdir(), 'cacheward-cli-')), 'captures');
  const proxy = createProxy({ upstream: simUrl, dir, clock, capture: 'full', logger: {} });
  await proxy.listen();
  const client = new Anthropic({
    apiKey: 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop',
    baseURL: proxy.url,
    maxRetries: 0,
    defaultHeaders: { 'x-cacheward-session': 'cli' },
  });
  const bodies: Json[] = [];
  let conv = agentConversation({ turns: 4, seed: 9 });
  bodies.push(conv);
  conv = appendUserTurn(conv, 'Run the tests.');
  bodies.push(conv);
  conv = appendUserTurn(conv, 'Query the database.');
  conv.tools = [
    ...(conv.tools as Json[]).slice(0, 2),
    anthropicTool('mcp__db__query'),
    ...(conv.tools as Json[]).slice(2),
  ];
  bodies.push(conv);
  try {
    for (const body of bodies) {
      clock.advance(3_000);
      await client.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming);
    }
    await proxy.flush();
  } finally {
    await proxy.close();
    await sim.close();
  }
  const ids: string[] = [];
  for await (const r of readCaptures([dir], { bodies: false })) ids.push(r.record.id);
  return { dir, ids, bodies };
}
