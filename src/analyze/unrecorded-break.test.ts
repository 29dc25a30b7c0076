// Where a read ended when the source did not record everything: inside the unrecorded parts, any of them may
// have changed; past them, only what folds in at the messages level or what the client adds there.
import { describe, expect, it } from 'vitest';
import { locateBreak } from './unrecorded-break.js';

describe('locateBreak', () => {
  it('a read that stopped inside the unrecorded block names every part it stands for', () => {
    expect(locateBreak(['tools', 'system', 'params', 'injected'], 18_000, 0)).toEqual({
      parts: ['tools', 'system', 'params', 'injected'],
      inside: true,
      couldBe: ['tools_changed', 'system_changed', 'params_changed', 'messages_edited'],
    });
    expect(locateBreak(['tools', 'params'], 8_000, 4_096).couldBe).toEqual([
      'tools_changed',
      'params_changed',
    ]);
  });

  it('a read that reached the recorded messages names only what can change there unseen', () => {
    expect(locateBreak(['tools', 'system', 'params', 'injected'], 18_000, 18_000)).toEqual({
      parts: ['tools', 'system', 'params', 'injected'],
      inside: false,
      couldBe: ['params_changed', 'messages_edited', 'unexplained'],
    });
    // Within the tolerance of the block's end (estimate noise) is not inside it.
    expect(locateBreak(['tools', 'params'], 10_000, 9_900).inside).toBe(false);
    expect(locateBreak(['tools'], 10_000, 12_000).couldBe).toEqual(['unexplained']);
  });
});
