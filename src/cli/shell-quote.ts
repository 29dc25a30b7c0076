// Quotes a word for a POSIX shell, so a command the CLI prints can be pasted as it is.
// It never quotes what needs no quoting: plain paths stay readable.

export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
