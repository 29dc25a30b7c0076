// A small agent on @anthropic-ai/sdk with memory and skill stores, a background review every N turns and a
// token-budget summarizer, built with cacheward/fork and cacheward/guard. Also the naive versions, to compare.

import type Anthropic from '@anthropic-ai/sdk';
import { BackgroundForks, type ForkOutcome, forkRequest, validateReply } from '../../src/fork/index.js';
import { type CasFileStore, StaleGuard, ToolGate } from '../../src/guard/index.js';

type Json = Record<string, unknown>;
type Params = Anthropic.MessageCreateParamsNonStreaming;

export const TOOLS = ['Read', 'Grep', 'Edit', 'Write', 'Bash', 'memory', 'skill_manage'].map((name) => ({
  name,
  description: `${name}: ${'a tool the coding agent uses. '.repeat(30)}`,
  input_schema: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } } },
}));

const SYSTEM = [
  {
    type: 'text',
    text: `You are a coding agent. ${'Follow the house rules carefully. '.repeat(120)}`,
    cache_control: { type: 'ephemeral' },
  },
];

export const REVIEW_PROMPT =
  'Review the conversation above. Record what is worth remembering as one short memory note.';
export const SUMMARY_PROMPT = 'Summarize the conversation so far in five bullets for a future turn.';

export interface ReviewAgentOptions {
  client: Anthropic;
  model?: string;
  stores: { memory: CasFileStore; skills: CasFileStore };
  /** A background review every N user turns (default 3). */
  reviewEvery?: number;
  /** Headers for the review fork's request (tests use them to slow a fork down). */
  reviewHeaders?: Record<string, string>;
}

/** What a fork request reported: its usage and how the parent's cached prefix compares. */
export interface ForkUsage {
  kind: 'review' | 'summary';
  naive: boolean;
  cacheRead: number;
  cacheWrite: number;
  inputTotal: number;
  /** Tokens the parent had cached (read + written) when the fork was made. */
  parentCached: number;
}

export class ReviewAgent {
  readonly messages: Json[] = [];
  readonly forks = new BackgroundForks({ maxPendingPerParent: 1 });
  readonly usage: ForkUsage[] = [];
  readonly outcomes: ForkOutcome[] = [];
  private readonly running: Array<Promise<ForkOutcome>> = [];
  /** What a review fork may call: read-only tools; it proposes memory as its result, never writes itself. */
  readonly gate = new ToolGate({ allow: ['Read', 'Grep'] });
  private lastRequest: { body: Params; cached: number } | undefined;
  private turns = 0;

  constructor(private readonly o: ReviewAgentOptions) {}

  private body(): Params {
    const messages = structuredClone(this.messages);
    const last = messages[messages.length - 1] as { content: Json[] } | undefined;
    const block = last?.content[last.content.length - 1];
    if (block) block.cache_control = { type: 'ephemeral' };
    return {
      model: this.o.model ?? 'claude-opus-5',
      max_tokens: 512,
      tools: TOOLS,
      system: SYSTEM,
      messages: messages as unknown as Params['messages'],
    } as Params;
  }

  /** One user turn: the parent's request, then (every N turns) a background review fork. */
  async turn(text: string): Promise<void> {
    // A live parent turn cancels a pending review (bounded wait) before it goes on.
    await this.forks.cancel('main');
    this.messages.push({ role: 'user', content: [{ type: 'text', text }] });
    const body = this.body();
    const reply = await this.o.client.messages.create(body);
    const u = reply.usage;
    this.lastRequest = {
      body,
      cached: (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0),
    };
    this.messages.push({ role: 'assistant', content: reply.content as unknown as Json[] });
    this.turns++;
    if (this.turns % (this.o.reviewEvery ?? 3) === 0) this.startReview(reply.content as unknown as Json[]);
  }

