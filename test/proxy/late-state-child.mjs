// An app that closes its wrapFetch (fixes, stateDir) while a request is still out, reads the answer after,
// and then ends as a script does (no process.exit): what it leaves in the state folder is what was saved.
// Usage: node late-state-child.mjs STATE_DIR CAPTURE_DIR; prints the exchange's record id.
import { wrapFetch } from '../../dist/proxy/index.js';

const [stateDir, dir] = process.argv.slice(2);
let answer;
const later = new Promise((r) => {
  answer = r;
});
let id;
const f = wrapFetch(async () => later, {
  dir,
  stateDir,
  fixes: ['tools-freeze'],
  logger: { warn: () => {}, info: () => {} },
  onRecord: (r) => {
    id = r.id;
  },
});
const body = JSON.stringify({
  model: 'claude-opus-5',
  max_tokens: 64,
  tools: [{ name: 'alpha', description: 'a', input_schema: { type: 'object' } }],
  messages: [{ role: 'user', content: 'hello' }],
});
const pending = f('https://api.anthropic.com/v1/messages', { method: 'POST', body });
await new Promise((r) => setTimeout(r, 20));
await f.close();
answer(
  Response.json({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-opus-5',
    content: [{ type: 'text', text: 'hi' }],
    usage: { input_tokens: 10, output_tokens: 1 },
  }),
);
await (await pending).json();
await new Promise((r) => setImmediate(r));
process.stdout.write(`${id}\n`);
