import { describe, expect, it } from 'vitest';
import { agentConversation, appendUserTurn } from '../demo/agent-conversation.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { sharedByteCount } from '../wire/json-scan.js';
import { forwardedShared, rememberForwarded } from './forwarded-twin.js';
import { spliceBody } from './splice-body.js';

const format = 'anthropic-messages' as const;
type Json = Record<string, unknown>;

describe('forwardedShared', () => {
  it("is the exact count of shared leading bytes, from the clients' count, or no answer", () => {
    const first = agentConversation({ turns: 3, seed: 8 });
    const tools = JSON.stringify([...(first.tools as Json[]), { name: 'extra', input_schema: {} }]);
    const cases: Array<[string, Json, string | undefined, boolean]> = [
      ['a turn appended', appendUserTurn(first, 'next'), undefined, true],
      ['the same body again', first, undefined, true],
      ['two turns appended', appendUserTurn(appendUserTurn(first, 'a'), 'b'), undefined, true],
      ['other forwarded tools', appendUserTurn(first, 'next'), JSON.stringify([]), false],
      [
        'a change before the tools end',
        { ...appendUserTurn(first, 'next'), model: 'claude-opus-4' },
        undefined,
        false,
      ],
    ];
    for (const [name, value, text, answers] of cases) {
      // Each case on a builder of its own that has seen the parent's client body and its forwarded twin.
      const builder = new PrefixBuilder();
      const parse = (b: Buffer) => builder.parse(b, { format }).body;
      const splice = (body: ReturnType<typeof parse>, with_ = tools) =>
        spliceBody(body, { setText: { tools: with_ } }) as Buffer;
      const parentClient = parse(Buffer.from(JSON.stringify(first)));
      const parentForwarded = parse(splice(parentClient));
      rememberForwarded(parentClient, parentForwarded);
      const client = parse(Buffer.from(JSON.stringify(value)));
      const forwarded = splice(client, text);
      const hint = forwardedShared(client, builder.extendedFrom(client), forwarded, () => true);
      expect(hint !== undefined, name).toBe(answers);
      if (hint) {
        expect(hint.previous).toBe(parentForwarded);
        expect(hint.previousSharedBytes, name).toBe(sharedByteCount(forwarded, parentForwarded.bytes));
      }
      // Not the body it was spliced from, or a parent's forwarded body the parse cannot take over: no answer.
      expect(
        forwardedShared(parentClient, builder.extendedFrom(client), forwarded, () => true),
      ).toBeUndefined();
      expect(forwardedShared(client, builder.extendedFrom(client), forwarded, () => false)).toBeUndefined();
    }
  });
});
