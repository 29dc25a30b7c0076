// A fix is a patch: through every built-in fix (alone and all together) and the three formats, every byte
// outside the changes the fixes declare is the client's, in order, whatever the client wrote there: numbers
// beyond a double, exponents, `\u` escapes, any spacing, its key order, repeated keys.

import { describe, expect, it } from 'vitest';
import { undeclaredDifference } from '../../src/fixes/byte-patch.js';
import type { ClientEdit, FixNote } from '../../src/fixes/fix.js';
import { runFixStage } from '../../src/fixes/fix-stage.js';
import { FIX_ORDER, fixRegistry } from '../../src/fixes/registry.js';
import { type Prefix, PrefixBuilder } from '../../src/prefix/build-prefix.js';
import type { ScanNode } from '../../src/wire/json-scan.js';
import type { WireFormat } from '../../src/wire/request-body.js';
import { members, raw, STYLES, TRICKY, TRICKY_TOKENS, writeJson } from '../fixtures/raw-json.js';

const schema = () =>
  members(
    ['type', 'object'],
    ['properties', members(['q', members(['type', 'string'], ['default', TRICKY])])],
  );
const tool = (name: string, extra: Array<readonly [string, unknown]> = []) =>
  members(
    ['name', name],
    ['description', `${name}: caf\u00e9 \u2014 does things`],
    ['input_schema', schema()],
    ...extra,
  );
const marker = (ttl?: string) => members(['type', 'ephemeral'], ...(ttl ? [['ttl', ttl] as const] : []));
const text = (t: string, extra: Array<readonly [string, unknown]> = []) =>
  members(['type', 'text'], ['text', t], ...extra);
const REMINDER = text('<system-reminder>\nThe date is 2026-12-01.\n</system-reminder>');
const billing = (n: number) => text(`x-anthropic-billing-header: cc_version=2.1.1.a1b; cch=${n}0000;`);

/** An Anthropic session that gives every fix something to do, written as a client that is not JSON.stringify. */
function anthropicSession(): unknown[] {
  const history = [
    members(['role', 'user'], ['content', [text('Fix the bug.'), REMINDER]]),
    members(
      ['role', 'assistant'],
      [
        'content',
        [
          text('Looking.'),
          members(['type', 'tool_use'], ['id', 'toolu_1'], ['name', 'Alpha'], ['input', TRICKY]),
        ],
      ],
    ),
    members(
      ['role', 'user'],
      ['content', [members(['type', 'tool_result'], ['tool_use_id', 'toolu_1'], ['content', 'done'])]],
    ),
  ];
  // The client's later form of the same history: its reminder in a message of its own.
  const split = [
    members(['role', 'user'], ['content', [text('Fix the bug.')]]),
    members(['role', 'user'], ['content', [REMINDER]]),
    ...history.slice(1),
  ];
  // The marker rides on the latest message only (the earlier one is resent without it, as agents do).
  const turn = (n: number, last: boolean) => [
    members(['role', 'assistant'], ['content', [text(`Step ${n}.`)]]),
    members(
      ['role', 'user'],
      ['content', [text(`go on ${n}`, last ? [['cache_control', marker('5m')]] : [])]],
    ),
  ];
  const body = (messages: unknown[], tools: unknown[], n: number) =>
    members(
      ['model', 'claude-opus-5'],
      ['messages', messages],
      ['temperature', raw('0.70')],
      [
        'system',
        [
          billing(n),
          text('You are careful.', [['cache_control', members(['type', 'ephemeral'], ['ttl', '5m'])]]),
        ],
      ],
      ['tools', tools],
      ['metadata', members(['user_id', 'u-1'], ['trace', TRICKY])],
      ['max_tokens', raw('1e400')],
      ['cache_control', marker()],
      ['stream', false],
    );
  const charlie = tool('Charlie');
  const alpha = tool('Alpha', [['cache_control', marker('5m')]]);
  const bravo = tool('Bravo', [['cache_control', marker()]]);
  return [
    body(history, [charlie, alpha], 1),
    body([...split, ...turn(1, true)], [alpha, charlie, bravo], 2),
    body([...split, ...turn(1, false), ...turn(2, true)], [bravo, alpha], 3),
  ];
}

