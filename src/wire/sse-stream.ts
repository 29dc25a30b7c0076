// Reads provider server-sent event streams (Anthropic Messages, OpenAI Chat and Responses) incrementally,
// rebuilding the final message and usage. It only observes: it never changes or holds back a byte.

import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { StreamFormatError } from '../core/errors.js';
import type { Json } from '../core/json.js';
import type { WireFormat } from './request-body.js';
import { type NormalizedUsage, normalizeAnthropicUsage, normalizeOpenAIUsage } from './usage.js';

/** One event as read: its SSE `event:` name (if any) and parsed `data`. `[DONE]` has `data: null`. */
export interface StreamEvent {
  event: string | undefined;
  data: Json | null;
}

/** What a stream amounted to once read (so far, if it has not ended). */
export interface StreamSummary {
  format: WireFormat;
  events: number;
  id?: string;
  model?: string;
  stopReason?: string;
  /** The raw usage object as last reported (Anthropic: message_start merged with message_delta). */
  usage?: Json;
  normalizedUsage?: NormalizedUsage;
  /** Provider cache diagnostics on the response, when asked for. */
  diagnostics?: unknown;
  /** An error event in the stream. */
  error?: { type: string; message: string };
  /** The message the stream carried, rebuilt as the non-streaming response would hold it. */
  message?: Json;
  /** Whether the provider's end marker arrived (`message_stop`, `[DONE]`, `response.completed`). */
  complete: boolean;
}

/** An incremental reader: `push` bytes or text as they arrive, `summary()` at any time. */
export interface StreamReader {
  push(chunk: Uint8Array | string): void;
  /** Ends the input (flushes a last event without a trailing blank line). */
  end(): StreamSummary;
  summary(): StreamSummary;
}

/** Creates a reader for a response stream of `format`. `onEvent` sees each parsed event. */
export function createStreamReader(format: WireFormat, onEvent?: (e: StreamEvent) => void): StreamReader {
  const acc =
    format === 'anthropic-messages'
      ? new AnthropicAccumulator()
      : format === 'openai-chat'
        ? new ChatAccumulator()
        : new ResponsesAccumulator();
  // A StringDecoder, not a TextDecoder: the same text (a leading BOM dropped below, as TextDecoder drops
  // it), at a quarter of the cost per response (making a TextDecoder sets up an ICU converter).
  const decoder = new StringDecoder('utf8');
  let first = true;
  const text = (s: string): string => {
    if (!first || s === '') return s;
    first = false;
    return s.charCodeAt(0) === 0xfeff ? s.slice(1) : s;
  };
  let index = 0;
  const parser = createParser({
    onEvent(msg: EventSourceMessage) {
      const i = index++;
      let data: Json | null;
      if (msg.data === '[DONE]') data = null;
      else {
        try {
          data = JSON.parse(msg.data) as Json;
        } catch {
          throw new StreamFormatError(i, `data is not JSON: ${msg.data.slice(0, 60)}`);
        }
      }
      const e = { event: msg.event, data };
      acc.add(e);
      onEvent?.(e);
    },
  });
  return {
    push(chunk) {
      parser.feed(typeof chunk === 'string' ? chunk : text(decoder.write(chunk)));
    },
    end() {
      parser.feed(`${text(decoder.end())}\n\n`);
      return acc.summary(format, index);
    },
    summary: () => acc.summary(format, index),
  };
}

/** Reads a whole stream held in memory. */
export function parseStream(format: WireFormat, text: string | Uint8Array): StreamSummary {
  const reader = createStreamReader(format);
  reader.push(text);
  return reader.end();
}

interface Accumulator {
  add(e: StreamEvent): void;
  summary(format: WireFormat, events: number): StreamSummary;
}

const obj = (v: unknown): Json | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;

function errorOf(d: Json): { type: string; message: string } {
  const e = obj(d.error) ?? d;
  return { type: String(e.type ?? e.code ?? 'error'), message: String(e.message ?? '') };
}

