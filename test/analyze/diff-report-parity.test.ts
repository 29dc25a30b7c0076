// One divergence engine: on random pairs of request bodies (random edits of tools, system, messages and
// parameters, in the three wire formats), `cacheward diff` on the bodies and the report's view of the
// captured pair (capturePrefix → prefixFromCapture → firstDivergence) name the same level, block and change.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { prefixFromCapture } from '../../src/analyze/captured-prefix.js';
import { type Prefix, PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { type Divergence, firstDivergence } from '../../src/prefix/first-divergence.js';
import { capturePrefix } from '../../src/record/capture-record.js';
import type { WireFormat } from '../../src/wire/request-body.js';
import { cli } from '../cli/run-cli.js';

type Json = Record<string, unknown>;

/** A request in the abstract, rendered into each format's body. */
interface Req {
  model: string;
  tools: Array<{ name: string; description: string; props: string[] }>;
  system: string[];
  messages: Array<{ role: 'user' | 'assistant'; parts: string[]; asString: boolean }>;
  params: Json;
  /** Anthropic: which message carries the moving cache marker (-1: none). */
  marker: number;
}

const word = fc.stringMatching(/^[a-z]{1,8}$/);
const text = fc.array(word, { minLength: 1, maxLength: 12 }).map((w) => w.join(' '));
const req: fc.Arbitrary<Req> = fc
  .record({
    model: fc.constantFrom('claude-opus-5', 'gpt-5.4', 'gpt-5.6'),
    tools: fc.uniqueArray(
      fc.record({
        name: fc.stringMatching(/^[a-z][a-z_]{0,9}$/),
        description: text,
        props: fc.array(word, { maxLength: 3 }),
      }),
      { selector: (t) => t.name, minLength: 0, maxLength: 6 },
    ),
    system: fc.array(text, { minLength: 0, maxLength: 3 }),
    messages: fc.array(
      fc.record({ parts: fc.array(text, { minLength: 1, maxLength: 3 }), asString: fc.boolean() }),
      {
        minLength: 1,
        maxLength: 8,
      },
    ),
    marker: fc.integer({ min: -1, max: 7 }),
  })
  .map((r) => ({
    ...r,
    messages: r.messages.map((m, i) => ({ ...m, role: i % 2 ? ('assistant' as const) : ('user' as const) })),
    params: {},
  }));

type Format = 'anthropic-messages' | 'openai-chat' | 'openai-responses';

/** Render-affecting parameters by format, with two values each (undefined: absent). */
const PARAMS: Record<Format, Array<[string, unknown[]]>> = {
  'anthropic-messages': [
    ['tool_choice', [{ type: 'any' }, { type: 'auto', disable_parallel_tool_use: true }]],
    ['thinking', [{ type: 'enabled', budget_tokens: 2048 }, { type: 'adaptive' }]],
    ['output_config', [{ effort: 'low' }, { format: { type: 'json_schema', schema: { type: 'object' } } }]],
    ['speed', ['fast']],
  ],
  'openai-chat': [
    ['response_format', [{ type: 'json_object' }]],
    ['parallel_tool_calls', [false, true]],
    ['reasoning_effort', ['low', 'high']],
    ['prompt_cache_key', ['a', 'b']],
  ],
  'openai-responses': [
    ['text', [{ format: { type: 'json_object' } }, { verbosity: 'low' }]],
    ['reasoning', [{ effort: 'low' }]],
    ['parallel_tool_calls', [false]],
    ['prompt_cache_key', ['a', 'b']],
  ],
};

/** One random edit of a request; some change nothing the cache sees (growth, moved markers, shape). */
const edit = (format: Format) =>
  fc
    .oneof(
      fc.record({
        op: fc.constant('addTool' as const),
        at: fc.nat(),
        name: fc.stringMatching(/^[a-z]{2,9}_x$/),
      }),
      fc.record({
        op: fc.constantFrom('removeTool', 'swapTools', 'toolDescription', 'toolSchema'),
        at: fc.nat(),
      }),
      fc.record({ op: fc.constantFrom('editSystem', 'addSystem', 'removeSystem'), at: fc.nat() }),
      fc.record({
        op: fc.constantFrom('editMessage', 'insertPart', 'removeMessage', 'append', 'reshape', 'moveMarker'),
        at: fc.nat(),
      }),
      fc.record({
        op: fc.constant('param' as const),
        at: fc.nat(),
        value: fc.nat(),
      }),
      fc.record({ op: fc.constant('model' as const), at: fc.nat() }),
    )
    .map((e) => ({ ...e, format }));

type Edit = { op: string; at: number; name?: string; value?: number; format: Format };

function apply(r: Req, e: Edit): void {
  const pick = <T>(list: T[]) => (list.length ? e.at % list.length : -1);
  const t = pick(r.tools);
  const m = pick(r.messages);
  switch (e.op) {
    case 'addTool':
      if (!r.tools.some((x) => x.name === e.name))
        r.tools.splice(e.at % (r.tools.length + 1), 0, {
          name: e.name ?? 'x',
          description: 'new tool',
          props: [],
        });
      break;
    case 'removeTool':
      if (t >= 0) r.tools.splice(t, 1);
      break;
    case 'swapTools':
      if (r.tools.length > 1) {
        const i = e.at % (r.tools.length - 1);
        const [a, b] = [r.tools[i], r.tools[i + 1]];
        if (a && b) r.tools.splice(i, 2, b, a);
      }
      break;
    case 'toolDescription':
      if (t >= 0 && r.tools[t]) r.tools[t].description += ' (changed)';
      break;
    case 'toolSchema':
      if (t >= 0 && r.tools[t]) r.tools[t].props.push('added');
      break;
    case 'editSystem':
      if (r.system.length) r.system[e.at % r.system.length] += ' now';
      break;
    case 'addSystem':
      r.system.splice(e.at % (r.system.length + 1), 0, 'Current date: 2026-12-01.');
      break;
    case 'removeSystem':
      if (r.system.length) r.system.splice(e.at % r.system.length, 1);
      break;
    case 'editMessage':
      if (m >= 0 && r.messages[m]) r.messages[m].parts[0] = `${r.messages[m].parts[0]} edited`;
      break;
    case 'insertPart':
      if (m >= 0 && r.messages[m]) {
        r.messages[m].parts.unshift('<reminder>note</reminder>');
        r.messages[m].asString = false;
      }
      break;
    case 'removeMessage':
      if (r.messages.length > 1) r.messages.splice(m, 1);
      break;
    case 'append':
      r.messages.push({
        role: r.messages.length % 2 ? 'assistant' : 'user',
        parts: ['more'],
        asString: true,
      });
      break;
    case 'reshape':
      // A one-part message sent as a string or as one text block: the same prefix.
      if (m >= 0 && r.messages[m]?.parts.length === 1) r.messages[m].asString = !r.messages[m].asString;
      break;
    case 'moveMarker':
      r.marker = (e.at % (r.messages.length + 1)) - 1;
      break;
    case 'param': {
      const rules = PARAMS[e.format];
      const [name, values] = rules[e.at % rules.length] as [string, unknown[]];
      const v = values[(e.value ?? 0) % (values.length + 1)];
      if (v === undefined) delete r.params[name];
      else r.params[name] = v;
      break;
    }
    case 'model':
      r.model = `${r.model}-next`;
      break;
  }
}

function render(r: Req, format: Format): Json {
  const schema = (props: string[]) => ({
    type: 'object',
    properties: Object.fromEntries(props.map((p) => [p, { type: 'string' }])),
  });
  if (format === 'anthropic-messages')
    return {
      model: r.model,
      max_tokens: 100,
      tools: r.tools.map((t) => ({
        name: t.name,
        description: t.description,
        input_schema: schema(t.props),
      })),
      system: r.system.map((s) => ({ type: 'text', text: s })),
      messages: r.messages.map((m, i) => {
        const blocks: Json[] = m.parts.map((p) => ({ type: 'text', text: p }));
        if (i === r.marker) (blocks[blocks.length - 1] as Json).cache_control = { type: 'ephemeral' };
        return { role: m.role, content: m.asString && i !== r.marker ? m.parts.join('\n') : blocks };
      }),
      ...r.params,
    };
  const content = (m: Req['messages'][number], kind: string) =>
    m.asString && m.parts.length === 1 ? m.parts[0] : m.parts.map((p) => ({ type: kind, text: p }));
  if (format === 'openai-chat')
    return {
      model: r.model,
      tools: r.tools.map((t) => ({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: schema(t.props) },
      })),
      messages: [
        ...r.system.map((s) => ({ role: 'developer', content: s })),
        ...r.messages.map((m) => ({ role: m.role, content: content(m, 'text') })),
      ],
      ...r.params,
    };
  return {
    model: r.model,
    tools: r.tools.map((t) => ({
      type: 'function',
      name: t.name,
      description: t.description,
      parameters: schema(t.props),
    })),
    ...(r.system.length ? { instructions: r.system.join('\n') } : {}),
    input: r.messages.map((m) => ({
      role: m.role,
      content: content(m, m.role === 'user' ? 'input_text' : 'output_text'),
    })),
    ...r.params,
  };
}