  /** Starts the review fork of the last turn. Its write is applied only if the conversation has not moved. */
  startReview(reply: Json[]): Promise<ForkOutcome> | undefined {
    const parent = this.lastRequest;
    if (!parent || !this.forks.enabled || this.forks.pendingFor('main')) return undefined;
    const guard = new StaleGuard(this.messages);
    const fork = forkRequest({ format: 'anthropic-messages', body: parent.body, reply }, REVIEW_PROMPT, {
      requireParity: true,
    });
    const done = this.forks.start({
      parent: 'main',
      run: async (signal) => {
        const r = await this.o.client.messages.create(fork.body, {
          signal,
          headers: { ...fork.headers, ...this.o.reviewHeaders },
        });
        this.record('review', false, r.usage, parent.cached);
        for (const call of r.content.filter((b) => b.type === 'tool_use')) {
          const decision = this.gate.check(call.name, call.input);
          if (!decision.ok) throw new Error(decision.reason);
        }
        const valid = validateReply(r as never, 'record_review');
        if (!valid.ok) throw new Error(valid.reason);
        return valid.kind === 'text' ? valid.text : JSON.stringify(valid.data);
      },
      isCurrent: () => guard.check(this.messages).ok,
      apply: async (note) => {
        const ctx = this.o.stores.memory.context();
        const doc = await ctx.read('notes.md');
        await ctx.write('notes.md', `${doc?.content ?? ''}- ${String(note)}\n`);
      },
    });
    this.running.push(
      done.then((o) => {
        this.outcomes.push(o);
        return o;
      }),
    );
    return done;
  }

  /** Resolves once every review started so far has its outcome (applied, discarded or failed). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.running);
  }

  /** The token-budget summary, as a fork of the last request (reads the parent's cache). */
  async summarize(): Promise<string> {
    const parent = this.lastRequest;
    if (!parent) return '';
    const fork = forkRequest({ format: 'anthropic-messages', body: parent.body }, SUMMARY_PROMPT, {
      requireParity: true,
    });
    const r = await this.o.client.messages.create(fork.body, { headers: fork.headers });
    this.record('summary', false, r.usage, parent.cached);
    const valid = validateReply(r as never);
    return valid.ok && valid.kind === 'text' ? valid.text : '';
  }

  /** The naive review: its own narrower tools[] (the reported bug): re-bills the whole context. */
  async naiveReview(): Promise<void> {
    const parent = this.lastRequest;
    if (!parent) return;
    const body: Json = {
      ...structuredClone(parent.body),
      tools: TOOLS.filter((t) => ['Read', 'Grep', 'memory'].includes(t.name)),
    };
    (body.messages as Json[]).push({ role: 'user', content: REVIEW_PROMPT });
    const r = await this.o.client.messages.create(body as never);
    this.record('review', true, r.usage, parent.cached);
  }

  /** The naive summary: the history re-rendered as one message under another system prompt. */
  async naiveSummary(): Promise<void> {
    const parent = this.lastRequest;
    if (!parent) return;
    const transcript = this.messages.map((m) => `${String(m.role)}: ${JSON.stringify(m.content)}`).join('\n');
    const r = await this.o.client.messages.create({
      model: parent.body.model as string,
      max_tokens: 512,
      system: [{ type: 'text', text: 'You summarize sessions.', cache_control: { type: 'ephemeral' } }],
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'text',
              text: `${SUMMARY_PROMPT}\n\n${transcript}`,
              cache_control: { type: 'ephemeral' },
            },
          ],
        },
      ],
    } as never);
    this.record('summary', true, r.usage, parent.cached);
  }

  /** Closes the fork runner before the shared client goes away. */
  async close(): Promise<void> {
    await this.forks.close();
  }

  private record(kind: 'review' | 'summary', naive: boolean, u: Anthropic.Usage, parentCached: number): void {
    const read = u.cache_read_input_tokens ?? 0;
    const write = u.cache_creation_input_tokens ?? 0;
    this.usage.push({
      kind,
      naive,
      cacheRead: read,
      cacheWrite: write,
      inputTotal: read + write + u.input_tokens,
      parentCached,
    });
  }
}
