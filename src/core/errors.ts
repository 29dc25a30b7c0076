// Error classes with stable `code`s, and how any error is told in one line, shared by every cacheward module.
// Must never carry request secrets (API keys, authorization headers) in a message.

/**
 * Every code an error cacheward throws can carry: one closed union, each documented in docs/errors.md
 * (what it means, what to do). A new code is added here and there together.
 */
export type ErrorCode =
  | 'CW_ALREADY_LISTENING'
  | 'CW_CACHE_ASSERTION'
  | 'CW_CAPTURE_BODY'
  | 'CW_CAPTURE_WRITE'
  | 'CW_CAS_CONFLICT'
  | 'CW_CAS_CORRUPT'
  | 'CW_CAS_LOCK'
  | 'CW_CAS_DIR'
  | 'CW_CAS_NAME'
  | 'CW_CAS_NOT_READ'
  | 'CW_CLOCK'
  | 'CW_DEMO_STEP'
  | 'CW_FIX_INPUT'
  | 'CW_FIX_PATCH'
  | 'CW_FORK_CHAIN'
  | 'CW_FORK_PARITY'
  | 'CW_FORK_REFUSED'
  | 'CW_INPUT'
  | 'CW_JSON_DEPTH'
  | 'CW_JSON_SYNTAX'
  | 'CW_LOCAL_CA'
  | 'CW_LOCK_UNSUPPORTED'
  | 'CW_NOT_LISTENING'
  | 'CW_OTLP_CONFIG'
  | 'CW_PRICE_FILE'
  | 'CW_PROXY_CONFIG'
  | 'CW_SIM_FAULT_SPEC'
  | 'CW_SIM_SCRIPT'
  | 'CW_STATE_CONFIG'
  | 'CW_STATE_FILE'
  | 'CW_STREAM_FORMAT'
  | 'CW_TESTBED_EMPTY'
  | 'CW_UNKNOWN_FIX'
  | 'CW_WIRE_FORMAT';

/** Base class: every error cacheward raises on purpose has a stable, documented `code`. */
export class CachewardError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * An input cacheward was given and cannot use (a bad argument, a path that does not exist or cannot be read,
 * a file that is not what it should be): the message names it and says what to pass.
 */
export class InputError extends CachewardError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CW_INPUT', message, options);
  }
}

/** Where in a text a problem was found. `offset` counts bytes of the UTF-8 text; line and column count from 1. */
export interface TextPosition {
  offset: number;
  line: number;
  column: number;
}

/** The input is not valid JSON. Names the byte offset, line and column of the first bad character. */
export class JsonSyntaxError extends CachewardError {
  readonly position: TextPosition;
  readonly detail: string;
  constructor(detail: string, position: TextPosition) {
    super(
      'CW_JSON_SYNTAX',
      `invalid JSON at line ${position.line}, column ${position.column} (byte ${position.offset}): ${detail}`,
    );
    this.position = position;
    this.detail = detail;
  }
}

/** The input nests arrays and objects deeper than the limit: refused before any recursive code sees it. */
export class JsonDepthError extends CachewardError {
  readonly position: TextPosition;
  readonly maxDepth: number;
  constructor(maxDepth: number, position: TextPosition) {
    super(
      'CW_JSON_DEPTH',
      `the JSON nests arrays and objects deeper than ${maxDepth} levels (at line ${position.line}, column ${position.column}, byte ${position.offset}); flatten that value`,
    );
    this.position = position;
    this.maxDepth = maxDepth;
  }
}

/** The input is JSON but not a request body of the expected provider format. `path` is a JSON pointer-like path. */
export class WireFormatError extends CachewardError {
  readonly path: string;
  readonly detail: string;
  readonly position: TextPosition | undefined;
  constructor(path: string, detail: string, position?: TextPosition) {
    const where = position ? ` (line ${position.line}, column ${position.column})` : '';
    super('CW_WIRE_FORMAT', `${path}${where}: ${detail}`);
    this.path = path;
    this.detail = detail;
    this.position = position;
  }
}

/** A server-sent event stream could not be read: bad JSON in an event, or an event out of order. */
export class StreamFormatError extends CachewardError {
  readonly eventIndex: number;
  constructor(eventIndex: number, detail: string) {
    super('CW_STREAM_FORMAT', `event ${eventIndex}: ${detail}`);
    this.eventIndex = eventIndex;
  }
}

/**
 * Any error as one line: a Node system error's message already names its code (`ENOTDIR: not a directory,
 * mkdir 'x'`, or after a prefix of ours: `writing F: EFBIG: …`), so the code is added only to a message that
 * lacks it; anything else as a string.
 */
export function errorLine(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code !== 'string' || err.message.includes(code)) return err.message;
  return `${code}: ${err.message}`;
}

/** Whether a failed write failed for want of space (`ENOSPC`, or a quota's `EDQUOT`). */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** A failed write as one line ({@link errorLine}), a full disk said as one: `the disk is full (ENOSPC: …)`. */
export function writeErrorLine(err: unknown): string {
  const text = errorLine(err);
  return isDiskFull(err) ? `the disk is full (${text})` : text;
}