/** An OpenAI Chat session with shuffled tools (tools-sort's work), its tool calls carrying tricky bytes. */
function chatSession(): unknown[] {
  const fn = (name: string) =>
    members(
      ['type', 'function'],
      ['function', members(['name', name], ['description', `${name} caf\u00e9`], ['parameters', schema()])],
    );
  const messages = [
    members(['role', 'system'], ['content', 'Be brief.']),
    members(['role', 'user'], ['content', 'look it up']),
    members(
      ['role', 'assistant'],
      ['content', null],
      [
        'tool_calls',
        [
          members(
            ['id', 'call_1'],
            ['type', 'function'],
            ['function', members(['name', 'alpha'], ['arguments', '{"order_id":12345678901234567890}'])],
          ),
        ],
      ],
    ),
    members(
      ['role', 'tool'],
      ['tool_call_id', 'call_1'],
      ['content', writeJson(TRICKY, STYLES.compact as never)],
    ),
  ];
  const body = (tools: unknown[]) =>
    members(
      ['model', 'gpt-5.5'],
      ['messages', messages],
      ['tools', tools],
      ['seed', raw('12345678901234567890')],
      ['temperature', raw('1.10')],
    );
  return [body([fn('charlie'), fn('alpha'), fn('bravo')]), body([fn('bravo'), fn('alpha'), fn('charlie')])];
}

/** An OpenAI Responses session with shuffled tools. */
function responsesSession(): unknown[] {
  const fn = (name: string) =>
    members(
      ['type', 'function'],
      ['name', name],
      ['description', `${name} caf\u00e9`],
      ['parameters', schema()],
    );
  const input = [
    members(['role', 'user'], ['content', [members(['type', 'input_text'], ['text', 'look it up \u00e9'])]]),
    members(['type', 'function_call'], ['call_id', 'c1'], ['name', 'alpha'], ['arguments', '{"price":1.10}']),
    members(['type', 'function_call_output'], ['call_id', 'c1'], ['output', 'done']),
  ];
  const body = (tools: unknown[]) =>
    members(
      ['model', 'gpt-5.5'],
      ['instructions', 'Be brief.'],
      ['input', input],
      ['tools', tools],
      ['max_output_tokens', raw('1e400')],
    );
  return [body([fn('charlie'), fn('alpha')]), body([fn('alpha'), fn('charlie')])];
}

const SESSIONS: Array<{ format: WireFormat; route: string; bodies: () => unknown[]; acting: string[] }> = [
  { format: 'anthropic-messages', route: '/v1/messages', bodies: anthropicSession, acting: FIX_ORDER },
  { format: 'openai-chat', route: '/v1/chat/completions', bodies: chatSession, acting: ['tools-sort'] },
  { format: 'openai-responses', route: '/v1/responses', bodies: responsesSession, acting: ['tools-sort'] },
];

/** The spans of the client's body each fix may change (its declared changes must lie inside them). */
function allowedSpans(fix: string, prefix: Prefix): Array<{ start: number; end: number }> {
  const root = prefix.body.root;
  const span = (n: ScanNode | undefined) => (n ? [{ start: n.start, end: n.end }] : []);
  const items = (n: ScanNode | undefined) => (n?.type === 'array' ? n.items : []);
  const markerOf = (n: ScanNode) => (n.type === 'object' ? span(n.members.get('cache_control')) : []);
  switch (fix) {
    case 'tools-sort':
      return span(root.members.get('tools'));
    case 'tools-freeze':
      return [...span(root.members.get('tools')), ...span(root.members.get('messages'))];
    case 'pin-reminders':
      return span(root.members.get('messages'));
    case 'strip-billing-header':
      return span(root.members.get('system'));
    case 'ttl':
      return [
        ...markerOf(root),
        ...items(root.members.get('tools')).flatMap(markerOf),
        ...items(root.members.get('system')).flatMap(markerOf),
        ...items(root.members.get('messages')).flatMap((m) =>
          m.type === 'object' ? items(m.members.get('content')).flatMap(markerOf) : [],
        ),
      ];
    default:
      return [];
  }
}

