// The `cacheward` entry point: the prefix model and its comparison, the analysis of captures and transcripts,
// the cache models' simulation, clocks and errors. Only what a user needs; never an internal (cacheward/internal).

export {
  type AnalysisResult,
  type AnalyzedRequest,
  type AnalyzeOptions,
  analyzeRecords,
  type BustCause,
  type Miss,
  type MissDetail,
  type SessionSummary,
} from './analyze/analyze-captures.js';
export { describeMiss } from './analyze/describe-miss.js';
export { type PriceRow, PriceTable } from './analyze/price-table.js';
export {
  type SimulatedResult,
  type SimulateOptions,
  simulateRequests,
  type TimedRequest,
} from './cache/simulate-requests.js';
export { type ReadCapturesOptions, type ReadRecord, readCaptures } from './capture/capture-reader.js';
export { type AdvanceableClock, type Clock, OffsetClock, VirtualClock } from './core/clock.js';
export { CachewardError, type ErrorCode } from './core/errors.js';
export {
  type Prefix,
  type PrefixBlock,
  PrefixBuilder,
  type PrefixBuilderOptions,
  type PrefixLevel,
  type PrefixLevelInfo,
} from './prefix/build-prefix.js';
export { describeComparison } from './prefix/describe-divergence.js';
export {
  type BlocksChange,
  comparePrefixes,
  type Divergence,
  firstDivergence,
  type ParamChange,
  type ParamsChange,
  type PrefixChange,
  type PrefixComparison,
  type ToolsChange,
} from './prefix/first-divergence.js';
export type { CaptureRecord } from './record/capture-record.js';
export { type AnalyzePathsOptions, analyzePaths } from './report/analyze-paths.js';
export { renderHtmlReport } from './report/html-report.js';
export { loadPriceFile } from './report/price-file.js';
export { renderTerminalReport, type TerminalStyles } from './report/terminal-report.js';
export type { ParseRequestOptions } from './wire/request-body.js';
