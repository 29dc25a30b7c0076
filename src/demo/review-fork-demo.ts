// The review-agent comparison for the demo: the same background review and summary, done naively and with
// cacheward/fork, against the in-process simulator. Returns what each read, wrote and cost. No network.

import { PriceTable } from '../analyze/price-table.js';
import { VirtualClock } from '../core/clock.js';
import type { Json } from '../core/json.js';
import { forkRequest } from '../fork/fork-request.js';
import { agentConversation, anthropicTool } from '../sim/agent-conversation.js';
import { createSimulator } from '../sim/simulator.js';

export interface ForkComparisonRow {
  label: string;
  read: number;
  written: number;
  uncached: number;
  cost: number;
}

const REVIEW = 'Review the conversation above and record what is worth remembering.';
const SUMMARY = 'Summarize the conversation so far in five bullets.';

export async function compareReviewForks(): Promise<ForkComparisonRow[]> {
  const sim = createSimulator({ clock: new VirtualClock(), requireApiKey: false });
  const price = new PriceTable().lookup('claude-opus-5');
  const send = async (body: Json): Promise<{ usage: Json; content: Json[] }> => {
    const res = await sim.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(body) });
    return (await res.json()) as { usage: Json; content: Json[] };
  };
  const row = (label: string, u: Json): ForkComparisonRow => {
    const read = Number(u.cache_read_input_tokens ?? 0);
    const written = Number(u.cache_creation_input_tokens ?? 0);
    const uncached = Number(u.input_tokens ?? 0);
    const cost = price ? (read * price.read + written * price.write5m + uncached * price.input) / 1e6 : 0;
    return { label, read, written, uncached, cost };
  };
  const tools = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write'];
  const parent = agentConversation({ turns: 12, tools, seed: 61 });
  const reply = (await send(parent)).content;
  const rows: ForkComparisonRow[] = [];
  // Naive review: the fork builds its own agent with every registered tool (a wider tools[]).
  const naive: Json = {
    ...structuredClone(parent),
    tools: [...tools, 'WebFetch', 'skill_manage'].map((n) => anthropicTool(n)),
  };
  (naive.messages as Json[]).push({ role: 'assistant', content: reply }, { role: 'user', content: REVIEW });
  rows.push(row('review, naive (wider tools[])', (await send(naive)).usage));
  const review = forkRequest({ format: 'anthropic-messages', body: parent, reply }, REVIEW, {
    requireParity: true,
  });
  rows.push(row('review, cacheward/fork', (await send(review.body)).usage));
  // Naive summary: the history re-rendered under another prompt.
  const transcript = (parent.messages as Json[])
    .map((m) => `${String(m.role)}: ${JSON.stringify(m.content)}`)
    .join('\n');
  rows.push(
    row(
      'summary, standalone re-render',
      (
        await send({
          model: parent.model,
          max_tokens: 512,
          system: [{ type: 'text', text: 'You summarize sessions.', cache_control: { type: 'ephemeral' } }],
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: `${SUMMARY}\n\n${transcript}`, cache_control: { type: 'ephemeral' } },
              ],
            },
          ],
        })
      ).usage,
    ),
  );
  const summary = forkRequest({ format: 'anthropic-messages', body: parent }, SUMMARY, {
    requireParity: true,
  });
  rows.push(row('summary, cacheward/fork', (await send(summary.body)).usage));
  await sim.close();
  return rows;
}
