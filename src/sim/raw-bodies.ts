// The bytes behind a simulator Request or Response, kept beside it so the node bridge need not pass them
// through Web streams twice. Never a second copy of a body: the same Buffer or string, or nothing.

const requestBytes = new WeakMap<Request, Buffer>();
const responseText = new WeakMap<Response, string>();

/** A Request whose body is `bytes`, read by `requestBody` without a Web stream. */
export function requestWithBytes(url: URL, init: Omit<RequestInit, 'body'>, bytes: Buffer): Request {
  const request = new Request(url, init);
  requestBytes.set(request, bytes);
  return request;
}

/** The request's body: the bytes the bridge kept, or the Web body read whole. */
export async function requestBody(request: Request): Promise<Buffer> {
  return requestBytes.get(request) ?? Buffer.from(await request.arrayBuffer());
}

/** A JSON Response whose text the bridge sends as is. */
export function jsonResponse(text: string, init: ResponseInit): Response {
  const response = new Response(text, init);
  responseText.set(response, text);
  return response;
}

/** The text a JSON Response was made from, when it was made by `jsonResponse`. */
export function responseTextOf(response: Response): string | undefined {
  return responseText.get(response);
}
