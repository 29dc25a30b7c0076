// The one `logger` option of the proxy, the simulator and wrapFetch: where they say what happened.
// A type and a pure adapter only: it never writes anywhere itself (each shell brings its stderr default).

/**
 * Where a cacheward server reports. Every method is optional; a logger that is given replaces the default
 * (stderr) entirely, so `logger: {}` is silent. `Row` is what `request` hears (the proxy's LiveRequest).
 */
export interface Logger<Row = never> {
  /** News that needs no action (OTLP export started). */
  info?(line: string): void;
  /** Something degraded while traffic goes on (capture, state, a fix that failed open). */
  warn?(line: string): void;
  /** An unexpected error: a bug, answered with a 500. `err` is what was thrown. */
  error?(line: string, err?: unknown): void;
  /** Every finished request, once analyzed (the proxy's and the CLI's per-request line). */
  request?(row: Row): void;
}

/** The four channels, each callable (a missing method is a no-op). */
export interface LoggerChannels<Row> {
  info(line: string): void;
  warn(line: string): void;
  error(line: string, err?: unknown): void;
  request(row: Row): void;
}

/** The logger given, or `fallback` when none was; missing methods do nothing. */
export function loggerChannels<Row>(
  given: Logger<Row> | undefined,
  fallback: Logger<Row>,
): LoggerChannels<Row> {
  const l = given ?? fallback;
  return {
    info: (line) => l.info?.(line),
    warn: (line) => l.warn?.(line),
    error: (line, err) => l.error?.(line, err),
    request: (row) => l.request?.(row),
  };
}

/** A logger that writes info, warn and error lines through `write`, each after `prefix: `. */
export function lineLogger<Row = never>(prefix: string, write: (line: string) => void): Logger<Row> {
  const say = (line: string) => write(`${prefix}: ${line}`);
  return { info: say, warn: say, error: say };
}
