// Benchmark: parse + blocks + hashes + token estimates for 50 KB, 1 MB and 10 MB request bodies, beside
// plain JSON.parse of the same bodies in the same run, and the incremental case (a request extending the last).
// Run: npm run bench:prefix   (builds, then runs the built code; well under two minutes)

import { PrefixBuilder } from '../dist/index.js';
import { agentConversation, appendUserTurn } from '../src/sim/agent-conversation.js';
import { type Json, machineLine } from './support.js';

/** An agent body of about `targetBytes`, grown turn by turn. */
function bodyOfSize(targetBytes: number): Json {
  let turns = 4;
  let body = agentConversation({ turns });
  let size = Buffer.byteLength(JSON.stringify(body));
  while (size < targetBytes) {
    turns = Math.ceil(turns * Math.max(1.02, targetBytes / size));
    body = agentConversation({ turns });
    size = Buffer.byteLength(JSON.stringify(body));
  }
  return body;
}

/**
 * Runs each function in batches (a batch of one function, then a batch of the next, round after round)
 * for about `ms`, and returns each one's median ms per call. Batching keeps one function's garbage from
 * being collected on another's clock.
 */
function batched(fns: Record<string, () => void>, ms: number, batch: number): Record<string, number> {
  const samples: Record<string, number[]> = {};
  for (const [name, fn] of Object.entries(fns)) {
    samples[name] = [];
    for (let i = 0; i < 3; i++) fn();
  }
  const end = performance.now() + ms;
  let rounds = 0;
  while (performance.now() < end || rounds < 3) {
    for (const [name, fn] of Object.entries(fns)) {
      const list = samples[name] as number[];
      for (let i = 0; i < batch; i++) {
        const t = performance.now();
        fn();
        list.push(performance.now() - t);
      }
    }
    rounds++;
  }
  const out: Record<string, number> = {};
  for (const [name, list] of Object.entries(samples)) {
    list.sort((a, b) => a - b);
    out[name] = list[Math.floor(list.length / 2)] as number;
  }
  return out;
}

const extendMs: number[] = [];
console.log(machineLine('prefix'));
console.log('median of batched runs; MB = 10^6 bytes\n');
const header = [
  'body',
  'bytes',
  'blocks',
  'JSON.parse(str)',
  'JSON.parse(bytes)',
  'prefix cold',
  'ratio',
  'extend (new blocks hashed)',
];
console.log(header.join(' | '));
console.log(header.map(() => '---').join(' | '));
for (const [label, target] of [
  ['50 KB', 50 * 1024],
  ['1 MB', 1024 * 1024],
  ['10 MB', 10 * 1024 * 1024],
] as const) {
  const body = bodyOfSize(target);
  const text = JSON.stringify(body);
  const bytes = Buffer.from(text);
  const next = Buffer.from(JSON.stringify(appendUserTurn(body, 'one more turn')));
  let blocks = 0;
  const warm = new PrefixBuilder();
  let hashed = 0;
  const t = batched(
    {
      parseString: () => JSON.parse(text),
      parseBytes: () => JSON.parse(bytes.toString('utf8')),
      cold: () => {
        blocks = new PrefixBuilder().parse(bytes).blocks.length;
      },
      extend: () => {
        // The builder last saw `bytes`; the next request appends a turn and moves the cache marker.
        warm.parse(bytes);
        const before = warm.units.stats.computed + warm.units.stats.remembered;
        const t0 = performance.now();
        warm.parse(next);
        extendMs.push(performance.now() - t0);
        hashed = warm.units.stats.computed + warm.units.stats.remembered - before;
      },
    },
    target > 5e6 ? 20_000 : 8_000,
    target > 5e6 ? 3 : 20,
  );
  const mbps = (ms: number | undefined) => `${(bytes.length / 1e6 / ((ms ?? 1) / 1000)).toFixed(0)} MB/s`;
  extendMs.sort((a, b) => a - b);
  const ext = extendMs[Math.floor(extendMs.length / 2)] ?? 0;
  extendMs.length = 0;
  console.log(
    [
      label,
      bytes.length.toLocaleString('en-US'),
      blocks.toLocaleString('en-US'),
      mbps(t.parseString),
      mbps(t.parseBytes),
      mbps(t.cold),
      ((t.parseString ?? 0) / (t.cold ?? 1)).toFixed(2),
      `${ext.toFixed(2)} ms (${hashed} of ${blocks + 2})`,
    ].join(' | '),
  );
}
console.log('\nratio = prefix cold throughput / JSON.parse(str) throughput; the floor at 1 MB is 0.33.');
console.log(
  'extend = the same builder, fed the next request (one more turn): only its new blocks are hashed.',
);
