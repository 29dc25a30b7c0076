// Events in time: TTL expiry (mixed TTLs included), idling within the TTL, a turn too long for the lookback,
// prompts below the minimum, and parallel requests that cannot read what the other is still writing.

import { always, anthropic, automatic, type EventDef, linear, MIN, session } from './event-shapes.js';
import type { Scheme, Session } from './session.js';

/**
 * Idle long enough for the entries to expire: 5 minutes (Anthropic; gpt-5.4 asked for `in_memory`, its
 * default being 24 h without Zero Data Retention), 24 hours (gpt-5.5 takes only `24h`), 30 minutes (GPT-5.6+).
 */
const expiry = (scheme: Scheme, w: Session['w']) => {
  if (scheme.startsWith('gpt-5.6')) return (31 + w.int(20)) * MIN;
  if (scheme === 'gpt-5.5') return (24 * 60 + 5 + w.int(60)) * MIN;
  return (6 + w.int(10)) * MIN;
};

export const timeEvents: EventDef[] = [
  {
    name: 'ttl_expired',
    applies: always,
    build: (spec) => {
      const s = session(spec, 'ttl_expired');
      if (spec.scheme === 'gpt-5.4') s.conv.fields.prompt_cache_retention = 'in_memory';
      return linear(s, (s) => ({ expect: 'ttl_expired', idleMs: expiry(spec.scheme, s.w) }));
    },
  },
  {
    name: 'ttl_mixed',
    applies: anthropic,
    build: (spec) => {
      const s = session(spec, 'ttl_mixed');
      s.conv.ttl = { system: '1h', messages: '5m' };
      return linear(s, () => ({ expect: 'ttl_expired', idleMs: 10 * MIN }));
    },
  },
  {
    name: 'idle_within_ttl',
    applies: always,
    build: (spec) => {
      const s = session(spec, 'idle_within_ttl');
      let idle = (10 + s.w.int(15)) * MIN;
      if (spec.scheme === 'anthropic') s.conv.ttl = { system: '1h', messages: '1h' };
      else if (automatic(spec.scheme)) {
        // 24 hours, asked for or by default (no Zero Data Retention: gpt-5.4's default, gpt-5.5's only).
        if (s.w.int(2)) s.conv.fields.prompt_cache_retention = '24h';
        idle = (6 + s.w.int(60)) * MIN;
      }
      return linear(s, () => ({ expect: null, idleMs: idle }));
    },
  },
  {
    name: 'many_steps',
    applies: always,
    build: (spec) => {
      // Anthropic looks back 20 blocks from a breakpoint; GPT-5.6 implicit, 20 eligible message ends.
      const lookback = spec.scheme === 'anthropic' || spec.scheme === 'gpt-5.6-implicit';
      return linear(session(spec, 'many_steps'), (s) => {
        const n = spec.scheme === 'anthropic' ? 8 : 22;
        for (let i = 0; i < n; i++) s.step('tool', 2);
        return { expect: lookback ? 'lookback_exceeded' : null, stepped: true };
      });
    },
  },
  {
    name: 'below_minimum',
    applies: always,
    build: (spec) => {
      const small = spec.scheme !== 'anthropic';
      const s = session(spec, 'below_minimum', {
        style: 'plain',
        ...(small ? { systemSentences: 6, tools: ['Read'] } : { model: 'claude-haiku-4-5' }),
      });
      for (let t = 1; t <= 3; t++) {
        if (t > 1) s.step('chat');
        s.send({ expect: 'below_minimum', injected: true });
      }
      return s.requests;
    },
  },
];

export const STALL = 150;

export const concurrencyEvents: EventDef[] = [
  {
    name: 'concurrent_first',
    applies: always,
    build: (spec) => {
      const s = session(spec, 'concurrent_first');
      s.send({ expect: 'cold_start' }, { stallMs: STALL });
      s.send({ expect: 'concurrent', injected: true }, { parallelWithPrevious: true });
      for (let t = 0; t < 3; t++) {
        s.step();
        s.send({ expect: null });
      }
      return s.requests;
    },
  },
  {
    name: 'concurrent_duplicate',
    applies: always,
    build: (spec) => {
      const s = session(spec, 'concurrent_duplicate');
      s.send({ expect: 'cold_start' });
      for (let t = 0; t < 2; t++) {
        s.step();
        s.send({ expect: null });
      }
      // A long paste, sent twice at once: the second cannot read what the first is still writing.
      s.step('chat', 150);
      s.send({ expect: null }, { stallMs: STALL });
      s.send({ expect: 'concurrent', injected: true }, { parallelWithPrevious: true });
      for (let t = 0; t < 2; t++) {
        s.step();
        s.send({ expect: null });
      }
      return s.requests;
    },
  },
];
