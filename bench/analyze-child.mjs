// Runs the analysis of one capture folder and prints its time and peak RSS as JSON (for bench/analyze.ts).
// argv: the capture folder, then optionally another build's dist/index.js (a before/after run).
const index = new URL(process.argv[3] ?? '../dist/index.js', import.meta.url);
const root = await import(index.href);
const { analyzePaths, PriceTable } = root;
// What `cacheward report` does before it analyzes: cacheward/internal's (an older build: its root's, or none).
const internal = await import(new URL('internal.js', index).href).catch(() => ({}));
(internal.tuneHeapForAnalysis ?? root.tuneHeapForAnalysis)?.();

let peak = process.memoryUsage().rss;
const timer = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 20);
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const result = await analyzePaths([process.argv[2]], { prices: new PriceTable(), keepRequests: false });
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
process.stdout.write(
  JSON.stringify({
    ms,
    // CPU time (all threads: the collector's helpers too): steadier than wall time on a shared machine.
    cpuMs: (cpu.user + cpu.system) / 1000,
    records: result.generatedFrom.records,
    peakRss: peak,
    misses: result.misses.length,
  }),
);
