// The default token estimator: a deterministic, dependency-free guess of how many tokens a block costs.
// It must never read anything but its argument, so the same block always gets the same estimate.

import { isAscii } from 'node:buffer';
import { encryptedReasoningTokens } from './encrypted-reasoning.js';

/** What an estimator sees of a block: its kind and its canonical JSON (cache markers removed). */
export interface EstimatorInput {
  kind: string;
  level: 'tools' | 'system' | 'messages';
  /** The canonical JSON as UTF-8 bytes. */
  bytes: Uint8Array;
  /** The block nests no other blocks (text, a tool, a tool_result with string content, …). */
  flat?: boolean;
  /** The canonical JSON as text (decoded on first call). */
  text(): string;
}

/** A pluggable token estimator. It must be deterministic: estimates are memoized per block identity. */
export type TokenEstimator = (block: EstimatorInput) => number;

/** Images are billed by their pixel size, which the body does not say without decoding: a fixed 1,600. */
export const IMAGE_TOKENS = 1600;

/**
 * Kinds whose JSON holds no nested blocks. Inside JSON strings quotes are escaped, so a structural needle
 * such as `"type":"image"` or `"data":"` can only occur in blocks that nest others: flat kinds skip the search.
 */
export const FLAT_KINDS: ReadonlySet<string> = new Set([
  'text',
  'input_text',
  'output_text',
  'tool',
  'tool_use',
  'tool_call',
  'thinking',
  'redacted_thinking',
]);

const BASE64_DATA = /"data":"[A-Za-z0-9+/=]{256,}"/g;
const DATA_NEEDLE = Buffer.from('"data":"');

/**
 * The default estimator. English text and JSON run at about four characters a token in current
 * tokenizers; text outside ASCII at about one token per two UTF-8 bytes. So: ASCII bytes ÷ 4 plus
 * non-ASCII bytes ÷ 2, rounded up, at least 1. Base64 payloads (images, PDFs) are not text: an image
 * counts {@link IMAGE_TOKENS}; other base64 data one token per 750 decoded bytes. A reasoning item whose
 * `encrypted_content` the simulator wrote counts the reasoning tokens it stands for. Real counts come from
 * the provider's usage; this estimate only has to size blocks consistently.
 */
export const defaultTokenEstimator: TokenEstimator = ({ kind, bytes, text, flat }) => {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // A Responses reasoning item sent back counts as the reasoning it stands for (encrypted-reasoning.ts).
  if (kind === 'reasoning') {
    const reasoning = encryptedReasoningTokens(buf);
    if (reasoning !== undefined) return reasoning;
  }
  let ascii = 0;
  let other = 0;
  let extra = 0;
  // A base64 payload sits in a structural `"data":"` member, never inside a flat text-like block.
  if (buf.length > 512 && !(flat ?? FLAT_KINDS.has(kind)) && buf.indexOf(DATA_NEEDLE) >= 0) {
    const source = text();
    const stripped = source.replace(BASE64_DATA, (m, offset: number) => {
      // An image's payload (its media type just before it, or an image block) counts as an image.
      const image =
        kind === 'image' || source.slice(Math.max(0, offset - 120), offset).includes('"media_type":"image/');
      extra += image ? IMAGE_TOKENS : Math.ceil(((m.length - 9) * 3) / 4 / 750);
      return '"data":""';
    });
    [ascii, other] = countBytes(Buffer.from(stripped));
  } else [ascii, other] = countBytes(buf);
  if (kind === 'image' && extra === 0) extra = IMAGE_TOKENS;
  return Math.max(1, Math.ceil(ascii / 4 + other / 2) + extra);
};

/** ASCII bytes and other bytes. */
function countBytes(buf: Buffer): [number, number] {
  if (isAscii(buf)) return [buf.length, 0];
  let ascii = 0;
  for (let i = 0; i < buf.length; i++) if ((buf[i] as number) < 0x80) ascii++;
  return [ascii, buf.length - ascii];
}