const builder = new PrefixBuilder();
const parse = (body: Json, format: WireFormat) => builder.parse(JSON.stringify(body), { format });
/** The report's view: the prefix as a capture record keeps it, rebuilt as the analyzer rebuilds it. */
const captured = (p: Prefix) => prefixFromCapture(capturePrefix(p), p.model, p.body.betas);

/** What both must agree on: level, block, change (parameter values as the capture keeps them) and parts. */
function view(d: Divergence | null, capturedView: Divergence | null) {
  if (!d) return null;
  const change =
    d.change.type === 'params' && capturedView?.change.type === 'params'
      ? {
          ...d.change,
          params: d.change.params.map((p, i) => {
            const c = capturedView.change.type === 'params' ? capturedView.change.params[i] : undefined;
            // Objects longer than 200 characters are kept as a hash in captures: compare the name only.
            const hashed = (v: unknown) => !!v && typeof v === 'object' && 'sha256' in (v as object);
            return hashed(c?.before) || hashed(c?.after) ? { ...p, before: c?.before, after: c?.after } : p;
          }),
        }
      : d.change;
  return { level: d.level, blockIndex: d.blockIndex, change, changed: d.changed };
}
const strip = (d: Divergence | null) =>
  d ? { level: d.level, blockIndex: d.blockIndex, change: d.change, changed: d.changed } : null;

