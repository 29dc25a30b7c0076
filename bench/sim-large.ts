// Benchmark: one very long conversation per request (10k to 300k messages, up to ~16 MB) on each simulated
// route, over HTTP on loopback: time per request and per message, which must stay flat (linear total).
// Run: npm run bench:sim-large   (builds, starts `cacheward sim` in a child process; about a minute)

import { Pool } from 'undici';
import { machineLine, startCli } from './support.js';

type Json = Record<string, unknown>;

function messages(n: number): Json[] {
  const out: Json[] = [];
  for (let i = 0; i < n; i++)
    out.push({ role: i % 2 ? 'assistant' : 'user', content: `message number ${i}: ok` });
  return out;
}

const ROUTES: Array<[string, string, (m: Json[]) => Json]> = [
  [
    '/v1/messages',
    'anthropic',
    (m) => ({ model: 'claude-opus-5', max_tokens: 8, messages: m, cache_control: { type: 'ephemeral' } }),
  ],
  ['/v1/chat/completions', 'openai', (m) => ({ model: 'gpt-5.4', messages: m })],
  ['/v1/responses', 'openai', (m) => ({ model: 'gpt-5.4', input: m })],
];

async function main() {
  console.log(machineLine('sim-large'));
  const { child, url } = await startCli(['sim', '--port', '0']);
  const pool = new Pool(url, { connections: 2, headersTimeout: 600_000, bodyTimeout: 600_000 });
  try {
    console.log('\nroute | messages | body MB | ms | µs per message');
    console.log('--- | --- | --- | --- | ---');
    for (const n of [10_000, 100_000, 300_000]) {
      const list = messages(n);
      for (const [path, provider, make] of ROUTES) {
        const body = JSON.stringify(make(list));
        const headers =
          provider === 'anthropic'
            ? { 'content-type': 'application/json', 'x-api-key': 'bench-key' }
            : { 'content-type': 'application/json', authorization: 'Bearer bench-key' };
        // Each size is a new conversation: the first request of it writes, as a real agent's would.
        const t = performance.now();
        const res = await pool.request({ path, method: 'POST', headers, body });
        await res.body.arrayBuffer();
        const ms = performance.now() - t;
        if (res.statusCode !== 200) throw new Error(`${path}: status ${res.statusCode}`);
        console.log(
          `${path} | ${n.toLocaleString('en-US')} | ${(Buffer.byteLength(body) / 1e6).toFixed(1)} | ${ms.toFixed(0)} | ${((ms * 1000) / n).toFixed(1)}`,
        );
      }
    }
  } finally {
    await pool.close();
    child.kill('SIGTERM');
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
