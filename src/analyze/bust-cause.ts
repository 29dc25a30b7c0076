// The closed vocabulary of bust causes: every miss is named by exactly one of these words (DESIGN.md).
// A type only; it never decides a cause (cause-table.ts does).

/** The closed vocabulary of bust causes (DESIGN.md). */
export type BustCause =
  | 'cold_start'
  | 'tools_changed'
  | 'system_changed'
  | 'messages_edited'
  | 'params_changed'
  | 'model_changed'
  | 'fork_diverged'
  | 'ttl_expired'
  | 'below_minimum'
  | 'lookback_exceeded'
  | 'concurrent'
  | 'thinking_stripped'
  | 'unexplained';
