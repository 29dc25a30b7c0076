// Finds the first syntax error in a JSON text and says what is wrong there, for precise error messages.
// Only called once a parse has already failed: correctness over speed, and it must never throw.

/** The first bad character (UTF-16 offset into `text`) and what was expected there. */
export interface JsonErrorLocation {
  charOffset: number;
  detail: string;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Returns where `text` stops being valid JSON, or `undefined` when it is valid. Iterative: deep nesting is fine. */
export function locateJsonError(text: string): JsonErrorLocation | undefined {
  let pos = 0;
  const stack: Array<'object' | 'array'> = [];
  const err = (detail: string, at = pos): JsonErrorLocation => ({
    charOffset: at,
    detail:
      at >= text.length ? `unexpected end of input (${detail})` : `${detail}, found ${describe(text, at)}`,
  });
  const ws = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      pos++;
    }
  };
  const string = (): JsonErrorLocation | undefined => {
    const start = pos;
    pos++;
    for (;;) {
      if (pos >= text.length) return { charOffset: start, detail: 'unterminated string (it starts here)' };
      const c = text.charCodeAt(pos);
      if (c === 0x22) {
        pos++;
        return undefined;
      }
      if (c < 0x20) return err('control character in a string (escape it)');
      if (c === 0x5c) {
        const e = text[pos + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(pos + 2, pos + 6))) return err('bad \\u escape', pos);
          pos += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) return err('bad escape', pos);
        pos += 2;
        continue;
      }
      pos++;
    }
  };
  // expect: 'value' | 'afterValue'
  let expectValue = true;
  ws();
  for (;;) {
    if (expectValue) {
      ws();
      const c = text[pos];
      if (c === '{') {
        pos++;
        ws();
        if (text[pos] === '}') {
          pos++;
          expectValue = false;
          continue;
        }
        stack.push('object');
        if (text[pos] !== '"') return err("expected a string key or '}'");
        const e = string();
        if (e) return e;
        ws();
        if (text[pos] !== ':') return err("expected ':' after a key");
        pos++;
        continue;
      }
      if (c === '[') {
        pos++;
        ws();
        if (text[pos] === ']') {
          pos++;
          expectValue = false;
          continue;
        }
        stack.push('array');
        continue;
      }
      if (c === '"') {
        const e = string();
        if (e) return e;
      } else if (text.startsWith('true', pos)) pos += 4;
      else if (text.startsWith('false', pos)) pos += 5;
      else if (text.startsWith('null', pos)) pos += 4;
      else {
        NUMBER.lastIndex = pos;
        const m = NUMBER.exec(text);
        if (!m || m[0].length === 0) return err('expected a value');
        pos += m[0].length;
      }
      expectValue = false;
      continue;
    }
    ws();
    const top = stack[stack.length - 1];
    if (top === undefined) {
      if (pos < text.length) return err('unexpected data after the end of the JSON value');
      return undefined;
    }
    const c = text[pos];
    if (c === ',') {
      pos++;
      ws();
      if (top === 'object') {
        if (text[pos] !== '"') return err('expected a string key');
        const e = string();
        if (e) return e;
        ws();
        if (text[pos] !== ':') return err("expected ':' after a key");
        pos++;
      }
      expectValue = true;
      continue;
    }
    if ((top === 'object' && c === '}') || (top === 'array' && c === ']')) {
      stack.pop();
      pos++;
      continue;
    }
    return err(top === 'object' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

function describe(text: string, at: number): string {
  const ch = text[at] as string;
  if (ch === '\n') return 'a line break';
  const c = ch.charCodeAt(0);
  return c < 0x20 ? `U+${c.toString(16).toUpperCase().padStart(4, '0')}` : `'${ch}'`;
}
