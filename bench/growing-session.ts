// Bench fixture: an agent session whose requests each append one exchange, the cache marker on the last
// block as agents move it. Bench-only: nothing in src/ may import it, and it never touches the network.

import { agentConversation } from '../src/sim/agent-conversation.js';

/**
 * `CACHEWARD_BENCH_SHAPE=claude-code`: the benches that grow a session send it shaped as Claude Code sends
 * it (`messages` before `system` and `tools`, and a billing line first in the system prompt, new on every
 * request): pass it as the constructor's `claudeCode`.
 */
export const CLAUDE_CODE = process.env.CACHEWARD_BENCH_SHAPE === 'claude-code';

const BILLING = 'x-anthropic-billing-header: cc_version=2.1.37.a1b; cc_entrypoint=cli; ';
const CCH = 'xxxxx';

/**
 * One session's requests: request k is the conversation up to its k-th user message (a question or a
 * tool result), with the cache marker on its last block, as agents move it. Consecutive requests append.
 */
export class GrowingSession {
  private readonly head: string;
  /** What follows `messages` (Claude Code's shape): its system prompt, tools and the rest. */
  private readonly tail: string;
  private readonly plain: string[];
  private readonly marked: string[];
  /** Indices of user messages: a request ends on each. */
  private readonly ends: number[];
  private next: number;
  /** Requests taken, for Claude Code's billing line (its `cch` differs on every request). */
  private taken = 0;

  /**
   * `claudeCode`: shaped as Claude Code sends it — `model` and `messages` first, then a system prompt that
   * begins with the billing line, whose `cch` changes on every request (same length), then the tools.
   */
  constructor(
    seed: number,
    fromBytes: number,
    steps: number,
    private readonly claudeCode = false,
  ) {
    let turns = 2;
    const body = () => agentConversation({ turns, seed, cacheLast: false });
    // Enough turns for the first request to be `fromBytes` long and `steps` more after it.
    while (JSON.stringify(body()).length < fromBytes + (steps / 2 + 2) * 5_000)
      turns += Math.max(1, turns >> 2);
    const { messages, ...rest } = body() as {
      messages: Array<{ role: string; content: unknown[] }>;
      system: unknown[];
    };
    if (claudeCode) {
      const { model, ...after } = rest as { model: string; system: unknown[] };
      after.system = [{ type: 'text', text: `${BILLING}cch=${CCH};` }, ...after.system];
      this.head = JSON.stringify({ model }).slice(0, -1);
      this.tail = `,${JSON.stringify({ ...after, stream: true }).slice(1)}`;
    } else {
      this.head = JSON.stringify({ ...rest, stream: true }).slice(0, -1);
      this.tail = '}';
    }
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
    const cch = (this.taken++ % 0x100000).toString(16).padStart(5, '0');
    const tail = this.claudeCode ? this.tail.replace(`cch=${CCH};`, `cch=${cch};`) : this.tail;
    return `${this.head},"messages":[${[...this.plain.slice(0, end), this.marked[end]].join(',')}]${tail}`;
  }
}
