// Opens the file that keeps fix state and conversations across restarts, or, when its folder cannot be made,
// none: state then lives in memory only (said once, and on the health endpoint). It never stops the proxy.

import { errorLine } from '../core/errors.js';
import { StateFile } from './state-file.js';

/** What the health endpoint says about fix state. */
export interface FixStateHealth {
  persisted: boolean;
  dir?: string;
  /** Why state is in memory only: its folder could not be made, or (while it lasts) the last save failed. */
  error?: string;
}

export function openStateFile(
  dir: string | undefined,
  log: (line: string) => void,
): { file: StateFile | undefined; health: FixStateHealth } {
  if (!dir) return { file: undefined, health: { persisted: false } };
  try {
    return { file: new StateFile({ dir, log }), health: { persisted: true, dir } };
  } catch (err) {
    const error = errorLine(err);
    log(`fix state is kept in memory only (it will not survive a restart): ${error}`);
    return { file: undefined, health: { persisted: false, dir, error } };
  }
}
