// The OpenAI rules that depend on the model: which `prompt_cache_retention` values it takes and its default
// (with or without Zero Data Retention), and whether it has prompt cache diagnostics. Pure; data and checks.

import { OPENAI_TTL_24H, OPENAI_TTL_IN_MEMORY, openaiModelFacts } from './openai-cache.js';

export type OpenAIRetention = 'in_memory' | '24h';

/**
 * Models with extended (`24h`) retention besides GPT-5.5 and later (prompt-caching.md, 2026-09-11: "Extended
 * retention is supported by `gpt-5.5`, `gpt-5.5-pro`, `gpt-5.4`, `gpt-5.2`, `gpt-5.1-codex-max`, `gpt-5.1`,
 * `gpt-5.1-codex`, `gpt-5.1-codex-mini`, `gpt-5.1-chat-latest`, `gpt-5`, `gpt-5-codex`, and `gpt-4.1`").
 */
const EXTENDED = [
  'gpt-5.4',
  'gpt-5.2',
  'gpt-5.1-codex-max',
  'gpt-5.1',
  'gpt-5.1-codex',
  'gpt-5.1-codex-mini',
  'gpt-5.1-chat-latest',
  'gpt-5',
  'gpt-5-codex',
  'gpt-4.1',
];

/** `gpt-5.1` and its dated snapshots (`gpt-5.1-2025-11-13`), not `gpt-5.1-mini`. */
function isModel(id: string, name: string): boolean {
  return id === name || new RegExp(`^${name.replace(/\./g, '\\.')}-\\d{4}-\\d{2}-\\d{2}$`).test(id);
}

/** The retention values a model takes (first = its only value when there is one). */
export function openaiRetentions(model: string | undefined): readonly OpenAIRetention[] {
  const id = (model ?? '').toLowerCase();
  const m = /^gpt-(\d+)(?:\.(\d+))?/.exec(id);
  const major = m ? Number(m[1]) : 0;
  const minor = m?.[2] ? Number(m[2]) : 0;
  // "For `gpt-5.5`, `gpt-5.5-pro`, and future models, only `24h` is supported." (responses-object-tail)
  if (major > 5 || (major === 5 && minor >= 5)) return ['24h'];
  if (EXTENDED.some((name) => isModel(id, name))) return ['in_memory', '24h'];
  return ['in_memory'];
}

/**
 * The retention a request gets when it sends none: "For models that support both `in_memory` and `24h`,
 * the default depends on your organization's data retention policy: Organizations without Zero Data
 * Retention enabled default to `24h`. Organizations with Zero Data Retention enabled default to
 * `in_memory`." (prompt-caching.md, "Retention defaults and Zero Data Retention"). Other models have one value.
 */
export function openaiDefaultRetention(
  model: string | undefined,
  options: { zdr?: boolean } = {},
): OpenAIRetention {
  const values = openaiRetentions(model);
  if (values.length === 1) return values[0] as OpenAIRetention;
  return options.zdr ? 'in_memory' : '24h';
}

/** How long an entry with this retention lives without a read, before GPT-5.6 (model: 5 minutes, 24 hours). */
export function retentionTtlMs(retention: OpenAIRetention): number {
  return retention === '24h' ? OPENAI_TTL_24H : OPENAI_TTL_IN_MEMORY;
}

/** The request's retention, or what is wrong with it (the 400 message; the wording is a model choice). */
export function resolveOpenAIRetention(
  model: string | undefined,
  requested: unknown,
  options: { zdr?: boolean } = {},
): { retention: OpenAIRetention } | { error: string } {
  if (requested === undefined || requested === null)
    return { retention: openaiDefaultRetention(model, options) };
  if (requested !== 'in_memory' && requested !== '24h') {
    return { error: `Invalid value: '${String(requested)}'. Supported values are: 'in_memory' and '24h'.` };
  }
  const values = openaiRetentions(model);
  if (!values.includes(requested)) {
    return {
      error: `prompt_cache_retention '${requested}' is not supported with model '${String(model)}'; it supports ${values.map((v) => `'${v}'`).join(' and ')}.`,
    };
  }
  return { retention: requested };
}

/** "Diagnostics are available in the Responses API for GPT-5.6 and later supported models." */
export function openaiHasDiagnostics(model: string | undefined): boolean {
  return openaiModelFacts(model).scheme === 'breakpoints';
}
