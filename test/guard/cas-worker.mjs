// A worker process for the CasFileStore tests: increments a counter N times (retrying lost races), or
// rewrites a large document forever (to be killed mid-write).
import { CasConflictError, CasFileStore } from '../../dist/guard/index.js';

const [mode, dir, n] = process.argv.slice(2);
const store = new CasFileStore(dir, { lockTimeoutMs: 30_000 });
if (mode === 'increment') {
  for (let i = 0; i < Number(n); i++) {
    for (;;) {
      const ctx = store.context();
      const doc = await ctx.read('counter.json');
      const value = doc ? JSON.parse(doc.content).value : 0;
      try {
        await ctx.write('counter.json', JSON.stringify({ value: value + 1 }));
        break;
      } catch (err) {
        if (!(err instanceof CasConflictError)) throw err;
      }
    }
  }
} else if (mode === 'churn') {
  for (let i = 0; ; i++) {
    const ctx = store.context();
    await ctx.read('big.json');
    await ctx.write('big.json', JSON.stringify({ generation: i, pad: String(i % 10).repeat(2_000_000) }));
    if (i === 0) process.stdout.write('started\n');
  }
}
