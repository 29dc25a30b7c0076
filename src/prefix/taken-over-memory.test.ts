// What a body took over from its base does not keep the base alive once the builder lets it go.
// In-process; it asks V8 for collections and never times anything.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { agentConversation, appendUserTurn } from '../sim/agent-conversation.js';
import { PrefixBuilder } from './build-prefix.js';
import { messageEnds } from './message-ends.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('what a body took over from its base does not keep the base alive', () => {
  it('frees the old turns of a conversation once the builder no longer keeps them', async () => {
    const builder = new PrefixBuilder({ keep: { bodies: 2 } });
    let conv = agentConversation({ turns: 3, seed: 7 });
    // Weak handles on what the first turn's parse made: its scan items, units and blocks.
    const refs = ((first) => {
      messageEnds(first);
      const messages = first.body.root.members.get('messages');
      return [
        new WeakRef(first.blocks),
        new WeakRef(first.body.units),
        new WeakRef(messages?.type === 'array' ? messages.items : []),
      ];
    })(builder.parse(Buffer.from(JSON.stringify(conv))));
    for (let t = 0; t < 12; t++) {
      conv = appendUserTurn(conv, `turn ${t}`);
      messageEnds(builder.parse(Buffer.from(JSON.stringify(conv))));
    }
    // Each later turn took the first turn's messages over; only the two newest bodies are kept.
    await new Promise((r) => setTimeout(r, 0));
    gc();
    expect(refs.map((r) => r.deref() === undefined)).toEqual([true, true, true]);
  });
});
