// The simulator's encrypted reasoning round-trips, and a reasoning item sent back counts as its reasoning.
// Pure: it never reads real encrypted content.

import { describe, expect, it } from 'vitest';
import { parsePrefix } from './build-prefix.js';
import { decodeReasoning, encodeReasoning, reasoningTokens } from './encrypted-reasoning.js';

describe('encrypted reasoning', () => {
  it('round-trips the reasoning tokens and refuses anything it did not write', () => {
    const e = encodeReasoning(321, 'resp_1:rs_1');
    expect(e.startsWith('gAAAAAB')).toBe(true);
    expect(decodeReasoning(e)).toBe(321);
    expect(encodeReasoning(321, 'resp_2:rs_1')).not.toBe(e);
    expect(decodeReasoning('gAAAAABnot-base64-json')).toBeUndefined();
    expect(
      decodeReasoning(`gAAAAAB${Buffer.from('{"reasoning_tokens":5}').toString('base64url')}`),
    ).toBeUndefined();
    expect(reasoningTokens('abcd'.repeat(10))).toBe(10);
  });

  it('makes a reasoning input item count as the reasoning it stands for', () => {
    const item = (encrypted: string) => ({
      model: 'gpt-5.6',
      input: [
        { role: 'user', content: 'q' },
        {
          type: 'reasoning',
          id: 'rs_1',
          summary: [{ type: 'summary_text', text: 'short' }],
          encrypted_content: encrypted,
        },
      ],
    });
    const p = parsePrefix(JSON.stringify(item(encodeReasoning(5000, 's'))), { format: 'openai-responses' });
    expect(p.blocks[1]?.tokens).toBe(5000);
    // A provider's real (opaque) content is estimated from its bytes like anything else.
    const real = parsePrefix(JSON.stringify(item(`gAAAAAB${'x'.repeat(4000)}`)), {
      format: 'openai-responses',
    });
    expect(real.blocks[1]?.tokens).toBeGreaterThan(1000);
    expect(real.blocks[1]?.tokens).toBeLessThan(1100);
  });
});
