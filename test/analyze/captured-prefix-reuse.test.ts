// The live analysis rebuilds each record's prefix from its captured blocks: with many conversations that
// share their tools interleaved (a proxy's traffic), each must extend from its own previous record.
import { describe, expect, it } from 'vitest';
import { CapturedPrefixReuse, prefixFromCapture } from '../../src/analyze/captured-prefix.js';
import { type Prefix, PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { capturePrefix } from '../../src/record/capture-record.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';

const bytes = (v: unknown) => Buffer.from(JSON.stringify(v));

describe('CapturedPrefixReuse', () => {
  it('extends each of many interleaved conversations with the same tools from its own previous record', () => {
    const builder = new PrefixBuilder();
    const reuse = new CapturedPrefixReuse();
    const convs = Array.from({ length: 40 }, (_, i) => agentConversation({ turns: 3, seed: 500 + i }));
    let captured = capturePrefix(builder.parse(bytes(convs[0])));
    const rebuilt = (c: unknown): Prefix => {
      captured = capturePrefix(builder.parse(bytes(c)));
      return prefixFromCapture(captured, 'claude-opus-5', [], reuse);
    };
    const last = convs.map((c) => rebuilt(c));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < convs.length; i++) {
        convs[i] = appendUserTurn(convs[i] as (typeof convs)[number], `round ${round} of ${i}`);
        const got = rebuilt(convs[i]);
        const prev = last[i] as Prefix;
        // Every block before the one that lost its marker is the previous record's very object.
        expect(got.blocks.filter((b, k) => b === prev.blocks[k]).length).toBe(prev.blocks.length - 1);
        // And the prefix is the one rebuilt with nothing to reuse.
        const alone = prefixFromCapture(captured, 'claude-opus-5', []);
        expect(got.blocks).toEqual(alone.blocks);
        expect(got.levels).toEqual(alone.levels);
        last[i] = got;
      }
    }
  });
});
