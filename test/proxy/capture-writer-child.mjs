// A process that feeds the built CaptureWriter (full mode, its default bounds) records with bodies of a size,
// far faster than a disk takes them, and says on stdout when each was taken (`taken ID AT body|lean`: with
// its body or without) and that it is still running (`tick AT`), for kill -9 tests.
// Usage: node capture-writer-child.mjs DIR BODY_BYTES
import { randomBytes } from 'node:crypto';
import { CaptureWriter } from '../../dist/internal.js';

const [dir, bytes] = [process.argv[2], Number(process.argv[3])];
const writer = new CaptureWriter({ dir, mode: 'full', clock: { now: () => Date.now() } });
await writer.flush();
// Distinct bodies, made once (making them must not be the load): a session never sends the same one twice
// in a row, and random text leaves no delta to shrink them.
const bodies = Array.from({ length: 9 }, (_, i) =>
  Buffer.from(
    JSON.stringify({
      model: 'claude-opus-5',
      max_tokens: 8,
      messages: [
        { role: 'user', content: `${i} ${randomBytes(Math.floor(bytes * 0.75)).toString('base64')}` },
      ],
    }),
  ),
);
let n = 0;
const say = (line) => process.stdout.write(`${line}\n`);
say('ready');
// The last moment this process is known to have run: a kill -9 is judged from here, not from the moment
// the parent sent it (a busy machine may not have run this process for a while before).
setInterval(() => say(`tick ${Date.now()}`), 5);
// Eight exchanges end every 10 ms: 2 GB/s of bodies offered for 2.5 MB ones, far past any disk's pace.
setInterval(() => {
  for (let k = 0; k < 8; k++) {
    const id = `k${n++}`;
    const body = bodies[n % 9];
    const before = writer.state();
    writer.write(
      {
        v: 1,
        id,
        times: { start: Date.now(), end: Date.now() },
        session: { key: `s${k}`, source: 'header' },
        provider: 'anthropic',
        route: '/v1/messages',
        method: 'POST',
        outcome: 'complete',
        stream: false,
        headers: {},
        betas: [],
        requestBytes: body.length,
        fixes: [],
      },
      { forwarded: body },
    );
    const after = writer.state();
    if (after.dropped === before.dropped)
      say(`taken ${id} ${Date.now()} ${after.bodiesDropped === before.bodiesDropped ? 'body' : 'lean'}`);
  }
}, 10);
