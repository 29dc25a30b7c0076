// The shape every corpus event shares: a session spec, the session builder (label, style and model chosen
// by seed), the common line of turns with the event on one of them. Pure and seeded; no I/O.

import type { BustCause } from '../../../src/analyze/cause-table.js';
import { type Format, type Json, type Style, Words } from './conversation.js';
import { type LabelMode, type PlannedRequest, type Scheme, Session } from './session.js';

/** What a session needs to be built. */
export interface SessionSpec {
  name: string;
  scheme: Scheme;
  format: Format;
  seed: number;
  /** Which repetition of the event this is (label modes take turns across repetitions and events). */
  rep: number;
  /** The client's shape: an SDK user, or Claude Code (Anthropic) or Codex (Responses). */
  style: Style;
}

export interface EventDef {
  name: string;
  applies: (scheme: Scheme, format: Format) => boolean;
  build: (spec: SessionSpec) => PlannedRequest[];
}

export const MIN = 60_000;
export const anthropic = (s: Scheme) => s === 'anthropic';
export const openai = (s: Scheme) => s !== 'anthropic';
export const automatic = (s: Scheme) => s === 'gpt-5.4' || s === 'gpt-5.5';
export const always = () => true;

export const BASE_MODELS: Record<Scheme, readonly string[]> = {
  anthropic: ['claude-opus-5', 'claude-sonnet-5', 'claude-opus-4-8'],
  'gpt-5.4': ['gpt-5.4'],
  'gpt-5.5': ['gpt-5.5'],
  'gpt-5.6-implicit': ['gpt-5.6'],
  'gpt-5.6-explicit': ['gpt-5.6'],
};
export const SWITCHED: Record<string, string> = {
  'claude-opus-5': 'claude-fable-5',
  'claude-sonnet-5': 'claude-opus-5',
  'claude-opus-4-8': 'claude-opus-5',
  'gpt-5.4': 'gpt-5.4-mini',
  'gpt-5.5': 'gpt-5.5-mini',
  'gpt-5.6': 'gpt-5.6-mini',
};
export const SMALL_MODEL: Record<Scheme, string> = {
  anthropic: 'claude-haiku-4-5',
  'gpt-5.4': 'gpt-5.4-mini',
  'gpt-5.5': 'gpt-5.5-mini',
  'gpt-5.6-implicit': 'gpt-5.6-mini',
  'gpt-5.6-explicit': 'gpt-5.6-mini',
};

function labels(scheme: Scheme): LabelMode[] {
  return scheme === 'anthropic'
    ? ['header', 'claude-code', 'metadata', 'none']
    : ['header', 'prompt_cache_key', 'none'];
}

export interface Extra {
  /** A label mode of its own (the session is then a plain SDK client's). */
  label?: LabelMode;
  style?: Style;
  model?: string;
  systemSentences?: number;
  tools?: readonly string[];
  name?: string;
}

export function session(spec: SessionSpec, event: string, extra: Extra = {}): Session {
  const style = extra.style ?? (extra.label !== undefined ? 'plain' : spec.style);
  const pick = new Words(spec.seed * 31 + 7);
  const modes = labels(spec.scheme);
  const label =
    extra.label ??
    (modes[(spec.rep + spread(`${event}/${spec.scheme}/${spec.format}`)) % modes.length] as LabelMode);
  const model =
    extra.model ?? (style === 'claude-code' ? 'claude-opus-4-8' : pick.pick(BASE_MODELS[spec.scheme]));
  return new Session({
    ...spec,
    name: extra.name ?? spec.name,
    event,
    label,
    model,
    style,
    ...(extra.systemSentences !== undefined ? { systemSentences: extra.systemSentences } : {}),
    ...(extra.tools ? { tools: extra.tools } : {}),
  });
}

/** A small stable number for a name, so label modes spread over events. */
function spread(name: string): number {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return h;
}

type Injection = {
  expect: BustCause | null;
  idleMs?: number;
  /** The injection took its own steps (else the turn takes the usual one after it). */
  stepped?: boolean;
};

/**
 * The common shape: a first turn, a few ordinary turns, the event on one of them, two or three ordinary
 * turns after it (which must read what the event wrote).
 */
export function linear(s: Session, inject: ((s: Session) => Injection) | undefined): PlannedRequest[] {
  const at = 2 + s.w.int(4);
  const n = at + 2 + s.w.int(2);
  s.send({ expect: 'cold_start' });
  for (let t = 2; t <= n; t++) {
    if (t === at && inject) {
      const r = inject(s);
      if (!r.stepped) s.step();
      s.send({ expect: r.expect, injected: true }, r.idleMs !== undefined ? { idleMs: r.idleMs } : {});
    } else {
      s.step();
      s.send({ expect: null });
    }
  }
  return s.requests;
}

/** An event that edits the conversation at the event turn (after its step, unless it steps itself). */
export function edit(
  name: string,
  applies: EventDef['applies'],
  expect: (spec: SessionSpec) => BustCause | null,
  mutate: (s: Session) => void,
  extra: Extra & { stepped?: boolean } = {},
): EventDef {
  return {
    name,
    applies,
    build: (spec) =>
      linear(session(spec, name, extra), (s) => {
        if (!extra.stepped) s.step();
        mutate(s);
        return { expect: expect(spec), stepped: true };
      }),
  };
}

export function setField(s: Session, key: string, value: unknown): void {
  s.conv.fields[key] = value;
}

export function mergeField(s: Session, key: string, value: Json): void {
  const prev = s.conv.fields[key];
  s.conv.fields[key] = { ...(prev && typeof prev === 'object' ? prev : {}), ...value };
}