/** An Anthropic message's id, model, stop reason, diagnostics and usage (a stream's, or a JSON body's). */
function messageFields(s: Partial<StreamSummary>, message: Json): void {
  if (typeof message.id === 'string') s.id = message.id;
  if (typeof message.model === 'string') s.model = message.model;
  if (typeof message.stop_reason === 'string') s.stopReason = message.stop_reason;
  if ('diagnostics' in message) s.diagnostics = message.diagnostics;
  const usage = obj(message.usage);
  if (usage) {
    s.usage = usage;
    const n = normalizeAnthropicUsage(usage);
    if (n) s.normalizedUsage = n;
  }
}

/** A Responses response's id, model, status, diagnostics and usage (a stream's last, or a JSON body). */
function responseFields(s: Partial<StreamSummary>, r: Json): void {
  if (typeof r.id === 'string') s.id = r.id;
  if (typeof r.model === 'string') s.model = r.model;
  if (typeof r.status === 'string') s.stopReason = r.status;
  if ('prompt_cache_diagnostics' in r) s.diagnostics = r.prompt_cache_diagnostics;
  const usage = obj(r.usage);
  if (usage) {
    s.usage = usage;
    const n = normalizeOpenAIUsage(usage);
    if (n) s.normalizedUsage = n;
  }
}

/**
 * What a complete, non-streamed response body says: the fields a stream's summary has (the same readers).
 * No `message`, `events` or `complete`: the body is the message.
 */
export function summarizeResponse(format: WireFormat | undefined, json: Json): Partial<StreamSummary> {
  const out: Partial<StreamSummary> = {};
  if (format === 'anthropic-messages') messageFields(out, json);
  else if (format === 'openai-responses') responseFields(out, json);
  else {
    if (typeof json.id === 'string') out.id = json.id;
    if (typeof json.model === 'string') out.model = json.model;
    const usage = obj(json.usage);
    if (usage) {
      out.usage = usage;
      const n = normalizeOpenAIUsage(usage);
      if (n) out.normalizedUsage = n;
    }
    const choice = Array.isArray(json.choices) ? obj(json.choices[0]) : undefined;
    if (format === 'openai-chat' && typeof choice?.finish_reason === 'string')
      out.stopReason = choice.finish_reason;
  }
  if (obj(json.error)) out.error = errorOf(json);
  return out;
}

class AnthropicAccumulator implements Accumulator {
  private message: Json | undefined;
  private usage: Json = {};
  private blocks: Json[] = [];
  private partialJson = new Map<number, string>();
  private error: { type: string; message: string } | undefined;
  private complete = false;

  add({ data }: StreamEvent): void {
    if (!data) return;
    switch (data.type) {
      case 'message_start': {
        this.message = { ...(obj(data.message) ?? {}) };
        this.usage = { ...(obj(this.message.usage) ?? {}) };
        break;
      }
      case 'content_block_start': {
        const i = Number(data.index);
        this.blocks[i] = { ...(obj(data.content_block) ?? {}) };
        break;
      }
      case 'content_block_delta': {
        const i = Number(data.index);
        const block = this.blocks[i] ?? {};
        this.blocks[i] = block;
        const delta = obj(data.delta) ?? {};
        if (delta.type === 'text_delta') block.text = `${block.text ?? ''}${delta.text ?? ''}`;
        else if (delta.type === 'thinking_delta')
          block.thinking = `${block.thinking ?? ''}${delta.thinking ?? ''}`;
        else if (delta.type === 'signature_delta')
          block.signature = `${block.signature ?? ''}${delta.signature ?? ''}`;
        else if (delta.type === 'input_json_delta')
          this.partialJson.set(i, `${this.partialJson.get(i) ?? ''}${delta.partial_json ?? ''}`);
        else if (delta.type === 'citations_delta') {
          const list = Array.isArray(block.citations) ? block.citations : [];
          block.citations = [...list, delta.citation];
        }
        break;
      }
      case 'content_block_stop': {
        const i = Number(data.index);
        const json = this.partialJson.get(i);
        const block = this.blocks[i];
        if (json !== undefined && block) {
          try {
            block.input = json === '' ? {} : JSON.parse(json);
          } catch {
            block.input = json;
          }
        }
        break;
      }
      case 'message_delta': {
        const delta = obj(data.delta) ?? {};
        if (this.message) Object.assign(this.message, delta);
        // message_delta usage is cumulative: its fields replace message_start's.
        Object.assign(this.usage, obj(data.usage) ?? {});
        break;
      }
      case 'message_stop':
        this.complete = true;
        break;
      case 'error':
        this.error = errorOf(data);
        break;
    }
  }

