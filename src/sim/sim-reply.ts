// What a simulator route answers: a Web Response (streams, errors), or a JSON text reply the node bridge
// writes as is, with no Web Response built per request. Never a second copy of a body.

/** A complete text body with its status and headers. */
export class TextReply {
  constructor(
    readonly status: number,
    readonly headers: Readonly<Record<string, string>>,
    readonly text: string,
  ) {}
}

export type SimReply = Response | TextReply;

/** A JSON reply made from JSON text. */
export function jsonReply(
  text: string,
  status: number,
  headers: Readonly<Record<string, string>>,
): TextReply {
  return new TextReply(status, { 'content-type': 'application/json', ...headers }, text);
}

/** The reply as a Web Response (for `sim.fetch` / `sim.handle`). */
export function toWebResponse(reply: SimReply): Response {
  if (reply instanceof Response) return reply;
  return new Response(reply.text, { status: reply.status, headers: reply.headers });
}
