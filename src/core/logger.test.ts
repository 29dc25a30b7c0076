// loggerChannels: the fallback only without a logger, and errors and request rows passed on as given.
// In-process: nothing is written anywhere.

import { describe, expect, it } from 'vitest';
import { lineLogger, loggerChannels } from './logger.js';

describe('loggerChannels', () => {
  it('uses the fallback only when no logger is given', () => {
    const fallback: string[] = [];
    const quiet = loggerChannels(
      {},
      lineLogger('x', (l) => fallback.push(l)),
    );
    quiet.warn('dropped');
    quiet.error('dropped too', new Error('e'));
    expect(fallback).toEqual([]);
    const dflt = loggerChannels(
      undefined,
      lineLogger('cacheward proxy', (l) => fallback.push(l)),
    );
    dflt.warn('capture degraded');
    dflt.info('exporting');
    expect(fallback).toEqual(['cacheward proxy: capture degraded', 'cacheward proxy: exporting']);
  });

  it('passes the thrown value to error, and rows to request', () => {
    const seen: unknown[] = [];
    const err = new Error('boom');
    const l = loggerChannels<{ id: string }>(
      { error: (line, e) => seen.push(line, e), request: (row) => seen.push(row.id) },
      {},
    );
    l.error('unexpected', err);
    l.request({ id: 'cw_1' });
    l.info('not heard');
    expect(seen).toEqual(['unexpected', err, 'cw_1']);
  });
});
