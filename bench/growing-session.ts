// Bench fixture: an agent session whose requests each append one exchange, the cache marker on the last
// block as agents move it. Bench-only: nothing in src/ may import it, and it never touches the network.

import { agentConversation } from '../src/demo/agent-conversation.js';

/**
 * One session's requests: request k is the conversation up to its k-th user message (a question or a
 * tool result), with the cache marker on its last block, as agents move it. Consecutive requests append.
 */
export class GrowingSession {
  private readonly head: string;
  private readonly plain: string[];
  private readonly marked: string[];
  /** Indices of user messages: a request ends on each. */
  private readonly ends: number[];
  private next: number;

  constructor(seed: number, fromBytes: number, steps: number) {
    let turns = 2;
    const body = () => agentConversation({ turns, seed, cacheLast: false });
    // Enough turns for the first request to be `fromBytes` long and `steps` more after it.
    while (JSON.stringify(body()).length < fromBytes + (steps / 2 + 2) * 5_000)
      turns += Math.max(1, turns >> 2);
    const { messages, ...rest } = body() as { messages: Array<{ role: string; content: unknown[] }> };
    this.head = JSON.stringify({ ...rest, stream: true }).slice(0, -1);
    this.plain = messages.map((m) => JSON.stringify(m));
    this.marked = messages.map((m) => {
      const content = m.content.map((b, i) =>
        i === m.content.length - 1 ? { ...(b as object), cache_control: { type: 'ephemeral' } } : b,
      );
      return JSON.stringify({ ...m, content });
    });
    this.ends = messages.flatMap((m, i) => (m.role === 'user' ? [i] : []));
    let size = this.head.length;
    let first = messages.length - 1;
    for (let i = 0; i < messages.length; i++) {
      size += (this.plain[i] as string).length + 1;
      if (size >= fromBytes && messages[i]?.role === 'user') {
        first = i;
        break;
      }
    }
    this.next = Math.max(0, this.ends.indexOf(first));
  }

  /** The next request's body (each extends the one before). */
  take(): string {
    const end = this.ends[this.next++];
    if (end === undefined) throw new Error('session exhausted');
    return `${this.head},"messages":[${[...this.plain.slice(0, end), this.marked[end]].join(',')}]}`;
  }
}