const count = (hay: string, needle: string) => hay.split(needle).length - 1;

/** Runs a session through the fix stage as the proxy does (each request on the state its parent left). */
function run(
  format: WireFormat,
  route: string,
  bodies: Buffer[],
  fixNames: string[],
  check: (
    client: Buffer,
    prefix: Prefix,
    out: { body: Buffer; edits: ClientEdit[]; notes: FixNote[]; changed: boolean },
  ) => void,
) {
  const builder = new PrefixBuilder();
  const fixes = fixRegistry().resolve(fixNames);
  let states: ReadonlyMap<string, unknown> | undefined;
  let parent: { client: Prefix['blocks']; forwarded: Prefix['blocks'] } | undefined;
  for (const body of bodies) {
    const prefix = builder.parse(body, { format });
    const out = runFixStage({
      fixes,
      body,
      prefix,
      headers: {},
      states,
      context: {
        provider: format === 'anthropic-messages' ? 'anthropic' : 'openai',
        route,
        now: 0,
        conversation: 'c',
        relation: states ? 'continues' : 'new',
      },
      ...(parent ? { parent } : {}),
      reparse: (b, h) => new PrefixBuilder().parse(b, { format, headers: h }),
    });
    states = out.states;
    parent = { client: prefix.blocks, forwarded: out.prefix.blocks };
    check(body, prefix, out);
  }
}

describe('a fix is a patch: every byte outside its declared changes is the client’s', () => {
  for (const session of SESSIONS) {
    const sets = [...session.acting.map((f) => [f]), FIX_ORDER];
    for (const [styleName, style] of Object.entries(STYLES)) {
      for (const set of sets) {
        it(`${session.format}, ${styleName}, --fix ${set.join(',')}`, () => {
          const bodies = session.bodies().map((b) => Buffer.from(writeJson(b, style)));
          const acted = new Set<string>();
          run(session.format, session.route, bodies, set, (client, prefix, out) => {
            const sent = client.toString();
            if (!out.changed) {
              expect(out.body.equals(client)).toBe(true);
              return;
            }
            for (const n of out.notes) if (n.changed) acted.add(n.fix);
            expect(out.notes.filter((n) => n.error)).toEqual([]);
            // Outside the declared edits: the client's bytes, in order.
            expect(undeclaredDifference(client, out.body, out.edits)).toBeUndefined();
            let c = 0;
            let f = 0;
            for (const e of [
              ...out.edits,
              { start: client.length, end: client.length, at: out.body.length, length: 0 },
            ]) {
              expect(out.body.subarray(f, e.at).equals(client.subarray(c, e.start))).toBe(true);
              c = e.end;
              f = e.at + e.length;
            }
            // Each edit lies where one of the fixes that ran may change something.
            const allowed = set.flatMap((fix) => allowedSpans(fix, prefix));
            for (const e of out.edits)
              expect(
                allowed.some((a) => e.start >= a.start && e.end <= a.end),
                `edit [${e.start}, ${e.end}) of ${sent.slice(e.start, e.end).slice(0, 80)}`,
              ).toBe(true);
            // Within the edits too, what the fixes copied keeps its bytes.
            const forwarded = out.body.toString();
            for (const token of TRICKY_TOKENS)
              expect(count(forwarded, token), token).toBeGreaterThanOrEqual(count(sent, token));
            expect(count(forwarded, '"dup"')).toBeGreaterThanOrEqual(count(sent, '"dup"'));
            expect(() => JSON.parse(forwarded)).not.toThrow();
          });
          // Not vacuous: every fix of the set that can act on this format changed some request.
          for (const fix of set.filter((f) => session.acting.includes(f))) expect(acted, fix).toContain(fix);
        });
      }
    }
  }
});
