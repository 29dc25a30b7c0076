// ToolGate: a dispatch-time allow list for a fork's tool calls. The advertised tools stay as they are (so the
// cached prefix holds); a call outside the list is refused with a message that names the allowed tools.
// It never edits the advertised tools and never runs a tool itself.

import type { Decision } from '../core/decision.js';

/** Decides whether a tool call writes. Pluggable; the default reads the name and batch forms. */
export type WriteClassifier = (name: string, args: unknown) => boolean;

const WRITE_WORD =
  /(^|[_\W])(write|edit|delete|remove|create|update|patch|move|rename|put|set|insert|append|replace|mkdir|rm|save|commit|push|apply)([_\W]|$)/i;
const MUTATING_OPS =
  /^(write|edit|delete|remove|create|update|patch|move|rename|put|set|insert|append|replace|save|upsert)$/i;

/** The default: a write-like tool name, or a batch whose operations list holds any mutating entry. */
export const defaultIsWrite: WriteClassifier = (name, args) => {
  if (WRITE_WORD.test(name.replace(/([a-z])([A-Z])/g, '$1_$2'))) return true;
  if (args && typeof args === 'object') {
    const ops =
      (args as { operations?: unknown; ops?: unknown; actions?: unknown }).operations ??
      (args as { ops?: unknown }).ops ??
      (args as { actions?: unknown }).actions;
    if (Array.isArray(ops)) {
      return ops.some((op) => {
        if (!op || typeof op !== 'object') return false;
        const o = op as Record<string, unknown>;
        const kind = o.op ?? o.type ?? o.action ?? o.kind;
        return (
          (typeof kind === 'string' && MUTATING_OPS.test(kind)) ||
          (typeof o.tool === 'string' && defaultIsWrite(o.tool, o.args))
        );
      });
    }
  }
  return false;
};

export interface ToolGateOptions {
  /** The tools this task may call. */
  allow: readonly string[];
  /** Whether an allowed tool may write (default false: a review reads, and proposes writes as data). */
  allowWrites?: boolean;
  isWrite?: WriteClassifier;
}

/** The one decision shape: `ok`, or `reason` (a message for the model that names the allowed tools). */
export type GateDecision = Decision;

export class ToolGate {
  private readonly allow: Set<string>;
  private readonly isWrite: WriteClassifier;

  constructor(private readonly options: ToolGateOptions) {
    this.allow = new Set(options.allow);
    this.isWrite = options.isWrite ?? defaultIsWrite;
  }

  /** Whether a call may run; a refusal names the allowed tools and says not to retry. */
  check(name: string, args: unknown): GateDecision {
    const allowed = [...this.allow].join(', ') || '(none)';
    if (!this.allow.has(name)) {
      return {
        ok: false,
        reason: `Tool "${name}" is not available to this background task. Allowed tools: ${allowed}. Do not retry it; answer with what you have.`,
      };
    }
    if (!this.options.allowWrites && this.isWrite(name, args)) {
      return {
        ok: false,
        reason: `Tool "${name}" would write, and this background task may not write. Allowed read-only tools: ${allowed}. Do not retry; return the change as your result instead.`,
      };
    }
    return { ok: true };
  }
}
