// Error classes with stable `code`s, shared by every cacheward module.
// Must never carry request secrets (API keys, authorization headers) in a message.

/** Base class: every error cacheward raises on purpose has a stable, documented `code`. */
export class CachewardError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
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
