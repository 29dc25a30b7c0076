// Starts OTLP export when `--otlp` (or the library option) asks for it. The SDK is loaded only then, so
// a proxy without telemetry never pays for it.

import { redactUrl } from '../core/redact-url.js';
import { type OtlpOptions, otlpOptions } from './otlp-config.js';
import type { OtlpTelemetry } from './otlp-telemetry.js';

export type { OtlpOptions } from './otlp-config.js';

/** The running export, or undefined when none was asked for. Throws OtlpConfigError for a bad URL. */
export async function startTelemetry(
  option: string | OtlpOptions | undefined,
  log: (line: string) => void,
  upstreams: Partial<Record<'anthropic' | 'openai', string>> = {},
): Promise<OtlpTelemetry | undefined> {
  const options = otlpOptions(option);
  if (!options) return undefined;
  const { OtlpTelemetry } = await import('./otlp-telemetry.js');
  log(`exporting OTLP to ${redactUrl(options.tracesUrl ?? '')} and ${redactUrl(options.metricsUrl ?? '')}`);
  return new OtlpTelemetry(options, log, upstreams);
}
