// A request rule the provider enforces with a 400 (or 413): the error type and message it answers with.
// Shared by every rule checker so none of them imports another's module for the type. Pure.

/** A rule the request broke: the provider's error type and message. */
export interface RuleViolation {
  status: 400 | 413;
  type: 'invalid_request_error' | 'request_too_large';
  message: string;
}

/** An `invalid_request_error` 400 with this message. */
export function invalidRequest(message: string): RuleViolation {
  return { status: 400, type: 'invalid_request_error', message };
}
