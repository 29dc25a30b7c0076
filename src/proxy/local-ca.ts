// The forward proxy's local certificate authority: created on first use in the state folder (key 0600 in a
// 0700 folder), and a certificate per opened host signed by it. The key is never logged, captured or sent.

import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import forge from 'node-forge';
import { defaultCaptureDir } from '../capture/default-dir.js';
import { CachewardError } from '../core/errors.js';

/** The CA's certificate, what clients are told to trust (NODE_EXTRA_CA_CERTS, the system store). */
export const CA_CERT_FILE = 'cacheward-ca.pem';
/** Its private key: 0600, never read by anything but this module. */
export const CA_KEY_FILE = 'cacheward-ca-key.pem';

const DAY = 24 * 60 * 60_000;
/** The CA is good for ten years; a host certificate for 30 days (a new one each start). */
const CA_DAYS = 3650;
const LEAF_DAYS = 30;

/** A CA folder or key that cannot be used (unreadable, readable by others, not a CA). */
export class LocalCaError extends CachewardError {
  constructor(message: string) {
    super('CW_LOCAL_CA', message);
  }
}

/** Where the CA lives by default: `ca/` in the state folder (`$XDG_STATE_HOME/cacheward/ca`). */
export function defaultCaDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(defaultCaptureDir(env), 'ca');
}

export interface LocalCaOptions {
  /** The folder of the CA's certificate and key (default {@link defaultCaDir}). */
  dir?: string;
  /** The clock certificates are dated by (ms). */
  now?: () => number;
}

/** A loaded (or just created) local CA, and the host certificates it has made this run. */
export class LocalCa {
  /** The path of the CA certificate (PEM): what a client must trust. */
  readonly certPath: string;
  /** Whether this call created it (the first use). */
  readonly created: boolean;
  private readonly caCert: forge.pki.Certificate;
  private readonly caKey: forge.pki.rsa.PrivateKey;
  private readonly now: () => number;
  private leafKey:
    | { forge: forge.pki.rsa.PrivateKey; pem: string; publicKey: forge.pki.rsa.PublicKey }
    | undefined;
  private readonly contexts = new Map<string, SecureContext>();

  private constructor(dir: string, created: boolean, now: () => number) {
    this.certPath = join(dir, CA_CERT_FILE);
    this.created = created;
    this.now = now;
    const keyPath = join(dir, CA_KEY_FILE);
    let certPem: string;
    let keyPem: string;
    try {
      certPem = readFileSync(this.certPath, 'utf8');
      keyPem = readFileSync(keyPath, 'utf8');
    } catch (err) {
      throw new LocalCaError(`cannot read the local CA in ${dir}: ${(err as Error).message}`);
    }
    try {
      this.caCert = forge.pki.certificateFromPem(certPem);
      this.caKey = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
    } catch {
      throw new LocalCaError(
        `the local CA in ${dir} is not a PEM certificate and RSA key; move the folder away and a new CA is made on the next start (clients must then trust the new one)`,
      );
    }
  }

  /**
   * Opens the CA in `dir`, creating it when the folder holds none (the first use). Refuses a key that
   * others can read. Two processes creating it at once end up with the same one (the first to finish wins).
   */
  static open(options: LocalCaOptions = {}): LocalCa {
    const dir = options.dir ?? defaultCaDir();
    const now = options.now ?? Date.now;
    const keyPath = join(dir, CA_KEY_FILE);
    let created = false;
    if (!existsSync(keyPath)) created = create(dir, now());
    if (!existsSync(keyPath))
      throw new LocalCaError(
        `${dir} exists but holds no ${CA_KEY_FILE}: move it away (a new CA is made there), or pass another CA folder`,
      );
    const mode = statSync(keyPath).mode & 0o777;
    if (mode & 0o077)
      throw new LocalCaError(
        `${keyPath} can be read by other users (mode ${mode.toString(8)}): run chmod 600 ${keyPath}, or move ${dir} away to make a new CA`,
      );
    return new LocalCa(dir, created, now);
  }

  /** The CA certificate (PEM). */
  get certPem(): string {
    return forge.pki.certificateToPem(this.caCert);
  }

  /** The TLS context that serves `host` (a DNS name or IP literal): a certificate for it, made once a run. */
  contextFor(host: string): SecureContext {
    const name = host.toLowerCase();
    let ctx = this.contexts.get(name);
    if (!ctx) {
      const { key, cert } = this.issue(name);
      ctx = createSecureContext({ key, cert });
      this.contexts.set(name, ctx);
    }
    return ctx;
  }

  /** A certificate for `host`, signed by the CA, with the run's host key (PEM). */
  issue(host: string): { key: string; cert: string } {
    this.leafKey ??= rsaKey();
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafKey.publicKey;
    cert.serialNumber = serial();
    const t = this.now();
    cert.validity.notBefore = new Date(t - DAY);
    cert.validity.notAfter = new Date(t + LEAF_DAYS * DAY);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.caCert.subject.attributes);
    const ip = /^[\d.]+$/.test(host) || host.includes(':');
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [ip ? { type: 7, ip: host } : { type: 2, value: host }] },
      { name: 'subjectKeyIdentifier' },
      {
        name: 'authorityKeyIdentifier',
        keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes(),
      },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    return { key: this.leafKey.pem, cert: forge.pki.certificateToPem(cert) };
  }
}

/** Writes a new CA into `dir` (made 0700): true when this process's CA is the one that stays. */
function create(dir: string, now: number): boolean {
  mkdirSync(dirname(dir), { recursive: true, mode: 0o700 });
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  mkdirSync(tmp, { mode: 0o700 });
  try {
    const key = rsaKey();
    const cert = forge.pki.createCertificate();
    cert.publicKey = key.publicKey;
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(now - DAY);
    cert.validity.notAfter = new Date(now + CA_DAYS * DAY);
    const who = `${safe(userInfo().username)}@${safe(hostname())}`;
    const subject = [
      { name: 'commonName', value: `cacheward local CA (${who})` },
      { name: 'organizationName', value: 'cacheward' },
    ];
    cert.setSubject(subject);
    cert.setIssuer(subject);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(key.forge, forge.md.sha256.create());
    writeFileSync(join(tmp, CA_KEY_FILE), key.pem, { mode: 0o600, flag: 'wx' });
    writeFileSync(join(tmp, CA_CERT_FILE), forge.pki.certificateToPem(cert), { mode: 0o644, flag: 'wx' });
    // Node's own parser agrees it is a CA before anyone is told to trust it.
    if (!new X509Certificate(readFileSync(join(tmp, CA_CERT_FILE))).ca)
      throw new LocalCaError('the CA certificate made is not a CA (a bug)');
    try {
      renameSync(tmp, dir);
      chmodSync(dir, 0o700);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Another process made it first (the folder exists and is not empty): theirs stands.
      if (code === 'ENOTEMPTY' || code === 'EEXIST') return false;
      throw new LocalCaError(`cannot create the local CA in ${dir}: ${(err as Error).message}`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** An RSA-2048 key made by Node's own crypto (fast), in forge's form and as PEM. */
function rsaKey(): { forge: forge.pki.rsa.PrivateKey; pem: string; publicKey: forge.pki.rsa.PublicKey } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
  const key = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  return { forge: key, pem, publicKey: forge.pki.setRsaPublicKey(key.n, key.e) };
}

/** A random positive serial number (16 bytes, hex). */
function serial(): string {
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return b.toString('hex');
}

function safe(s: string): string {
  return s.replace(/[^\w.-]/g, '').slice(0, 40) || 'user';
}
