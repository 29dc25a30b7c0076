// A client on a bare TCP socket, as Python's `requests` and `http.client` behave: it writes the whole request
// (headers and body) before it reads a byte of the response. Test-only; parses just enough HTTP/1.1.

import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A keep-alive connection on which requests are written whole, then their responses read. */
export class RawConnection {
  private buf = Buffer.alloc(0);
  private ended = false;
  private waiters: Array<() => void> = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('error', () => {
      this.ended = true;
      this.wake();
    });
    socket.pause();
  }

  static open(url: string): Promise<RawConnection> {
    const u = new URL(url);
    return new Promise((resolve, reject) => {
      const s = connect(Number(u.port), u.hostname, () => resolve(new RawConnection(s)));
      s.once('error', reject);
    });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Whether the server has closed its side. */
  get closed(): boolean {
    return this.ended;
  }

  /** Resolves once the server has closed its side (the event, not a guess at how long it takes). */
  whenClosed(): Promise<void> {
    this.socket.resume();
    return new Promise((resolve) => {
      const check = () => (this.ended ? resolve() : this.waiters.push(check));
      check();
    });
  }

  /** Writes the request fully (resolves once every byte is in the kernel), reading nothing meanwhile. */
  async writeWhole(head: string, body: Buffer = Buffer.alloc(0)): Promise<void> {
    this.socket.pause();
    await new Promise<void>((resolve, reject) => {
      this.socket.write(Buffer.concat([Buffer.from(head), body]), (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Reads one response (Content-Length or chunked), or rejects after `timeoutMs`. */
  async readResponse(timeoutMs = 5_000): Promise<RawResponse> {
    this.socket.resume();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const parsed = this.tryParse();
      if (parsed) return parsed;
      if (this.ended) throw new Error(`connection closed before a whole response (${this.buf.length} bytes)`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no whole response within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  private tryParse(): RawResponse | undefined {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const [statusLine = '', ...lines] = this.buf.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const rest = this.buf.subarray(end + 4);
    if (status >= 100 && status < 200) {
      this.buf = rest;
      return { status, headers, body: Buffer.alloc(0) };
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length < n) return undefined;
      this.buf = rest.subarray(n);
      return { status, headers, body: rest.subarray(0, n) };
    }
    if ((headers['transfer-encoding'] ?? '').includes('chunked')) {
      const chunks: Buffer[] = [];
      let at = 0;
      for (;;) {
        const lineEnd = rest.indexOf('\r\n', at);
        if (lineEnd < 0) return undefined;
        const size = Number.parseInt(rest.subarray(at, lineEnd).toString(), 16);
        if (rest.length < lineEnd + 2 + size + 2) return undefined;
        if (size === 0) {
          this.buf = rest.subarray(lineEnd + 4);
          return { status, headers, body: Buffer.concat(chunks) };
        }
        chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
    }
    if (!this.ended) return undefined;
    this.buf = Buffer.alloc(0);
    return { status, headers, body: rest };
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The head of a POST with a body of `length` bytes. */
export function postHead(
  path: string,
  host: string,
  length: number,
  extra: Record<string, string> = {},
): string {
  const headers = {
    host,
    'content-type': 'application/json',
    'content-length': String(length),
    'x-api-key': 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop',
    'anthropic-version': '2023-06-01',
    ...extra,
  };
  return `POST ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}
