// Runs the analyzer over capture files or folders and agent transcripts: reads them as a stream (no bodies),
// reports torn lines and progress, fills in the sentences. Several folders (a fleet's proxies, transcripts beside
// captures) are merged by time into one traffic, each call counted once. The shell for `report` and `whatif`;
// the analysis itself is pure.

import { type AnalysisResult, type AnalyzeOptions, analyzeRecords } from '../analyze/analyze-captures.js';
import { describeMiss } from '../analyze/describe-miss.js';
import type { ReadRecord } from '../capture/capture-reader.js';
import { mergeCaptures } from '../capture/merge-captures.js';
import type { CaptureRecord } from '../record/capture-record.js';

export interface AnalyzePathsOptions extends AnalyzeOptions {
  onWarning?: (message: string) => void;
  onProgress?: (file: string, bytes: number, size: number) => void;
}

export async function analyzePaths(
  paths: readonly string[],
  options: AnalyzePathsOptions,
): Promise<AnalysisResult> {
  let skipped = 0;
  let duplicates = 0;
  // Exchanges the proxies said they did not capture, each marker once (a file can be read twice).
  const markers = new Map<string, number>();
  const files = new Set<string>();
  async function* records(): AsyncGenerator<CaptureRecord> {
    const read: AsyncGenerator<ReadRecord> = mergeCaptures(paths, {
      bodies: false,
      onDuplicate: () => duplicates++,
      onNotCaptured: (m) => markers.set(m.id, m.exchanges),
      onWarning: (w) => {
        // Other warnings are about a request that was read (a transcript's note, an incomplete base).
        if (w.includes(': skipped ')) skipped++;
        options.onWarning?.(w);
      },
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    for await (const r of read) {
      files.add(r.file);
      yield r.record;
    }
  }
  const result = await analyzeRecords(records(), options);
  if (duplicates)
    options.onWarning?.(
      `${duplicates} record${duplicates === 1 ? '' : 's'} appeared in more than one file (captures or transcripts) and were counted once: one call is one request wherever it was recorded`,
    );
  result.generatedFrom.files = files.size;
  result.generatedFrom.skippedLines = skipped;
  result.generatedFrom.notCaptured = [...markers.values()].reduce((a, b) => a + b, 0);
  for (const m of result.misses) m.sentence = describeMiss(m);
  return result;
}
