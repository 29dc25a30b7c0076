// Which capture files one `cacheward run` wrote: those that appeared in the capture folder while it ran,
// named with this process's id (the writer puts the pid in every name). It only lists; it never deletes.

import { captureFiles } from '../capture/capture-reader.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import type { ProxyOptions } from '../proxy/create-proxy.js';

export function runCaptureFiles(options: Pick<ProxyOptions, 'dir'>) {
  const dir = options.dir ?? defaultCaptureDir();
  const list = () => captureFiles(dir).catch(() => [] as string[]);
  let before = new Set<string>();
  return {
    dir,
    async before(): Promise<void> {
      before = new Set(await list());
    },
    /** This run's files, oldest first. */
    async after(): Promise<string[]> {
      const mine = new RegExp(`^capture-.*-${process.pid}-\\d+\\.jsonl$`);
      return (await list()).filter((f) => !before.has(f) && mine.test(f.slice(f.lastIndexOf('/') + 1)));
    },
  };
}
