import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { CasFileStore } from '../../src/guard/index.js';
import { assertReadsParent, createCacheTestbed } from '../../src/testing/index.js';
import { ReviewAgent } from './review-agent.js';

function setup(reviewHeaders?: Record<string, string>) {
  const bed = createCacheTestbed();
  const { clock, simulator: sim } = bed;
  const client = bed.client(Anthropic);
  const dir = mkdtempSync(join(tmpdir(), 'review-agent-'));
  const stores = {
    memory: new CasFileStore(join(dir, 'memory')),
    skills: new CasFileStore(join(dir, 'skills')),
  };
  return {
    bed,
    clock,
    sim,
    stores,
    agent: new ReviewAgent({ client, stores, reviewEvery: 3, ...(reviewHeaders ? { reviewHeaders } : {}) }),
  };
}

describe('the review agent, against the simulator', () => {
  it('runs a review fork and a summary fork that each read at least 95% of the parent cached prefix', async () => {
    const { agent, stores, bed } = setup();
    for (const t of ['Read src/app.ts', 'Fix the failing test', 'Run the suite']) await agent.turn(t);
    const outcome = await agent.startReview([]); // already started by the third turn
    expect(outcome).toBeUndefined();
    await agent.settled();
    await agent.forks.close();
    // The conversation model sees the review as a fork of the last turn, and it read the parent's cache.
    // The review read the parent's cache. Until another request extends the same turn, the conversation
    // model cannot tell a fork from the next turn: it is the provisional main line.
    const reviewRequest = bed.last();
    expect(assertReadsParent(bed, { request: reviewRequest })).toBeGreaterThanOrEqual(0.95);
    const review = agent.usage.find((u) => u.kind === 'review' && !u.naive);
    expect(review).toBeDefined();
    expect(review!.cacheRead / review!.parentCached).toBeGreaterThanOrEqual(0.95);
    expect(agent.outcomes[0]?.status).toBe('applied');
    expect((await stores.memory.context().read('notes.md'))?.content).toMatch(/^- Simulated reply/);
    await agent.summarize();
    const summary = agent.usage.find((u) => u.kind === 'summary' && !u.naive);
    expect(summary!.cacheRead / summary!.parentCached).toBeGreaterThanOrEqual(0.95);
    // A second request beside the same turn: the review is now named a fork, and the summary read too.
    expect(bed.requests().find((r) => r.id === reviewRequest.id)?.relation).toBe('fork');
    expect(assertReadsParent(bed)).toBeGreaterThanOrEqual(0.95);
  });

  it('does the same work naively and reads 0% of the parent prefix', async () => {
    const { agent } = setup();
    for (const t of ['Read src/app.ts', 'Fix the failing test']) await agent.turn(t);
    await agent.naiveReview();
    await agent.naiveSummary();
    const naive = agent.usage.filter((u) => u.naive);
    expect(naive.map((u) => u.kind)).toEqual(['review', 'summary']);
    for (const u of naive) expect(u.cacheRead).toBe(0);
    await agent.close();
  });

  it('blocks a review write computed before the parent moved on', async () => {
    const { agent, stores } = setup({ 'x-sim-fault': 'stall=150' });
    for (const t of ['one', 'two', 'three']) await agent.turn(t);
    // The review is in flight (stalled). The user sends another message meanwhile.
    agent.messages.push({ role: 'user', content: [{ type: 'text', text: 'and also this' }] });
    await agent.settled();
    expect(agent.outcomes.map((o) => o.status)).toEqual(['discarded']);
    expect(await stores.memory.context().read('notes.md')).toBeUndefined();
    await agent.close();
  });
});
