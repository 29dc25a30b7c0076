// Message ends and transcript keys on real Chat, Responses and Anthropic bodies: the system prompt sent as
// leading system/developer messages is not part of the conversation, whatever the format.
import { describe, expect, it } from 'vitest';
import { parsePrefix } from './build-prefix.js';
import { messageEnds } from './message-ends.js';

const chat = (system: string, user: string, more: object[] = []) =>
  parsePrefix(
    JSON.stringify({
      model: 'gpt-5.4',
      messages: [{ role: 'developer', content: system }, { role: 'user', content: user }, ...more],
    }),
    { format: 'openai-chat' },
  );

describe('messageEnds', () => {
  it('skips the leading developer messages of a Chat body: their end is no conversation end', () => {
    const p = chat('You are an agent.', 'task A', [
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'more' },
    ]);
    const ends = messageEnds(p);
    expect(ends.map((e) => e.message)).toEqual([1, 2, 3]);
    expect(p.blocks[p.levels.messages.start]?.transcript).toBeUndefined();
  });

  it('gives two Chat conversations that share only a system prompt no common transcript key', () => {
    const a = messageEnds(chat('Shared prompt.', 'task A'));
    const b = messageEnds(chat('Shared prompt.', 'task B'));
    expect(a[0]?.transcript).not.toBe(b[0]?.transcript);
    // ...while their cache keys at the system prompt agree (the cache may share it).
    const pa = chat('Shared prompt.', 'task A');
    const pb = chat('Shared prompt.', 'task B');
    expect(pa.blocks[pa.levels.messages.start]?.hash).toBe(pb.blocks[pb.levels.messages.start]?.hash);
  });

  it('keeps the transcript when a Chat system prompt is edited in place; the cache key moves', () => {
    const a = messageEnds(chat('You are an agent.', 'task A'));
    const b = messageEnds(chat('You are an agent. Current date: 2026-09-12.', 'task A'));
    expect(b[0]?.transcript).toBe(a[0]?.transcript);
    expect(b[0]?.cacheKey).not.toBe(a[0]?.cacheKey);
  });

  it('treats Responses developer input items the same, and a later developer message as conversation', () => {
    const p = parsePrefix(
      JSON.stringify({
        model: 'gpt-5.6',
        instructions: 'Be brief.',
        input: [
          { role: 'developer', content: 'permissions: workspace-write' },
          { role: 'user', content: 'task' },
          { role: 'developer', content: 'a mid-session note' },
          { role: 'user', content: 'next' },
        ],
      }),
      { format: 'openai-responses' },
    );
    expect(messageEnds(p).map((e) => e.message)).toEqual([1, 2, 3]);
  });

  it('marks the opening: the ends before the first reply or tool call', () => {
    const p = chat('Prompt.', 'context', [
      { role: 'user', content: 'task' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'more' },
    ]);
    expect(messageEnds(p).map((e) => e.opening)).toEqual([true, true, false, false]);
  });

  it('ends every Anthropic message, the first user message included', () => {
    const p = parsePrefix(
      JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 10,
        system: 'Be brief.',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
          },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: 'c' },
        ],
      }),
      { format: 'anthropic-messages' },
    );
    // Block 0 is the system prompt; message 0 holds blocks 1 and 2.
    expect(messageEnds(p).map((e) => [e.message, e.block])).toEqual([
      [0, 2],
      [1, 3],
      [2, 4],
    ]);
  });
});
