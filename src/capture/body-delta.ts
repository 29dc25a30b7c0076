// Delta storage for full-mode captures: a request body as the bytes that changed from the previous body
// of the same session (shared prefix and suffix dropped). Pure; reconstruction is byte-exact or it throws.

import { isUtf8 as bufferIsUtf8 } from 'node:buffer';
import { hash } from 'node:crypto';
import { CachewardError } from '../core/errors.js';
import type { StoredBody } from '../record/capture-record.js';
import { sharedByteCount } from '../wire/json-scan.js';

function commonSuffix(a: Uint8Array, b: Uint8Array, max: number): number {
  let i = 0;
  while (i < max && a[a.length - 1 - i] === b[b.length - 1 - i]) i++;
  return i;
}

/** Moves a cut back so it does not split a UTF-8 character (continuation bytes are 10xxxxxx). */
function alignBack(b: Uint8Array, at: number): number {
  let i = at;
  while (i > 0 && i < b.length && ((b[i] as number) & 0xc0) === 0x80) i--;
  return i;
}

function alignForward(b: Uint8Array, at: number): number {
  let i = at;
  while (i < b.length && ((b[i] as number) & 0xc0) === 0x80) i++;
  return i;
}

function encode(bytes: Uint8Array): Pick<StoredBody, 'text' | 'b64'> {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return bufferIsUtf8(buf) ? { text: buf.toString('utf8') } : { b64: buf.toString('base64') };
}

/** `head`, then the stored bytes, size and sha256, in that key order (set, not spread: the faster path). */
function encoded(head: Partial<StoredBody>, bytes: Uint8Array, sha256: string, body: Uint8Array): StoredBody {
  const out = head as StoredBody;
  const e = encode(bytes);
  if (e.text !== undefined) out.text = e.text;
  else out.b64 = e.b64;
  out.size = body.length;
  out.sha256 = sha256;
  return out;
}

/** Stores `body` as a delta from `previous` (with its record id) when that saves space, else whole. */
export function storeBody(body: Uint8Array, previous?: { id: string; body: Uint8Array }): StoredBody {
  const sha256 = hash('sha256', body, 'base64');
  if (!previous) return encoded({}, body, sha256, body);
  const prev = previous.body;
  let p = sharedByteCount(prev, body);
  let s = commonSuffix(prev, body, Math.min(prev.length, body.length) - p);
  p = alignBack(body, p);
  const middleEnd = alignForward(body, body.length - s);
  s = body.length - middleEnd;
  if (p + s < body.length / 4) return encoded({}, body, sha256, body);
  return encoded(
    { base: previous.id, prefix: p, suffix: s },
    body.subarray(p, body.length - s),
    sha256,
    body,
  );
}

/** A stored body that cannot be rebuilt: its base is missing or the bytes do not match the checksum. */
export class BodyReconstructionError extends CachewardError {
  constructor(message: string) {
    super('CW_CAPTURE_BODY', message);
  }
}

/** Rebuilds a body; `lookup` returns an earlier rebuilt body by record id. Throws if it does not match. */
export function rebuildBody(stored: StoredBody, lookup: (id: string) => Uint8Array | undefined): Buffer {
  const middle =
    stored.b64 !== undefined ? Buffer.from(stored.b64, 'base64') : Buffer.from(stored.text ?? '', 'utf8');
  let body: Buffer;
  if (stored.base === undefined) body = middle;
  else {
    const base = lookup(stored.base);
    if (!base) throw new BodyReconstructionError(`the base body ${stored.base} is not in this capture`);
    const prefix = base.subarray(0, stored.prefix ?? 0);
    const suffix = base.subarray(base.length - (stored.suffix ?? 0));
    body = Buffer.concat([prefix, middle, suffix]);
  }
  if (body.length !== stored.size || hash('sha256', body, 'base64') !== stored.sha256) {
    throw new BodyReconstructionError('the rebuilt body does not match its recorded size and sha256');
  }
  return body;
}
