// Where the CLI writes, and how it colours: one small object so commands can be run and tested in-process.
// It never colours when NO_COLOR is set or the stream is not a terminal.

/** The streams a command writes to, and whether colour is on. */
export interface CliIO {
  out(line: string): void;
  err(line: string): void;
  readonly color: boolean;
  readonly stdin: NodeJS.ReadableStream;
}

/** The process's own streams. Colour follows NO_COLOR (https://no-color.org) and whether stdout is a TTY. */
export function processIO(): CliIO {
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  return {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    color: !noColor && process.stdout.isTTY === true,
    stdin: process.stdin,
  };
}

/** ANSI styles that turn into plain text when colour is off. */
export function styles(color: boolean) {
  const wrap = (open: number, close: number) => (s: string) =>
    color ? `\u001b[${open}m${s}\u001b[${close}m` : s;
  return {
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39),
  };
}
