// A Responses request chained with `previous_response_id` made whole: the previous response's full context
// (its input and output items) followed by the new input, as one body. Pure; never edits its inputs.
//
// The chained context is part of the prompt and caches like a resent conversation, so the prefix of a
// chained request is the prefix of the body that resends everything: same blocks, same keys, same tokens.
// The previous request's own `instructions` are not carried over (the API takes the chained request's).

import type { RequestBody } from '../wire/request-body.js';
import type { Prefix, PrefixBuilder } from './build-prefix.js';

const COMMA = Buffer.from(',');

/** The input items of a Responses body as one JSON fragment: the items joined by commas, no brackets. */
export function inputFragment(body: RequestBody): Buffer {
  const input = body.root.members.get('input');
  if (!input || (input.type === 'leaf' && input.first === 0x6e)) return Buffer.alloc(0);
  if (input.type === 'leaf' && input.first === 0x22) {
    // A string input is one user message (the same block identity as the array form).
    return Buffer.concat([
      Buffer.from('{"role":"user","content":'),
      body.bytes.subarray(input.start, input.end),
      Buffer.from('}'),
    ]);
  }
  if (input.type !== 'array') return Buffer.alloc(0);
  const first = input.items[0];
  const last = input.items[input.items.length - 1];
  return first && last ? body.bytes.subarray(first.start, last.end) : Buffer.alloc(0);
}

/** Output items (as a response carries them) as one JSON fragment. */
export function outputFragment(output: readonly unknown[]): Buffer {
  return Buffer.from(output.map((item) => JSON.stringify(item)).join(','));
}

/**
 * The whole body of a chained request: `context` (fragments of earlier input and output items, oldest
 * first), then the request's own input, as its `input`; `previous_response_id` left out; every other
 * member as sent, in order.
 */
export function chainedBody(body: RequestBody, context: readonly Uint8Array[]): Buffer {
  const items = [...context, inputFragment(body)].filter((f) => f.length > 0);
  const input = Buffer.concat([
    Buffer.from('['),
    ...items.flatMap((f, i) => (i ? [COMMA, f] : [f])),
    Buffer.from(']'),
  ]);
  const parts: Buffer[] = [Buffer.from('{')];
  let sawInput = false;
  for (const [key, node] of body.root.members) {
    if (key === 'previous_response_id') continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(Buffer.from(`${JSON.stringify(key)}:`));
    if (key === 'input') {
      sawInput = true;
      parts.push(input);
    } else parts.push(Buffer.from(body.bytes.subarray(node.start, node.end)));
  }
  if (!sawInput) parts.push(Buffer.from(`${parts.length > 1 ? ',' : ''}"input":`), input);
  parts.push(Buffer.from('}'));
  return Buffer.concat(parts);
}

/**
 * The full prefix of `chained`, given the previous request's *full* prefix (for a request that was itself
 * chained, the result of this function for it) and the output items of its response.
 */
export function chainPrefix(
  builder: PrefixBuilder,
  previous: Prefix,
  output: readonly unknown[],
  chained: Prefix,
): Prefix {
  const context = [inputFragment(previous.body), outputFragment(output)];
  return builder.parse(chainedBody(chained.body, context), { format: 'openai-responses' });
}
