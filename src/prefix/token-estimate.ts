// The default token estimator: a deterministic, dependency-free guess of how many tokens a block costs.
// It must never read anything but its argument, so the same block always gets the same estimate.

/** What an estimator sees of a block: its kind and its canonical JSON (cache markers removed). */
export interface EstimatorInput {
  kind: string;
  level: 'tools' | 'system' | 'messages';
  canonical: string;
}

/** A pluggable token estimator. It must be deterministic: estimates are memoized per block identity. */
export type TokenEstimator = (block: EstimatorInput) => number;

/** Images are billed by their pixel size, which the body does not say without decoding: a fixed 1,600. */
export const IMAGE_TOKENS = 1600;

const BASE64_DATA = /"data":"[A-Za-z0-9+/=]{256,}"/g;

/**
 * The default estimator. English text and JSON run at about four characters a token in current
 * tokenizers; characters outside ASCII at about one token per two UTF-8 bytes. So: ASCII characters ÷ 4
 * plus non-ASCII bytes ÷ 2, rounded up, at least 1. Base64 payloads (images, PDFs) are not text: an image
 * counts {@link IMAGE_TOKENS}; other base64 data one token per 750 decoded bytes. Real counts come from
 * the provider's usage; this estimate only has to size blocks consistently.
 */
export const defaultTokenEstimator: TokenEstimator = ({ kind, canonical }) => {
  let text = canonical;
  let extra = 0;
  if (canonical.length > 512 && canonical.includes('"data":"')) {
    text = canonical.replace(BASE64_DATA, (m) => {
      extra += kind === 'image' ? IMAGE_TOKENS : Math.ceil(((m.length - 9) * 3) / 4 / 750);
      return '"data":""';
    });
  }
  if (kind === 'image' && extra === 0) extra = IMAGE_TOKENS;
  const bytes = Buffer.byteLength(text, 'utf8');
  const nonAsciiBytes = bytes - text.length;
  // For pure ASCII bytes === length. Otherwise each non-ASCII char adds 1-3 bytes over its length.
  const asciiChars = nonAsciiBytes > 0 ? countAscii(text) : text.length;
  const nonAscii = bytes - asciiChars;
  return Math.max(1, Math.ceil(asciiChars / 4 + nonAscii / 2) + extra);
};

function countAscii(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x80) n++;
  return n;
}
