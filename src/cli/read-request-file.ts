// Reads a request body for the CLI from a file (or `-` for stdin): a bare body, or an exchange wrapper
// `{"route"?, "headers"?, "body": {...}}` such as a capture record. It never prints or keeps header secrets.

import { readFile } from 'node:fs/promises';
import { InputError, JsonDepthError, JsonSyntaxError, WireFormatError } from '../core/errors.js';
import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { byteToPosition, parseSpan, scanJson } from '../wire/json-scan.js';
import {
  detectBodyFormat,
  formatFromRoute,
  parseRequestBody,
  type WireFormat,
} from '../wire/request-body.js';

/** A file the CLI could not use (core/errors, shared with the capture reader): the message names the file, and the line and column where known. */

/** Options for {@link readRequestFile}. */
export interface ReadRequestOptions {
  format?: WireFormat;
  stdin?: NodeJS.ReadableStream;
}

const EXCHANGE_KEYS = new Set(['body', 'headers', 'route', 'request']);

/** Reads and parses one request file into its prefix, reporting any problem as an {@link InputError}. */
export async function readRequestFile(
  path: string,
  builder: PrefixBuilder,
  options: ReadRequestOptions = {},
): Promise<Prefix> {
  let bytes: Uint8Array;
  try {
    bytes = path === '-' ? await readAll(options.stdin ?? process.stdin) : await readFile(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw new InputError(`${path}: cannot read: ${reason}`, { cause: err });
  }
  return parseRequestBytes(bytes, path, builder, options);
}

/** What a request's bytes came with: its route and the headers that shape the prefix (a capture record's). */
export interface RequestContext {
  route?: string;
  headers?: Record<string, string>;
}

/**
 * Parses request bytes (a body or an exchange wrapper) into a prefix; `label` names them in errors.
 * A `--format` that contradicts the route or what the body plainly is, is refused naming the real format.
 */
export function parseRequestBytes(
  bytes: Uint8Array,
  label: string,
  builder: PrefixBuilder,
  options: ReadRequestOptions = {},
  context: RequestContext = {},
): Prefix {
  let offset = 0;
  try {
    const root = scanJson(bytes, { members: {} });
    let body = bytes;
    let route = context.route;
    let headers = context.headers;
    const bodyNode = root.type === 'object' ? root.members.get('body') : undefined;
    if (
      root.type === 'object' &&
      bodyNode?.type === 'leaf' &&
      bodyNode.first === 0x7b &&
      [...root.members.keys()].every((k) => EXCHANGE_KEYS.has(k))
    ) {
      offset = bodyNode.start;
      body = bytes.subarray(bodyNode.start, bodyNode.end);
      const r = root.members.get('route');
      if (r) route = String(parseSpan(bytes, r.start, r.end));
      const h = root.members.get('headers');
      if (h) headers = parseSpan(bytes, h.start, h.end) as Record<string, string>;
    }
    if (options.format) checkFormat(body, label, options.format, route);
    const opts = {
      ...(options.format ? { format: options.format } : {}),
      ...(route ? { route } : {}),
      ...(headers ? { headers } : {}),
    };
    return builder.build(parseRequestBody(body, opts));
  } catch (err) {
    if (err instanceof JsonSyntaxError) {
      const p = byteToPosition(bytes, err.position.offset + offset);
      throw new InputError(`${label}:${p.line}:${p.column}: invalid JSON (byte ${p.offset}): ${err.detail}`, {
        cause: err,
      });
    }
    if (err instanceof JsonDepthError) {
      const p = byteToPosition(bytes, err.position.offset + offset);
      throw new InputError(
        `${label}:${p.line}:${p.column}: nested deeper than ${err.maxDepth} levels (byte ${p.offset}); not a request body cacheward reads`,
        { cause: err },
      );
    }
    if (err instanceof WireFormatError) {
      const p = err.position ? byteToPosition(bytes, err.position.offset + offset) : undefined;
      const where = p ? `${label}:${p.line}:${p.column}` : label;
      throw new InputError(`${where}: not a request body: ${err.path}: ${err.detail}`, { cause: err });
    }
    throw err;
  }
}

/** `--format F` on a body that is plainly another format would compare the wrong blocks: refuse it. */
function checkFormat(body: Uint8Array, label: string, format: WireFormat, route: string | undefined): void {
  const fromRoute = formatFromRoute(route);
  if (fromRoute && fromRoute !== format)
    throw new InputError(
      `${label}: --format ${format}, but its route ${route} carries ${fromRoute}; drop --format or pass --format ${fromRoute}`,
    );
  const detected = detectBodyFormat(body);
  if (detected.decisive && detected.format !== format)
    throw new InputError(
      `${label}: --format ${format}, but this body is ${detected.format} (detected from its fields); drop --format or pass --format ${detected.format}`,
    );
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}
