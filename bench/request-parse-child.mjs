// Times JSON.parse of every request body a transcript folder stands for (the reader rebuilds them; only the
// parse is timed) and prints the time, the bytes and the count as JSON (for bench/transcripts.ts).
const { readCaptures } = await import(new URL('../dist/index.js', import.meta.url).href);
let ms = 0;
let bytes = 0;
let requests = 0;
for await (const r of readCaptures([process.argv[2]])) {
  if (!r.body) continue;
  const text = String(r.body);
  const t0 = performance.now();
  JSON.parse(text);
  ms += performance.now() - t0;
  bytes += Buffer.byteLength(text);
  requests++;
}
process.stdout.write(JSON.stringify({ ms, bytes, requests }));
