// The conversation model's public surface: labels, the resolver and its store.
// Nothing here performs I/O.

export {
  type ConversationInfo,
  type ConversationStore,
  MemoryConversationStore,
  type MemoryConversationStoreOptions,
  type PassingEntry,
  type Relation,
  type RequestNode,
} from './conversation-store.js';
export {
  type ConversationRequest,
  commitConversation,
  type Reclassified,
  type Resolution,
  resolveConversation,
} from './resolve-conversation.js';
export { type HeaderLookup, type LabelSource, type SessionLabel, sessionLabel } from './session-label.js';
