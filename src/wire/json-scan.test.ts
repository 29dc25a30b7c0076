// The JSON scanner: byte spans, escapes, repeated keys, depth limits and shared leading bytes.
// Pure.

import { describe, expect, it } from 'vitest';
import { JsonDepthError, JsonSyntaxError } from '../core/errors.js';
import { locateJsonError } from './json-locate.js';
import { byteToPosition, MAX_JSON_DEPTH, parseSpan, scanJson, sharedByteCount } from './json-scan.js';

const enc = (s: string) => new TextEncoder().encode(s);

describe('scanJson', () => {
  it('finds byte spans of expanded members and items, in UTF-8 bytes', () => {
    const text = '{"a": "é", "list": [ {"x":1}, "s\\"q", 3 ], "z": null}';
    const bytes = enc(text);
    const root = scanJson(bytes, { members: { list: { items: {} } } });
    expect(root.type).toBe('object');
    if (root.type !== 'object') return;
    expect([...root.members.keys()]).toEqual(['a', 'list', 'z']);
    const list = root.members.get('list');
    expect(list?.type).toBe('array');
    if (list?.type !== 'array') return;
    const spans = list.items.map((n) => new TextDecoder().decode(bytes.subarray(n.start, n.end)));
    expect(spans).toEqual(['{"x":1}', '"s\\"q"', '3']);
    // "é" is two bytes: the offsets are byte offsets.
    expect(root.members.get('a')?.end).toBe(10);
  });

  it('handles escaped backslashes before a closing quote and escaped keys', () => {
    const bytes = enc('{"k\\u0041":"a\\\\","b":[1]}');
    const root = scanJson(bytes, { members: {} });
    if (root.type !== 'object') throw new Error('not an object');
    expect([...root.members.keys()]).toEqual(['kA', 'b']);
  });

  it('keeps the last of a repeated key, as JSON.parse does', () => {
    const bytes = enc('{"a":1,"a":2}');
    const root = scanJson(bytes, { members: {} });
    if (root.type !== 'object') throw new Error('not an object');
    expect(parseSpan(bytes, root.members.get('a')?.start ?? 0, root.members.get('a')?.end ?? 0)).toBe(2);
  });

  it('skips deeply nested leaves without recursion', () => {
    const deep = `${'['.repeat(20000)}${']'.repeat(20000)}`;
    const bytes = enc(`{"a":${deep}}`);
    const root = scanJson(bytes, { members: {} }, Number.POSITIVE_INFINITY);
    expect(root.end).toBe(bytes.length);
  });

  it('refuses nesting deeper than MAX_JSON_DEPTH, naming the byte where it went too deep', () => {
    const at = (n: number) => `{"a":${'['.repeat(n)}${']'.repeat(n)}}`;
    // The root object is one level: MAX_JSON_DEPTH - 1 arrays inside it is exactly the limit.
    expect(scanJson(enc(at(MAX_JSON_DEPTH - 1)), { members: {} }).type).toBe('object');
    let thrown: unknown;
    try {
      scanJson(enc(at(MAX_JSON_DEPTH)), { members: {} });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(JsonDepthError);
    expect((thrown as JsonDepthError).code).toBe('CW_JSON_DEPTH');
    expect((thrown as JsonDepthError).position.offset).toBe(5 + MAX_JSON_DEPTH - 1);
    // Expanded members count too.
    expect(() => scanJson(enc(`{"a":${at(MAX_JSON_DEPTH)}}`), { members: { a: { members: {} } } })).toThrow(
      JsonDepthError,
    );
  });

  it.each([
    ['{"a":}', 1, 6, 'expected a value'],
    ['{"a":1,\n"b" 2}', 2, 5, "expected ':'"],
    ['{"a":"x', 1, 6, 'unterminated string'],
    ['{"a":[1,2}', 1, 10, "expected ',' or ']'"],
    ['{"a":1} x', 1, 9, 'unexpected data'],
    ['{"a":"\u0001"}', 1, 7, 'control character'],
    ['{"a":tru}', 1, 6, 'expected a value'],
    ['', 1, 1, 'unexpected end'],
  ])('reports %j at line %i column %i', (text, line, column, detail) => {
    let err: unknown;
    try {
      scanJson(enc(text), { members: {} });
      const r = scanJson(enc(text), { members: {} });
      parseSpan(enc(text), r.start, r.end);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(JsonSyntaxError);
    const e = err as JsonSyntaxError;
    expect(e.code).toBe('CW_JSON_SYNTAX');
    expect(e.position.line).toBe(line);
    expect(e.position.column).toBe(column);
    expect(e.message).toContain(detail);
  });
});

describe('locateJsonError', () => {
  it('returns undefined for valid JSON of every kind', () => {
    for (const t of [
      '{}',
      '[]',
      '"s"',
      '-1.5e+3',
      'true',
      'null',
      '{"a":[{"b":"\\u00e9\\n"}]}',
      ' [1 , 2 ] ',
    ]) {
      expect(locateJsonError(t)).toBeUndefined();
      expect(() => JSON.parse(t)).not.toThrow();
    }
  });

  it('agrees with JSON.parse about what is invalid', () => {
    for (const t of ['{', '[1,]', '{"a" 1}', '01', '"\\x"', '{"a":1,}', 'nul', '[1 2]', '{1:2}']) {
      expect(() => JSON.parse(t)).toThrow();
      expect(locateJsonError(t)).toBeDefined();
    }
  });
});

describe('byteToPosition', () => {
  it('counts lines and columns in characters', () => {
    const bytes = enc('ab\nçd\nef');
    expect(byteToPosition(bytes, 0)).toEqual({ offset: 0, line: 1, column: 1 });
    expect(byteToPosition(bytes, 6)).toEqual({ offset: 6, line: 2, column: 3 });
    expect(byteToPosition(bytes, 7)).toEqual({ offset: 7, line: 3, column: 1 });
  });
});

describe('sharedByteCount', () => {
  it('finds the first differing byte wherever it is, and the shorter length when one is a prefix', () => {
    const a = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7) & 255));
    for (const at of [0, 1, 63, 64, 65, 127, 2500, 4095, 4999]) {
      const b = Buffer.from(a);
      b[at] = (b[at] as number) ^ 1;
      expect(sharedByteCount(a, b)).toBe(at);
      expect(sharedByteCount(b, a)).toBe(at);
    }
    expect(sharedByteCount(a, a.subarray(0, 3000))).toBe(3000);
    expect(sharedByteCount(a, Buffer.from(a))).toBe(5000);
    expect(sharedByteCount(a.subarray(10), a.subarray(10, 20))).toBe(10);
    expect(sharedByteCount(new Uint8Array(0), a)).toBe(0);
  });
});
