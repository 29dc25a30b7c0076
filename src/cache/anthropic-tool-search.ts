// The tool search tool's documented 400s (tool-search-tool.md, "Error handling"): every tool deferred, a
// `tool_reference` naming no declared tool, a `tool_result` answering a server tool's `srvtoolu_` id. Pure.

import { isObj, type Json } from '../core/json.js';
import { invalidRequest as bad, type RuleViolation } from './rule-violation.js';

const blocksOf = (msg: Json): Json[] =>
  Array.isArray(msg.content) ? (msg.content.filter(isObj) as Json[]) : [];

/** The `tool_name`s of the `tool_reference` blocks a content block carries (custom or server format). */
function referencesIn(block: Json): unknown[] {
  // Custom search: a tool_result whose content holds tool_reference blocks.
  if (block.type === 'tool_result' && Array.isArray(block.content)) {
    return block.content
      .filter((c) => isObj(c) && c.type === 'tool_reference')
      .map((c) => (c as Json).tool_name);
  }
  // Built-in search, passed back unchanged: tool_search_tool_result.content.tool_references.
  if (block.type === 'tool_search_tool_result' && isObj(block.content)) {
    const refs = block.content.tool_references;
    return Array.isArray(refs) ? refs.filter(isObj).map((r) => r.tool_name) : [];
  }
  return [];
}

/**
 * The first tool search rule the request breaks:
 * - "At least one tool must have defer_loading=false. All tools cannot be deferred." (the docs' message);
 * - "Tool reference 'X' not found in available tools" for a reference to a name not in `tools`;
 * - a `tool_result` for a `server_tool_use` id ("Never return a `tool_result` for its `srvtoolu_...` ID":
 *   "the API rejects the request"; the message is a model choice).
 */
export function checkToolSearch(body: Json): RuleViolation | undefined {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isObj) : [];
  if (tools.length && tools.every((t) => t.defer_loading === true)) {
    return bad('At least one tool must have defer_loading=false. All tools cannot be deferred.');
  }
  const declared = new Set(tools.map((t) => t.name));
  const messages = Array.isArray(body.messages) ? body.messages.filter(isObj) : [];
  let serverIds = new Set<unknown>();
  for (let m = 0; m < messages.length; m++) {
    const msg = messages[m] as Json;
    const blocks = blocksOf(msg);
    for (const [k, block] of blocks.entries()) {
      for (const name of referencesIn(block)) {
        if (!declared.has(name)) return bad(`Tool reference '${String(name)}' not found in available tools`);
      }
      if (msg.role === 'user' && block.type === 'tool_result') {
        const id = block.tool_use_id;
        if (serverIds.has(id) || (typeof id === 'string' && id.startsWith('srvtoolu_'))) {
          return bad(
            `messages.${m}.content.${k}: a tool_result cannot answer the server tool call ${String(id)}: server tools run on Anthropic's servers and their results are already in the assistant turn; remove this tool_result`,
          );
        }
      }
    }
    if (msg.role === 'assistant') {
      serverIds = new Set(blocks.filter((b) => b.type === 'server_tool_use').map((b) => b.id));
    } else if (msg.role === 'user') serverIds = new Set();
  }
  return undefined;
}
