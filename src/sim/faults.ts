// Fault injection for the simulator: which fault a request gets, from its `x-sim-fault` header or the
// server-wide `--faults` rates. Parsing and choice only; the handlers carry the faults out.

import { CachewardError } from '../core/errors.js';
/** Every fault the simulator can inject. */
export type FaultName =
  | 'rate-limit'
  | 'overloaded'
  | 'server-error'
  | 'error-mid-stream'
  | 'reset-mid-stream'
  | 'stall'
  | 'slow';

/** A fault with its value: the stall before the first byte, or the pause between streamed events (ms). */
export interface Fault {
  name: FaultName;
  ms?: number;
}

const ALIASES: Record<string, FaultName> = {
  '429': 'rate-limit',
  'rate-limit': 'rate-limit',
  '529': 'overloaded',
  '503': 'overloaded',
  overloaded: 'overloaded',
  '500': 'server-error',
  'server-error': 'server-error',
  'error-mid-stream': 'error-mid-stream',
  'sse-error': 'error-mid-stream',
  'reset-mid-stream': 'reset-mid-stream',
  reset: 'reset-mid-stream',
  stall: 'stall',
  slow: 'slow',
};

/** A bad fault specification. */
export class FaultSpecError extends CachewardError {
  constructor(message: string) {
    super('CW_SIM_FAULT_SPEC', message);
  }
}

/** Parses `429`, `stall=2000`, `slow=50,error-mid-stream` (a header may name several). */
export function parseFaults(spec: string): Fault[] {
  const out: Fault[] = [];
  for (const part of spec.split(',')) {
    const item = part.trim();
    if (!item) continue;
    const [rawName = '', rawValue] = item.split('=');
    const name = ALIASES[rawName.trim().toLowerCase()];
    if (!name) {
      throw new FaultSpecError(
        `unknown fault "${rawName}": use 429, 529, 500, error-mid-stream, reset-mid-stream, stall=MS or slow=MS`,
      );
    }
    const fault: Fault = { name };
    if (rawValue !== undefined) {
      const ms = Number(rawValue);
      if (!Number.isFinite(ms) || ms < 0)
        throw new FaultSpecError(`fault "${item}": the value must be a number of ms`);
      fault.ms = ms;
    } else if (name === 'stall') fault.ms = 30_000;
    else if (name === 'slow') fault.ms = 50;
    out.push(fault);
  }
  return out;
}

/** A fault applied at random to a share of requests: `429@0.1` is a 429 for one request in ten. */
export interface FaultRate {
  fault: Fault;
  rate: number;
}

/** Parses the `--faults` option: `429@0.05,reset-mid-stream@0.01,slow=20@1`. */
export function parseFaultRates(spec: string): FaultRate[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const [f = '', r] = item.split('@');
      const rate = r === undefined ? 1 : Number(r);
      if (!Number.isFinite(rate) || rate < 0 || rate > 1) {
        throw new FaultSpecError(`fault rate "${item}": the rate after @ must be between 0 and 1`);
      }
      const [fault] = parseFaults(f);
      if (!fault) throw new FaultSpecError(`fault rate "${item}": name a fault`);
      return { fault, rate };
    });
}

/** Picks the faults for one request: the header's, else each configured rate drawn with `random`. */
export function chooseFaults(
  header: string | null,
  rates: readonly FaultRate[],
  random: () => number,
): Fault[] {
  if (header) return parseFaults(header);
  return rates.filter((r) => random() < r.rate).map((r) => r.fault);
}
