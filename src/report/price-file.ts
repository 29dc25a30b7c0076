// Reads `--prices FILE` from disk and hands the parsed list to the pure checker in analyze/price-table.
// The one place a price file is read; it never prices anything itself.

import { readFile } from 'node:fs/promises';
import { PriceFileError, type PriceRow, parsePriceRows } from '../analyze/price-table.js';

/** Reads a JSON price list; a file that cannot be read or parsed is a PriceFileError naming it. */
export async function loadPriceFile(path: string): Promise<PriceRow[]> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new PriceFileError(`${path}: cannot read a JSON price list: ${(err as Error).message}`);
  }
  return parsePriceRows(value, path);
}
