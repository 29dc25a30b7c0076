// Captured prefixes rebuilt with reuse, as the reader hands them over (a record's first blocks are its delta
// base's own objects): the blocks, levels and message ends equal those rebuilt from scratch, through
// appends, an edit that rewinds the history, and a record of another conversation in between.
import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../prefix/build-prefix.js';
import { messageEnds } from '../prefix/message-ends.js';
import { type CapturedPrefix, capturePrefix } from '../record/capture-record.js';
import { CapturedPrefixReuse, prefixFromCapture } from './captured-prefix.js';

const request = (texts: string[]) =>
  capturePrefix(
    parsePrefix(
      JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 1024,
        system: 'You are careful.',
        messages: texts.map((text, i) => ({ role: i % 2 ? 'assistant' : 'user', content: text })),
      }),
      { format: 'anthropic-messages' },
    ),
  );

/** `next` with its first `shared` blocks replaced by `base`'s objects, as the capture reader does. */
function onBase(base: CapturedPrefix, next: CapturedPrefix, shared: number): CapturedPrefix {
  return { ...next, blocks: [...base.blocks.slice(0, shared), ...next.blocks.slice(shared)] };
}

describe('CapturedPrefixReuse', () => {
  it('rebuilds every record of a chain exactly as without reuse, message ends included', () => {
    const reuse = new CapturedPrefixReuse();
    const histories = [
      ['a'],
      ['a', 'b', 'c'],
      ['a', 'b', 'c', 'd', 'e'],
      ['a', 'b', 'x'], // an edit of the third message: the history rewinds
      ['a', 'b', 'x', 'y', 'z'],
    ];
    let previous: CapturedPrefix | undefined;
    const stranger = request(['other', 'conversation']);
    for (const h of histories) {
      const fresh = request(h);
      let captured = fresh;
      if (previous) {
        let shared = 0;
        while (
          shared < previous.blocks.length &&
          shared < fresh.blocks.length &&
          JSON.stringify(previous.blocks[shared]) === JSON.stringify(fresh.blocks[shared])
        )
          shared++;
        captured = onBase(previous, fresh, shared);
      }
      const reused = prefixFromCapture(captured, 'claude-opus-5', [], reuse);
      const alone = prefixFromCapture(fresh, 'claude-opus-5');
      expect(reused.blocks).toEqual(alone.blocks);
      expect(reused.levels).toEqual(alone.levels);
      expect(reuse.messageEnds(captured.blocks, reused)).toEqual(messageEnds(alone));
      // Another conversation in between shares nothing and changes nothing of this chain.
      const other = prefixFromCapture(stranger, 'claude-opus-5', [], reuse);
      expect(reuse.messageEnds(stranger.blocks, other)).toEqual(messageEnds(other));
      previous = captured;
    }
  });

  it('takes a Claude Code-shaped chain over past the tools and system that moved in the body', () => {
    const reuse = new CapturedPrefixReuse();
    // Claude Code's key order: messages, then system, then tools. Every turn moves the tools' bytes.
    const ccRequest = (texts: string[]) =>
      capturePrefix(
        parsePrefix(
          JSON.stringify({
            model: 'claude-opus-5',
            max_tokens: 1024,
            messages: texts.map((text, i) => ({ role: i % 2 ? 'assistant' : 'user', content: text })),
            system: [{ type: 'text', text: 'You are careful.', cache_control: { type: 'ephemeral' } }],
            tools: [
              { name: 'Read', description: 'Reads a file.', input_schema: { type: 'object' } },
              { name: 'Bash', description: 'Runs a command.', input_schema: { type: 'object' } },
            ],
          }),
          { format: 'anthropic-messages' },
        ),
      );
    const histories = [
      ['a'],
      ['a', 'b', 'c'],
      ['a', 'b', 'c', 'd', 'e'],
      ['a', 'b', 'x'],
      ['a', 'b', 'x', 'y'],
    ];
    let previous: CapturedPrefix | undefined;
    let previousBlocks: readonly unknown[] = [];
    for (const h of histories) {
      const fresh = ccRequest(h);
      let captured = fresh;
      if (previous) {
        // As the capture reader rebuilds it: the base's objects, and a copy at its new offset where a block moved.
        const blocks = fresh.blocks.map((b, i) => {
          const old = previous?.blocks[i];
          if (!old || old.hash !== b.hash) return b;
          return old.at === b.at ? old : { ...old, at: b.at };
        });
        captured = { ...fresh, blocks };
      }
      const reused = prefixFromCapture(captured, 'claude-opus-5', [], reuse);
      const alone = prefixFromCapture(fresh, 'claude-opus-5');
      expect(reused.blocks).toEqual(alone.blocks);
      expect(reused.levels).toEqual(alone.levels);
      expect(reuse.messageEnds(captured.blocks, reused)).toEqual(messageEnds(alone));
      // The message blocks the record shares as the same objects are the previous record's own blocks.
      if (previous) {
        const firstMessage = captured.blocks.findIndex((b) => b.level === 'messages');
        expect(captured.blocks[firstMessage]).toBe(previous.blocks[firstMessage]);
        expect(reused.blocks[firstMessage]).toBe(previousBlocks[firstMessage]);
      }
      previous = captured;
      previousBlocks = reused.blocks;
    }
  });

  it('holds a chain while its record is remembered: let go, the next record builds its blocks again', () => {
    const reuse = new CapturedPrefixReuse();
    const first = request(['a']);
    const p1 = prefixFromCapture(first, 'claude-opus-5', [], reuse);
    const chain1 = reuse.chainOf(first.blocks, p1);
    expect(chain1?.blocks).toBe(p1.blocks);
    const second = onBase(first, request(['a', 'b', 'c']), first.blocks.length - 1);
    const p2 = prefixFromCapture(second, 'claude-opus-5', [], reuse);
    const chain2 = reuse.chainOf(second.blocks, p2);
    // Taken over: the first record's chain is no one's, and holds none of its arrays.
    expect(reuse.chainOf(first.blocks, p1)).toBeUndefined();
    expect(chain1?.captured.length).toBe(0);
    expect(chain1?.blocks.length).toBe(0);
    // Letting go of a chain taken over does nothing: the next turn still takes the second's blocks over.
    reuse.release(chain1 as NonNullable<typeof chain1>);
    const third = onBase(second, request(['a', 'b', 'c', 'd', 'e']), second.blocks.length - 1);
    const p3 = prefixFromCapture(third, 'claude-opus-5', [], reuse);
    // (A message's block: tools and system blocks are shared across conversations by what they are made of.)
    const m = p3.blocks.findIndex((b) => b.level === 'messages');
    expect(p3.blocks[m]).toBe(p2.blocks[m]);
    // Let go, the chain is gone: the same record built again shares no block object, and is equal.
    reuse.release(reuse.chainOf(third.blocks, p3) as NonNullable<typeof chain2>);
    const again = prefixFromCapture(third, 'claude-opus-5', [], reuse);
    expect(again.blocks[m]).not.toBe(p3.blocks[m]);
    expect(again.blocks).toEqual(p3.blocks);
  });

  it('lets go of the arrays of a chain pushed off its first block (64 conversations with the same tools)', () => {
    const reuse = new CapturedPrefixReuse();
    const first = request(['conversation 0']);
    const p0 = prefixFromCapture(first, 'claude-opus-5', [], reuse);
    const chain0 = reuse.chainOf(first.blocks, p0);
    expect(chain0?.captured.length).toBeGreaterThan(0);
    for (let c = 1; c <= 64; c++)
      prefixFromCapture(request([`conversation ${c}`]), 'claude-opus-5', [], reuse);
    // Its record may still hold the chain: not its blocks.
    expect(chain0?.captured.length).toBe(0);
    expect(chain0?.blocks.length).toBe(0);
  });

  it('shares tools and system blocks across conversations whose captures are objects of their own', () => {
    const reuse = new CapturedPrefixReuse();
    // As the reader gives them across sessions: every block an object of its own record's.
    const own = (c: CapturedPrefix): CapturedPrefix => ({ ...c, blocks: c.blocks.map((x) => ({ ...x })) });
    const a = prefixFromCapture(own(request(['one'])), 'claude-opus-5', [], reuse);
    const b = prefixFromCapture(own(request(['two'])), 'claude-opus-5', [], reuse);
    expect(b.blocks[0]?.level).toBe('system');
    expect(b.blocks[0]).toBe(a.blocks[0]);
  });
});
