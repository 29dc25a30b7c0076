// `cacheward ca`: the forward proxy's local CA, created here if it does not exist yet: where its certificate
// is and how to trust it. It prints the certificate's path and fingerprint, never the key.

import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { InputError } from '../../core/errors.js';
import { LocalCa } from '../../proxy/local-ca.js';
import { refuseFileAsFolder } from '../folder-option.js';
import type { CliIO } from '../io.js';
import { shellQuote } from '../shell-quote.js';

export function registerCa(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('ca')
    .description(
      "the forward proxy's local CA: where its certificate is and how to trust it (made on first use)",
    )
    .option('--ca-dir <dir>', 'the CA folder (default $XDG_STATE_HOME/cacheward/ca)')
    .option('--json', 'print {cert, created, fingerprint, notAfter} as JSON')
    .action((opts: { caDir?: string; json?: boolean }) => {
      if (opts.caDir !== undefined) refuseFileAsFolder('--ca-dir', opts.caDir);
      let ca: LocalCa;
      try {
        ca = LocalCa.open(opts.caDir ? { dir: opts.caDir } : {});
      } catch (err) {
        throw new InputError((err as Error).message);
      }
      const x = new X509Certificate(readFileSync(ca.certPath));
      const facts = {
        cert: ca.certPath,
        created: ca.created,
        fingerprint: x.fingerprint256,
        notAfter: x.validTo,
      };
      if (opts.json) {
        io.out(JSON.stringify(facts));
        setExit(0);
        return;
      }
      const p = shellQuote(ca.certPath);
      io.out(`cacheward local CA: ${ca.certPath}${ca.created ? ' (created now)' : ''}`);
      io.out(`  ${x.subject.replace(/\n/g, ', ')}; SHA-256 ${x.fingerprint256}; valid until ${x.validTo}`);
      io.out('');
      io.out('Trust it where the agent runs (only its key, next to it with mode 0600, can sign for it):');
      io.out(`  Node, Claude Code:  export NODE_EXTRA_CA_CERTS=${p}`);
      io.out(
        `  Debian, Ubuntu:     sudo cp ${p} /usr/local/share/ca-certificates/cacheward-ca.crt && sudo update-ca-certificates`,
      );
      io.out(`  Fedora, RHEL:       sudo cp ${p} /etc/pki/ca-trust/source/anchors/ && sudo update-ca-trust`);
      io.out(
        `  macOS:              sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain ${p}`,
      );
      io.out('');
      io.out(
        'Then: cacheward proxy --forward, and HTTPS_PROXY=<its URL> for the agent; `cacheward run -- claude` does both.',
      );
      setExit(0);
    });
}
