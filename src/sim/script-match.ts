// The texts of a request's conversation that a reply script's `match` looks in: the first user message,
// the latest user message, every message. Reads the parsed body only; never changes it.

import { isObj, type Json } from '../core/json.js';
import type { ConversationText } from './reply-script.js';

/** Which API's body this is. */
export type BodyKind = 'anthropic' | 'chat' | 'responses';

/** The text a content value carries: a string, or its parts' `text`, tool results' content included. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const parts: string[] = [];
  for (const part of content) {
    if (typeof part === 'string') parts.push(part);
    else if (isObj(part)) {
      if (typeof part.text === 'string') parts.push(part.text);
      else if (part.type === 'tool_result') parts.push(contentText(part.content));
    }
  }
  return parts.join('\n');
}

interface Message {
  role: string | undefined;
  text: string;
}

function messagesOf(body: Json, kind: BodyKind): Message[] {
  if (kind === 'responses' && typeof body.input === 'string') return [{ role: 'user', text: body.input }];
  const list = kind === 'responses' ? body.input : body.messages;
  if (!Array.isArray(list)) return [];
  const out: Message[] = [];
  for (const item of list) {
    if (!isObj(item)) continue;
    const role = typeof item.role === 'string' ? item.role : undefined;
    if (role !== undefined) out.push({ role, text: contentText(item.content) });
    // Responses items without a role: tool outputs carry text; calls carry only arguments.
    else if (item.output !== undefined) out.push({ role: undefined, text: contentText(item.output) });
  }
  return out;
}

/** The conversation texts of a parsed request body. */
export function conversationText(body: Json, kind: BodyKind): ConversationText {
  const messages = messagesOf(body, kind);
  const users = messages.filter((m) => m.role === 'user');
  return {
    firstUser: users[0]?.text ?? '',
    latestUser: users.at(-1)?.text ?? '',
    all: messages.map((m) => m.text),
  };
}
