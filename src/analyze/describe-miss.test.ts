// The miss sentence: numbers and clock times exactly as Intl and toISOString write them, and what it says.
// In-process and pure: no file, socket or clock.

import { describe, expect, it } from 'vitest';
import { clockTime, describeMiss, n } from './describe-miss.js';

const intl = new Intl.NumberFormat('en-US');

describe('describe-miss number and time formatting', () => {
  it('groups every kind of number exactly as Intl en-US does', () => {
    const values = [0, -0, 1, 9, 10, 99, 100, 999, 1000, 1001, 12_345, 123_456, 1_234_567, -1, -999, -1000];
    values.push(-1_234_567, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 1e21, 0.5, 1.23456, 12_345.678, -0.001);
    values.push(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 300, 3600, 86_400);
    for (let i = 0; i < 2000; i++)
      values.push(Math.floor(Math.random() * 10 ** (1 + (i % 15))) * (i % 2 ? -1 : 1));
    for (const v of values) expect(n.format(v), String(v)).toBe(intl.format(v));
  });

  it('reads the clock time as toISOString does, in and outside its four-digit years', () => {
    const times = [
      0, 999, 1000, 59_999, 3_599_999, 86_399_999, 86_400_000, 1_800_000_000_123, 253_402_300_799_999,
    ];
    times.push(253_402_300_800_000, -1, -86_400_001, 8.64e15, -8.64e15, 1_733_000_000_000.5);
    for (let i = 0; i < 2000; i++) times.push(Math.floor(Math.random() * 4e12));
    for (const t of times) expect(clockTime(t), String(t)).toBe(new Date(t).toISOString().slice(11, 19));
  });
});

describe('describeMiss', () => {
  it('says a conversation that started warm from another session’s cache', () => {
    const sentence = describeMiss({
      requestId: 'b1',
      turn: 1,
      session: 'run-2',
      conversation: 'c-b1',
      time: 0,
      model: 'claude-opus-5',
      cause: 'cold_start',
      detail: { warmFrom: { session: 'run-1', request: 'a1' } },
      rewrittenTokens: 0,
      waste: 0,
      sentence: '',
    });
    expect(sentence).toBe('turn 1, 00:00:00 — cold start: started warm from session run-1');
  });
});
