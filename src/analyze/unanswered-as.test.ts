import { describe, expect, it } from 'vitest';
import { unansweredAs } from './analyze-captures.js';

describe('unansweredAs', () => {
  it('names how a request ended without its whole answer, and nothing for an answer', () => {
    const usage = { raw: { input_tokens: 3 } };
    expect(unansweredAs({ outcome: 'client_aborted', status: 200, usage })).toBe('client_aborted');
    expect(unansweredAs({ outcome: 'upstream_reset', status: 200 })).toBe('upstream_reset');
    expect(unansweredAs({ outcome: 'upstream_error' })).toBe('upstream_error');
    expect(unansweredAs({ outcome: 'refused' })).toBe('refused');
    // A transcript's call no response line followed.
    expect(unansweredAs({ outcome: 'complete' })).toBe('no_response');
    // Answers: an error status, a complete response, a relayed frame that was not JSON.
    expect(unansweredAs({ outcome: 'error', status: 400 })).toBeUndefined();
    expect(unansweredAs({ outcome: 'complete', status: 200, usage })).toBeUndefined();
    expect(unansweredAs({ outcome: 'complete', status: 200 })).toBeUndefined();
    expect(unansweredAs({ outcome: 'unparsable' })).toBeUndefined();
  });
});
