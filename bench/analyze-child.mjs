// Runs the analysis of one capture folder and prints its time and peak RSS as JSON (for bench/analyze.ts).
// argv: the capture folder, then optionally another build's dist/index.js (a before/after run).
const { analyzePaths, PriceTable, tuneHeapForAnalysis } = await import(process.argv[3] ?? '../dist/index.js');
// What `cacheward report` does before it analyzes (a build from before it had this runs without).
tuneHeapForAnalysis?.();

let peak = process.memoryUsage().rss;
const timer = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 20);
const t0 = performance.now();
const result = await analyzePaths([process.argv[2]], { prices: new PriceTable(), keepRequests: false });
const ms = performance.now() - t0;
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
process.stdout.write(
  JSON.stringify({ ms, records: result.generatedFrom.records, peakRss: peak, misses: result.misses.length }),
);
