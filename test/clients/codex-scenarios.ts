// The scripted Codex scenarios the client tests share: a file edit through apply_patch (a freeform custom
// tool call), an MCP tool call (a tool search, then a call inside the server's namespace), an edit whose
// session `exec resume` continues, and a turn the provider refuses.

export const PATCH = '*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+hello, patched\n*** End Patch\n';

// Codex's first user message is its <environment_context>: the task is matched in the latest one.
export const script = {
  conversations: [
    {
      match: 'EDIT-TASK',
      match_in: 'latest_user',
      turns: [
        { text: 'Editing.', tool_calls: [{ type: 'custom', name: 'apply_patch', input: PATCH }] },
        { text: 'Patched a.txt.' },
      ],
    },
    {
      match: 'MCP-TASK',
      match_in: 'latest_user',
      turns: [
        { tool_calls: [{ type: 'tool_search', input: { query: 'lookup word', limit: 8 } }] },
        { tool_calls: [{ name: 'lookup', namespace: 'mcp__fixture', input: { word: 'cache' } }] },
        { text: 'Looked it up.' },
      ],
    },
    {
      // A turn the provider refuses with a 400 (Codex does not retry it): the turn ends in an error, and so
      // does every later turn (`exec resume` sends the same history, one assistant turn in it).
      match: 'FAILED-TURN-TASK',
      match_in: 'any',
      turns: [
        { text: 'Editing.', tool_calls: [{ type: 'custom', name: 'apply_patch', input: PATCH }] },
        { error: { status: 400, message: 'bad request forever' } },
      ],
    },
    {
      // Matched in any message: `exec resume` sends the session's history, then the new prompt.
      match: 'RESUMED-EDIT-TASK',
      match_in: 'any',
      turns: [
        { text: 'Editing.', tool_calls: [{ type: 'custom', name: 'apply_patch', input: PATCH }] },
        { text: 'Patched a.txt.' },
        { text: 'Resumed answer.' },
      ],
    },
  ],
};
