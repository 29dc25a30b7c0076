// The fix state document: round trip, shared parts by content, and precise refusals.
// Pure: documents in memory, no state file.

import { describe, expect, it } from 'vitest';
import { decodeFixState, encodeFixState, partsOf } from './fix-state-codec.js';

const pair = {
  client: [
    { hash: 'aa11', cumulativeTokens: 10 },
    { hash: 'bb22', cumulativeTokens: 25 },
  ],
  forwarded: [{ hash: 'cc33', cumulativeTokens: 12 }],
};

describe('fix state documents', () => {
  it('round-trips every fix state and the forwarded pair', () => {
    const states = new Map<string, unknown>([
      ['tools-freeze', { frozen: [{ name: 'Read' }], added: [], removed: [], announcements: [], warned: [] }],
      ['pin-reminders', { messages: [{ role: 'user', string: false, ids: ['x', 'y'] }] }],
    ]);
    const { doc, parts } = encodeFixState({ states, pair });
    const back = decodeFixState(doc, (h) => JSON.parse(parts.get(h) as string));
    expect(back.states).toEqual(states);
    expect(back.pair).toEqual(pair);
  });

  it('names an unchanged state by the same hash, so it is neither sent nor parsed again', () => {
    const freeze = { frozen: [{ name: 'Read' }] };
    const a = encodeFixState({
      states: new Map<string, unknown>([
        ['tools-freeze', freeze],
        ['pin-reminders', { n: 1 }],
      ]),
      pair,
    });
    const b = encodeFixState({
      states: new Map<string, unknown>([
        ['tools-freeze', freeze],
        ['pin-reminders', { n: 2 }],
      ]),
      pair,
    });
    expect(partsOf(a.doc).get('tools-freeze')).toBe(partsOf(b.doc).get('tools-freeze'));
    expect(partsOf(a.doc).get('pin-reminders')).not.toBe(partsOf(b.doc).get('pin-reminders'));
  });

  it('refuses a document it did not write, and one whose part is gone', () => {
    expect(() => decodeFixState('{"v":1}', () => ({}))).toThrow(/not a cacheward fix state document/);
    const { doc } = encodeFixState({ states: new Map<string, unknown>([['ttl', { t: '1h' }]]), pair });
    expect(() => decodeFixState(doc, () => undefined)).toThrow(
      /the state of ttl \([0-9a-f]{40}\) is missing/,
    );
  });
});