const FORMATS: Format[] = ['anthropic-messages', 'openai-chat', 'openai-responses'];

describe.each(FORMATS)('diff of the bodies and report of the captured pair agree (%s)', (format) => {
  const pair = fc.tuple(req, fc.array(edit(format), { minLength: 1, maxLength: 3 })).map(([base, edits]) => {
    const after = structuredClone(base);
    for (const e of edits) apply(after, e);
    return { a: render(base, format), b: render(after, format), edits };
  });

  it('names the same level, block index and change on random edits', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(pair, ({ a, b }) => {
        const pa = parse(a, format);
        const pb = parse(b, format);
        const fromBodies = firstDivergence(pa, pb);
        const fromCaptures = firstDivergence(captured(pa), captured(pb));
        expect(strip(fromCaptures)).toEqual(view(fromBodies, fromCaptures));
        seen.add(fromBodies ? `${fromBodies.level}:${fromBodies.change.type}` : 'none');
      }),
      { numRuns: 250, seed: 20261201 },
    );
    // The edits reach every level (Chat's system prompt is a message), and some change nothing.
    const levels = ['none', 'tools:tools', 'messages:messages', 'params:params'];
    if (format !== 'openai-chat') levels.push('system:system');
    for (const l of levels) expect([...seen], l).toContain(l);
  });

  it('agrees with the real `cacheward diff --json` on a sample', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-parity-'));
    const sample = fc.sample(pair, { numRuns: 8, seed: 7 });
    let diverged = 0;
    for (const [i, { a, b }] of sample.entries()) {
      const fa = join(dir, `a${i}.json`);
      const fb = join(dir, `b${i}.json`);
      writeFileSync(fa, JSON.stringify(a));
      writeFileSync(fb, JSON.stringify(b));
      const run = await cli(['diff', '--json', '--format', format, fa, fb]);
      expect(run.stderr).toBe('');
      const out = JSON.parse(run.stdout) as { identical: boolean; divergence: Divergence | null };
      const fromCaptures = firstDivergence(captured(parse(a, format)), captured(parse(b, format)));
      expect(run.code).toBe(fromCaptures ? 1 : 0);
      expect(out.identical).toBe(fromCaptures === null);
      if (fromCaptures) diverged++;
      expect(strip(fromCaptures)).toEqual(view(out.divergence, fromCaptures));
    }
    expect(diverged).toBeGreaterThan(0);
  });
});
