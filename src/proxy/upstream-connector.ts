// Connections to the upstream on which a failed body write is not the end: an upstream that answers early (a
// 413, a 401) and closes makes the next write fail, and its answer, already received, must still be read.

import type { Socket } from 'node:net';
import { buildConnector } from 'undici';

/** How long a connection whose writes fail stays open for an answer the upstream may have sent. */
const ANSWER_GRACE_MS = 1_000;

const RESET = new Set(['EPIPE', 'ECONNRESET']);

type WriteCallback = (err?: Error | null) => void;

/**
 * Makes body writes on `socket` that fail because the peer closed succeed silently, so the socket is not
 * destroyed before what the peer sent is read. If the peer sent nothing, the socket is destroyed with the
 * original error once it has ended or after a short grace: the request still fails, only later.
 */
export function tolerateWriteReset(socket: Socket): void {
  let pending: NodeJS.Timeout | undefined;
  const onReset = (err: Error) => {
    if (pending || socket.destroyed) return;
    const give = () => {
      if (!socket.destroyed) socket.destroy(err);
    };
    pending = setTimeout(give, ANSWER_GRACE_MS);
    pending.unref();
    socket.once('end', () => setImmediate(give));
    socket.once('close', () => clearTimeout(pending));
  };
  const wrap =
    (cb: WriteCallback): WriteCallback =>
    (err) => {
      if (err && RESET.has((err as NodeJS.ErrnoException).code ?? '')) {
        onReset(err);
        cb();
      } else cb(err);
    };
  const s = socket as unknown as {
    _write: (chunk: unknown, encoding: BufferEncoding, cb: WriteCallback) => void;
    _writev?: (chunks: unknown[], cb: WriteCallback) => void;
  };
  const write = s._write.bind(socket);
  s._write = (chunk, encoding, cb) => write(chunk, encoding, wrap(cb));
  if (s._writev) {
    const writev = s._writev.bind(socket);
    s._writev = (chunks, cb) => writev(chunks, wrap(cb));
  }
}

/** undici's own connector, with every plain (non-TLS) and TLS socket made tolerant of write resets. */
export function tolerantConnector(): buildConnector.connector {
  const base = buildConnector({});
  return (options, callback) =>
    base(options, (err, socket) => {
      if (socket) tolerateWriteReset(socket as Socket);
      (callback as (e: Error | null, s: unknown) => void)(err, socket);
    });
}
