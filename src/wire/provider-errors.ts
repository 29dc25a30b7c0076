// Error responses shaped exactly as each provider sends them, on the wire and mid-stream.
// Never includes request content or credentials in a message.

export type Provider = 'anthropic' | 'openai';

/** Anthropic error types by status (reference/anthropic/errors.md). */
const ANTHROPIC_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

/** OpenAI error types and codes by status (reference/openai/error-codes.md). */
const OPENAI_TYPES: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'unknown_url' },
  413: { type: 'invalid_request_error', code: 'request_too_large' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
  503: { type: 'server_error', code: 'server_is_overloaded' },
};

/** The body of an error response (or of a mid-stream error event). */
export function errorBody(
  provider: Provider,
  status: number,
  message: string,
  requestId: string,
  param: string | null = null,
  code?: string,
) {
  if (provider === 'anthropic') {
    return {
      type: 'error',
      error: { type: ANTHROPIC_TYPES[status] ?? 'api_error', message },
      request_id: requestId,
    };
  }
  const t = OPENAI_TYPES[status] ?? { type: 'server_error', code: null };
  return { error: { message, type: t.type, param, code: code ?? t.code } };
}

/** The "overloaded" status of each provider: Anthropic 529, OpenAI 503. */
export function overloadedStatus(provider: Provider): number {
  return provider === 'anthropic' ? 529 : 503;
}

/** A JSON error Response with the provider's request-id header. */
export function errorResponse(
  provider: Provider,
  status: number,
  message: string,
  requestId: string,
  headers: Record<string, string> = {},
  param: string | null = null,
  code?: string,
): Response {
  return new Response(JSON.stringify(errorBody(provider, status, message, requestId, param, code)), {
    status,
    headers: { 'content-type': 'application/json', ...requestIdHeader(provider, requestId), ...headers },
  });
}

export function requestIdHeader(provider: Provider, requestId: string): Record<string, string> {
  return provider === 'anthropic' ? { 'request-id': requestId } : { 'x-request-id': requestId };
}
