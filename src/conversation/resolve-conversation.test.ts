// The conversation resolver on real Anthropic bodies built by the prefix model: continues, fork, sibling,
// new, the main line coming back after a fork, and strangers that share only a system prompt.

import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { messageEnds } from '../prefix/message-ends.js';
import { MemoryConversationStore } from './conversation-store.js';
import { commitConversation, type Resolution, resolveConversation } from './resolve-conversation.js';

type Msg = { role: string; content: string };
const TOOLS = [
  { name: 'read', description: 'Read a file', input_schema: { type: 'object', properties: {} } },
  { name: 'bash', description: 'Run a command', input_schema: { type: 'object', properties: {} } },
];

function body(messages: Msg[], opts: { tools?: object[]; system?: string; model?: string } = {}) {
  return JSON.stringify({
    model: opts.model ?? 'claude-opus-5',
    max_tokens: 100,
    system: opts.system ?? 'You are a coding agent.',
    tools: opts.tools ?? TOOLS,
    messages,
  });
}

/** A driver: sends bodies through resolve + commit, as the proxy does. */
function driver() {
  const store = new MemoryConversationStore();
  const builder = new PrefixBuilder();
  let n = 0;
  return {
    store,
    send(
      messages: Msg[],
      opts: Parameters<typeof body>[1] & { label?: string } = {},
    ): Resolution & { id: string } {
      const prefix = builder.parse(body(messages, opts), { format: 'anthropic-messages' });
      const req = {
        id: `r${++n}`,
        time: n * 1000,
        ends: messageEnds(prefix),
        head: prefix.levels.messages.foldHash,
        ...(opts.label ? { label: opts.label } : {}),
      };
      const res = resolveConversation(store, req);
      commitConversation(store, req, res);
      return { ...res, id: req.id };
    },
  };
}

const u = (content: string): Msg => ({ role: 'user', content });
const a = (content: string): Msg => ({ role: 'assistant', content });