  summary(format: WireFormat, events: number): StreamSummary {
    const s: StreamSummary = { format, events, complete: this.complete };
    if (this.error) s.error = this.error;
    if (!this.message) return s;
    const message: Json = { ...this.message, content: this.blocks.filter(Boolean), usage: this.usage };
    s.message = message;
    messageFields(s, message);
    return s;
  }
}

class ChatAccumulator implements Accumulator {
  private id: string | undefined;
  private model: string | undefined;
  private content = '';
  private role = 'assistant';
  private toolCalls: Json[] = [];
  private finish: string | undefined;
  private usage: Json | undefined;
  private diagnostics: unknown;
  private error: { type: string; message: string } | undefined;
  private complete = false;
  private sawChunk = false;

  add({ data }: StreamEvent): void {
    if (data === null) {
      this.complete = true;
      return;
    }
    if (data.error) {
      this.error = errorOf(data);
      return;
    }
    this.sawChunk = true;
    if (typeof data.id === 'string') this.id = data.id;
    if (typeof data.model === 'string') this.model = data.model;
    if (obj(data.usage)) this.usage = obj(data.usage);
    if ('prompt_cache_diagnostics' in data) this.diagnostics = data.prompt_cache_diagnostics;
    const choices = Array.isArray(data.choices) ? data.choices : [];
    for (const c of choices) {
      const choice = obj(c);
      if (!choice || (choice.index ?? 0) !== 0) continue;
      const delta = obj(choice.delta) ?? {};
      if (typeof delta.role === 'string') this.role = delta.role;
      if (typeof delta.content === 'string') this.content += delta.content;
      for (const t of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
        const call = obj(t) ?? {};
        const i = Number(call.index ?? 0);
        const cur = this.toolCalls[i] ?? {
          id: call.id,
          type: 'function',
          function: { name: '', arguments: '' },
        };
        this.toolCalls[i] = cur;
        if (call.id) cur.id = call.id;
        const fn = obj(call.function) ?? {};
        const target = obj(cur.function) as Json;
        if (typeof fn.name === 'string') target.name = `${target.name ?? ''}${fn.name}`;
        if (typeof fn.arguments === 'string') target.arguments = `${target.arguments ?? ''}${fn.arguments}`;
      }
      if (typeof choice.finish_reason === 'string') this.finish = choice.finish_reason;
    }
  }

  summary(format: WireFormat, events: number): StreamSummary {
    const s: StreamSummary = { format, events, complete: this.complete };
    if (this.error) s.error = this.error;
    if (this.id) s.id = this.id;
    if (this.model) s.model = this.model;
    if (this.finish) s.stopReason = this.finish;
    if (this.diagnostics !== undefined) s.diagnostics = this.diagnostics;
    if (this.usage) {
      s.usage = this.usage;
      const n = normalizeOpenAIUsage(this.usage);
      if (n) s.normalizedUsage = n;
    }
    if (this.sawChunk) {
      const message: Json = { role: this.role, content: this.content || null };
      if (this.toolCalls.length) message.tool_calls = this.toolCalls.filter(Boolean);
      s.message = message;
    }
    return s;
  }
}

class ResponsesAccumulator implements Accumulator {
  private response: Json | undefined;
  private error: { type: string; message: string } | undefined;
  private complete = false;

  add({ data }: StreamEvent): void {
    if (!data) return;
    const type = String(data.type ?? '');
    if (obj(data.response)) this.response = obj(data.response);
    if (type === 'response.completed' || type === 'response.incomplete') this.complete = true;
    if (type === 'error') this.error = errorOf(data);
    if (type === 'response.failed') {
      const e = obj(this.response?.error);
      this.error = { type: String(e?.code ?? 'response_failed'), message: String(e?.message ?? '') };
    }
  }

  summary(format: WireFormat, events: number): StreamSummary {
    const s: StreamSummary = { format, events, complete: this.complete };
    if (this.error) s.error = this.error;
    const r = this.response;
    if (!r) return s;
    s.message = r;
    responseFields(s, r);
    return s;
  }
}
