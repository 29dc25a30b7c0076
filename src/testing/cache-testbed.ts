// A test bed for agent authors: the simulator on a virtual clock, reached in-process through a capturing
// fetch, with every request analyzed by the report's own analyzer. No HTTP server, no disk, no key.

import { type AnalyzedRequest, Analyzer } from '../analyze/analyze-captures.js';
import { PriceTable } from '../analyze/price-table.js';
import { VirtualClock } from '../core/clock.js';
import { CachewardError } from '../core/errors.js';
import { type CapturingFetch, wrapFetch } from '../proxy/wrap-fetch.js';
import type { CaptureRecord } from '../record/capture-record.js';
import { createSimulator, type Simulator, type SimulatorOptions } from '../sim/simulator.js';

/** Options for {@link createCacheTestbed}. */
export interface CacheTestbedOptions {
  /** The clock (default a VirtualClock at 2026-01-01). Advance it to let cache entries expire. */
  clock?: VirtualClock;
  /** Simulator options besides the clock (scripts, faults, model overrides). */
  simulator?: Omit<SimulatorOptions, 'clock'>;
}

/** What an official SDK client's constructor takes here: a base URL, a key and the capturing fetch. */
export interface SdkOptions {
  baseURL: string;
  apiKey: string;
  fetch: CapturingFetch;
  maxRetries: number;
}

/** One analyzed request with the capture record it came from. */
export interface TestbedRequest extends AnalyzedRequest {
  record: CaptureRecord;
}

export interface CacheTestbed {
  clock: VirtualClock;
  simulator: Simulator;
  /** The fetch that reaches the simulator and records what passes. */
  fetch: CapturingFetch;
  /** `new Anthropic(bed.anthropicOptions())`. */
  anthropicOptions(): SdkOptions;
  /** `new OpenAI(bed.openaiOptions())`. */
  openaiOptions(): SdkOptions;
  /**
   * An SDK client in one call: `bed.client(Anthropic)` or `bed.client(OpenAI)`. The provider is told by
   * the class name; pass it when a bundler renamed the class.
   */
  client<T>(sdk: new (options: SdkOptions) => T, provider?: 'anthropic' | 'openai'): T;
  /**
   * Every request so far, analyzed, in the order they finished. A request that extends the latest turn is
   * the main line until a second one extends the same turn; then the one that does not go on is the fork.
   */
  requests(): TestbedRequest[];
  /** The latest request (throws when there is none). */
  last(): TestbedRequest;
  /** Forgets the requests and empties the simulator's caches. */
  reset(): void;
}

const ANTHROPIC_BASE = 'http://anthropic.testbed.invalid';
const OPENAI_BASE = 'http://openai.testbed.invalid/v1';
const TEST_KEY = 'cacheward-testbed-key';

/** A fresh test bed. Nothing to close: it holds no socket and writes no file. */
export function createCacheTestbed(options: CacheTestbedOptions = {}): CacheTestbed {
  const clock = options.clock ?? new VirtualClock();
  const simulator = createSimulator({ ...options.simulator, clock });
  let analyzer = new Analyzer({ prices: new PriceTable() });
  let rows: TestbedRequest[] = [];
  const fetch = wrapFetch(simulator.fetch, {
    capture: 'off',
    clock,
    logger: {},
    onRecord(record) {
      // The analyzer's own row: a later request may re-name its relation (a provisional main line → fork).
      const row = analyzer.add(record);
      if (row) rows.push(Object.assign(row, { record }));
    },
  });
  const sdk = (baseURL: string): SdkOptions => ({ baseURL, apiKey: TEST_KEY, fetch, maxRetries: 0 });
  return {
    clock,
    simulator,
    fetch,
    anthropicOptions: () => sdk(ANTHROPIC_BASE),
    openaiOptions: () => sdk(OPENAI_BASE),
    client(Sdk, provider) {
      const openai = (provider ?? (Sdk.name === 'OpenAI' ? 'openai' : 'anthropic')) === 'openai';
      return new Sdk(sdk(openai ? OPENAI_BASE : ANTHROPIC_BASE));
    },
    requests: () => [...rows],
    last() {
      const r = rows[rows.length - 1];
      if (!r)
        throw new CachewardError(
          'CW_TESTBED_EMPTY',
          'no request has finished on this test bed yet: send one first',
        );
      return r;
    },
    reset() {
      simulator.reset();
      analyzer = new Analyzer({ prices: new PriceTable() });
      rows = [];
    },
  };
}