describe('resolveConversation', () => {
  it('a conversation that grows turn by turn continues one conversation, without any label', () => {
    const d = driver();
    const t1 = d.send([u('fix the bug')]);
    const t2 = d.send([u('fix the bug'), a('looking'), u('here is the file')]);
    const t3 = d.send([u('fix the bug'), a('looking'), u('here is the file'), a('patched'), u('thanks')]);
    expect(t1.relation).toBe('new');
    expect(t2).toMatchObject({
      relation: 'continues',
      parent: t1.id,
      conversation: t1.conversation,
      turn: 2,
      agreed: true,
    });
    expect(t3).toMatchObject({ relation: 'continues', parent: t2.id, turn: 3 });
  });

  it('two unlabelled conversations that share only the system prompt and tools are strangers', () => {
    const d = driver();
    const a1 = d.send([u('task A')]);
    const b1 = d.send([u('task B')]);
    const a2 = d.send([u('task A'), a('ok A'), u('more A')]);
    const b2 = d.send([u('task B'), a('ok B'), u('more B')]);
    expect(b1).toMatchObject({ relation: 'new' });
    expect(b1.conversation).not.toBe(a1.conversation);
    expect(a2).toMatchObject({ relation: 'continues', conversation: a1.conversation });
    expect(b2).toMatchObject({ relation: 'continues', conversation: b1.conversation });
  });

  it('unlabelled conversations that open with the same context message are strangers', () => {
    const d = driver();
    const ctx = u('<context>the repository layout and rules</context>');
    const a1 = d.send([ctx, u('task A')]);
    const b1 = d.send([ctx, u('task B')]);
    expect(b1).toMatchObject({ relation: 'new' });
    expect(b1.conversation).not.toBe(a1.conversation);
    const a2 = d.send([ctx, u('task A'), a('ok A'), u('more A')]);
    expect(a2).toMatchObject({ relation: 'continues', parent: a1.id, reclassified: [] });
    // Under a label, the task edited after the same opening is still the line (its first messages changed).
    const l1 = d.send([ctx, u('task C'), a('ok'), u('next')], { label: 'l' });
    const l2 = d.send([ctx, u('task C, edited'), a('ok'), u('next'), a('done'), u('more')], { label: 'l' });
    expect(l2).toMatchObject({ relation: 'continues', parent: l1.id, conversation: l1.conversation });
  });

  it('a tool added mid-session continues the conversation (the cache key disagrees, the transcript holds)', () => {
    const d = driver();
    const t1 = d.send([u('go')], { label: 's' });
    const t2 = d.send([u('go'), a('ok'), u('next')], {
      label: 's',
      tools: [...TOOLS, { name: 'mcp__x', description: 'x', input_schema: { type: 'object' } }],
    });
    expect(t2).toMatchObject({ relation: 'continues', parent: t1.id, agreed: false });
    const t2b = driver().send([u('go')]);
    expect(t2b.relation).toBe('new');
  });

  it('a subagent under the same label, with its own system prompt and task, is a sibling', () => {
    const d = driver();
    d.send([u('main task')], { label: 'cc' });
    const sub = d.send([u('search the repo for X')], {
      label: 'cc',
      system: 'You are a subagent.',
      model: 'claude-haiku-4-5',
    });
    expect(sub.relation).toBe('sibling');
  });

  it('a review fork with wider tools under the parent label, then the main line: the fork is the fork', () => {
    const d = driver();
    const h = [u('build it'), a('built'), u('now test')];
    const p = d.send(h, { label: 's' });
    const review = d.send([...h, a('tested'), u('review the change')], {
      label: 's',
      tools: [...TOOLS, { name: 'review_tool', description: 'r', input_schema: { type: 'object' } }],
    });
    // Provisionally it continues (a tool added mid-session looks the same)...
    expect(review).toMatchObject({ relation: 'continues', parent: p.id });
    const main = d.send([...h, a('tested'), u('all green, ship it')], { label: 's' });
    // ...until the main line comes back with the parent's own prefix.
    expect(main).toMatchObject({
      relation: 'continues',
      parent: p.id,
      conversation: p.conversation,
      agreed: true,
    });
    expect(main.reclassified).toEqual([
      { request: review.id, relation: 'fork', conversation: `c-${review.id}` },
    ]);
    expect(d.store.request(review.id)?.relation).toBe('fork');
    const next = d.send([...h, a('tested'), u('all green, ship it'), a('shipped'), u('done?')], {
      label: 's',
    });
    expect(next).toMatchObject({ relation: 'continues', parent: main.id, conversation: p.conversation });
  });

  it('a review fork sent after the main line is a fork at once; under its own label it starts warm', () => {
    const d = driver();
    const h = [u('build it'), a('built'), u('now test')];
    const p = d.send(h, { label: 's' });
    d.send([...h, a('tested'), u('ship')], { label: 's' });
    const review = d.send([...h, a('tested'), u('review')], { label: 's', tools: [TOOLS[0] as object] });
    expect(review).toMatchObject({ relation: 'fork', parent: p.id });
    // Another label is never a fork of this one: a conversation of its own, warm from the parent's prefix.
    const own = d.send([...h, a('tested'), u('review 2')], { label: 'review-agent' });
    expect(own).toMatchObject({ relation: 'new', warm: { request: p.id, label: 's' } });
    expect(own.parent).toBeUndefined();
  });

  it('a summary fork with the same prefix before the main line: the line that goes on is the main one', () => {
    const d = driver();
    const h = [u('task'), a('step'), u('result')];
    const p = d.send(h, { label: 's' });
    const summary = d.send([...h, a('done'), u('summarize the session')], { label: 's' });
    const main = d.send([...h, a('done'), u('next step')], { label: 's' });
    expect(main).toMatchObject({ relation: 'continues', conversation: p.conversation });
    expect(d.store.request(summary.id)?.relation).toBe('fork');
    // And the other order: main first, then the summary, then main again.
    const d2 = driver();
    const p2 = d2.send(h, { label: 's' });
    const m1 = d2.send([...h, a('done'), u('next step')], { label: 's' });
    const s2 = d2.send([...h, a('done'), u('summarize the session')], { label: 's' });
    const m2 = d2.send([...h, a('done'), u('next step'), a('ok'), u('and then')], { label: 's' });
    expect(m2).toMatchObject({ relation: 'continues', parent: m1.id, conversation: p2.conversation });
    expect(d2.store.request(m1.id)?.relation).toBe('continues');
    expect(d2.store.request(s2.id)?.relation).toBe('fork');
  });

  it('an edited earlier message continues the line as an edit (partial match), and a retry is a duplicate', () => {
    const d = driver();
    d.send([u('one')], { label: 's' });
    d.send([u('one'), a('two'), u('three')], { label: 's' });
    const t3 = d.send([u('one'), a('two'), u('three'), a('four'), u('five')], { label: 's' });
    const h = [u('one'), a('two'), u('three, edited'), a('four'), u('five'), a('six'), u('seven')];
    const edited = d.send(h, { label: 's' });
    expect(edited).toMatchObject({
      relation: 'continues',
      parent: t3.id,
      shared: { messages: 2, full: false },
    });
    const retry = d.send(h, { label: 's' });
    expect(retry).toMatchObject({ relation: 'continues', parent: edited.id, duplicate: true });
  });

  it('a rewound last turn (the newest prompt edited) makes the abandoned attempt the fork', () => {
    const d = driver();
    const p = d.send([u('one'), a('two'), u('three')], { label: 's' });
    const first = d.send([u('one'), a('two'), u('three'), a('four'), u('five')], { label: 's' });
    const again = d.send([u('one'), a('two'), u('three'), a('four'), u('five, better')], { label: 's' });
    expect(again).toMatchObject({ relation: 'continues', parent: p.id, conversation: p.conversation });
    expect(d.store.request(first.id)?.relation).toBe('fork');
  });

  it('an old turn dropped after the line went on continues the line from its tip, with or without a label', () => {
    for (const label of ['s', undefined]) {
      const d = driver();
      const opts = label ? { label } : {};
      const t1 = d.send([u('one')], opts);
      d.send([u('one'), a('two'), u('three')], opts);
      d.send([u('one'), a('two'), u('three'), a('four'), u('five')], opts);
      const tip = d.send([u('one'), a('two'), u('three'), a('four'), u('five'), a('six'), u('seven')], opts);
      // The turn "two/three" is dropped: the request extends only the first request's history.
      const dropped = d.send([u('one'), a('four'), u('five'), a('six'), u('seven'), a('8'), u('9')], opts);
      expect(dropped).toMatchObject({
        relation: 'continues',
        parent: tip.id,
        conversation: t1.conversation,
        shared: { messages: 1, full: false },
        agreed: true,
      });
      const next = d.send(
        [u('one'), a('four'), u('five'), a('six'), u('seven'), a('8'), u('9'), a('x'), u('y')],
        opts,
      );
      expect(next).toMatchObject({
        relation: 'continues',
        parent: dropped.id,
        conversation: t1.conversation,
      });
    }
  });

  it('a request branching from an old turn becomes the fork when the old line comes back', () => {
    const d = driver();
    d.send([u('one')], { label: 's' });
    d.send([u('one'), a('two'), u('three')], { label: 's' });
    const tip = d.send([u('one'), a('two'), u('three'), a('four'), u('five')], { label: 's' });
    const branch = d.send([u('one'), a('other'), u('path')], { label: 's' });
    expect(branch).toMatchObject({ relation: 'continues', parent: tip.id });
    const back = d.send([u('one'), a('two'), u('three'), a('four'), u('five'), a('six'), u('seven')], {
      label: 's',
    });
    expect(back).toMatchObject({ relation: 'continues', parent: tip.id, conversation: tip.conversation });
    expect(back.reclassified).toEqual([
      { request: branch.id, relation: 'fork', conversation: `c-${branch.id}` },
    ]);
  });

  it('a first message re-rendered under the same label (a date reminder) continues the line', () => {
    const d = driver();
    const t1 = d.send([u('<date>monday</date> go'), a('ok'), u('next')], { label: 's' });
    const t2 = d.send([u('<date>tuesday</date> go'), a('ok'), u('next'), a('done'), u('more')], {
      label: 's',
    });
    expect(t2).toMatchObject({ relation: 'continues', parent: t1.id, shared: { messages: 0, full: false } });
    // Without a label, a changed first message is a stranger.
    expect(d.send([u('<date>wednesday</date> go'), a('ok'), u('next')]).relation).toBe('new');
  });

  it('Codex-style sessions whose first message is the same environment block stay apart', () => {
    const d = driver();
    const env = u('<environment_context>cwd=/repo</environment_context>');
    const s1 = d.send([env, u('task one')], { label: 'pck:1' });
    const s2 = d.send([env, u('task two')], { label: 'pck:2' });
    expect(s2.relation).toBe('new');
    expect(s2.conversation).not.toBe(s1.conversation);
  });

  it('stays bounded: the store forgets the oldest requests past its cap', () => {
    const store = new MemoryConversationStore({ maxRequests: 50, maxKeys: 200 });
    const builder = new PrefixBuilder();
    for (let i = 0; i < 500; i++) {
      const prefix = builder.parse(body([u(`task ${i}`), a('ok'), u('more')]), {
        format: 'anthropic-messages',
      });
      const req = { id: `r${i}`, time: i, ends: messageEnds(prefix), head: prefix.levels.messages.foldHash };
      commitConversation(store, req, resolveConversation(store, req));
    }
    const s = store.sizes();
    expect(s.requests).toBeLessThanOrEqual(50);
    expect(s.keys).toBeLessThanOrEqual(400);
  });
});
