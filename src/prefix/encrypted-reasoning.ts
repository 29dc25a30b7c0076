// The simulator's `encrypted_content` for Responses reasoning items: opaque to clients, but it carries how
// many reasoning tokens it stands for, so a reasoning item sent back counts as that reasoning. Pure codec.
//
// Real encrypted content cannot be read; such items are estimated from their bytes like any other block.

/** The `include` value that asks for it (Responses API). */
export const ENCRYPTED_REASONING_INCLUDE = 'reasoning.encrypted_content';

/** Real encrypted content looks like a Fernet token; the simulator's keeps the look and a readable core. */
const PREFIX = 'gAAAAAB';
const MARK = 'cacheward-sim-reasoning:v1';
const NEEDLE = Buffer.from(`"encrypted_content":"${PREFIX}`);

/** Reasoning tokens of a text, as the simulator counts them (about four characters a token, at least 1). */
export function reasoningTokens(text: string): number {
  return Math.max(1, Math.ceil(Buffer.byteLength(text) / 4));
}

/** The opaque string that stands for `tokens` reasoning tokens (`salt` makes equal counts differ). */
export function encodeReasoning(tokens: number, salt: string): string {
  const payload = JSON.stringify({ mark: MARK, reasoning_tokens: tokens, salt });
  return PREFIX + Buffer.from(payload).toString('base64url');
}

/** The reasoning tokens an encrypted_content the simulator wrote stands for, or undefined for any other. */
export function decodeReasoning(encrypted: string): number | undefined {
  if (!encrypted.startsWith(PREFIX)) return undefined;
  try {
    const v = JSON.parse(Buffer.from(encrypted.slice(PREFIX.length), 'base64url').toString('utf8')) as {
      mark?: unknown;
      reasoning_tokens?: unknown;
    };
    return v.mark === MARK && Number.isInteger(v.reasoning_tokens) && (v.reasoning_tokens as number) > 0
      ? (v.reasoning_tokens as number)
      : undefined;
  } catch {
    return undefined;
  }
}

/** In a reasoning item's canonical JSON: the tokens its simulator-written encrypted_content stands for. */
export function encryptedReasoningTokens(bytes: Buffer): number | undefined {
  const at = bytes.indexOf(NEEDLE);
  if (at < 0) return undefined;
  const start = at + NEEDLE.length - PREFIX.length;
  const end = bytes.indexOf(0x22, start);
  return end < 0 ? undefined : decodeReasoning(bytes.toString('latin1', start, end));
}
