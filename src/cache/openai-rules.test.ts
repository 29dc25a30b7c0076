// OpenAI's retention and diagnostics by model, as the reference copy of its caching docs states them.
// Pure: no request is sent anywhere.

import { describe, expect, it } from 'vitest';
import {
  openaiDefaultRetention,
  openaiHasDiagnostics,
  openaiRetentions,
  resolveOpenAIRetention,
} from './openai-rules.js';

describe('OpenAI retention by model (prompt-caching.md, 2026-09-11)', () => {
  it.each([
    ['gpt-5.6', ['24h']],
    ['gpt-6-astra', ['24h']],
    ['gpt-5.5', ['24h']],
    ['gpt-5.5-pro', ['24h']],
    ['gpt-5.4', ['in_memory', '24h']],
    ['gpt-5.1-codex-mini', ['in_memory', '24h']],
    ['gpt-5.1-2025-11-13', ['in_memory', '24h']],
    ['gpt-5', ['in_memory', '24h']],
    ['gpt-4.1', ['in_memory', '24h']],
    ['gpt-5-mini', ['in_memory']],
    ['gpt-4.1-mini', ['in_memory']],
    ['gpt-4o', ['in_memory']],
    [undefined, ['in_memory']],
  ])('%s takes %j', (model, values) => {
    expect(openaiRetentions(model)).toEqual(values);
  });

  it('defaults to 24h without ZDR and in_memory with it, where a model takes both', () => {
    expect(openaiDefaultRetention('gpt-5.4')).toBe('24h');
    expect(openaiDefaultRetention('gpt-5.4', { zdr: true })).toBe('in_memory');
    expect(openaiDefaultRetention('gpt-5.5', { zdr: true })).toBe('24h');
    expect(openaiDefaultRetention('gpt-4o')).toBe('in_memory');
  });

  it('says what is wrong with a value', () => {
    expect(resolveOpenAIRetention('gpt-5.4', undefined)).toEqual({ retention: '24h' });
    expect(resolveOpenAIRetention('gpt-5.4', 'in_memory')).toEqual({ retention: 'in_memory' });
    expect(resolveOpenAIRetention('gpt-5.4', 'week')).toEqual({
      error: "Invalid value: 'week'. Supported values are: 'in_memory' and '24h'.",
    });
    expect(resolveOpenAIRetention('gpt-5.5', 'in_memory')).toEqual({
      error: "prompt_cache_retention 'in_memory' is not supported with model 'gpt-5.5'; it supports '24h'.",
    });
  });

  it('has diagnostics from GPT-5.6 on', () => {
    expect(openaiHasDiagnostics('gpt-5.6')).toBe(true);
    expect(openaiHasDiagnostics('gpt-5.5')).toBe(false);
  });
});
