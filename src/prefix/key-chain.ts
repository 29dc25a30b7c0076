// The cumulative cache key: a 128-bit chain over block identities (MurmurHash3 x86_128 mixing), seeded from
// a sha256 at each level fold. Not cryptographic: keys compare observed prompts, they never guard secrets.

const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93;

const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));

function fmix(h: number): number {
  let x = h;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return x ^ (x >>> 16);
}

/** Reads 32 bits from 8 hex characters at `at`. */
function hexWord(hex: string, at: number): number {
  let w = 0;
  for (let i = at; i < at + 8; i++) {
    const c = hex.charCodeAt(i);
    w = (w << 4) | (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);
  }
  return w;
}

const HEX_CODES = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
/** Scratch for one key's 32 character codes (keys are made one at a time, synchronously). */
const codes: number[] = new Array(32).fill(0x30);

function putWordHex(w: number, at: number): void {
  let x = w;
  for (let i = at + 7; i >= at; i--) {
    codes[i] = HEX_CODES[x & 0xf] as number;
    x >>>= 4;
  }
}

/**
 * A running key. `reset(seedHex)` starts from a sha256 (hex); `absorb(hex)` folds in the first 128 bits of
 * a hex digest (a block identity); `key()` is the current key as 32 hex characters.
 */
export class KeyChain {
  private h1 = 0;
  private h2 = 0;
  private h3 = 0;
  private h4 = 0;
  private blocks = 0;

  reset(seedHex: string): void {
    this.h1 = hexWord(seedHex, 0);
    this.h2 = hexWord(seedHex, 8);
    this.h3 = hexWord(seedHex, 16);
    this.h4 = hexWord(seedHex, 24);
    this.blocks = 0;
  }

  absorb(hex: string): void {
    let k1 = hexWord(hex, 0);
    let k2 = hexWord(hex, 8);
    let k3 = hexWord(hex, 16);
    let k4 = hexWord(hex, 24);
    let { h1, h2, h3, h4 } = this;
    k1 = Math.imul(rotl(Math.imul(k1, C1), 15), C2);
    h1 ^= k1;
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    k2 = Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h2 ^= k2;
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    k3 = Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    h3 ^= k3;
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    k4 = Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    h4 ^= k4;
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
    this.h1 = h1;
    this.h2 = h2;
    this.h3 = h3;
    this.h4 = h4;
    this.blocks++;
  }

  /** The running state, to resume the chain later from this point (see {@link load}). */
  save(): readonly number[] {
    return [this.h1, this.h2, this.h3, this.h4, this.blocks];
  }

  load(state: readonly number[]): void {
    [this.h1, this.h2, this.h3, this.h4, this.blocks] = state as [number, number, number, number, number];
  }

  key(): string {
    const len = this.blocks * 16;
    let h1 = this.h1 ^ len;
    let h2 = this.h2 ^ len;
    let h3 = this.h3 ^ len;
    let h4 = this.h4 ^ len;
    h1 = (h1 + h2 + h3 + h4) | 0;
    h2 = (h2 + h1) | 0;
    h3 = (h3 + h1) | 0;
    h4 = (h4 + h1) | 0;
    h1 = fmix(h1);
    h2 = fmix(h2);
    h3 = fmix(h3);
    h4 = fmix(h4);
    h1 = (h1 + h2 + h3 + h4) | 0;
    h2 = (h2 + h1) | 0;
    h3 = (h3 + h1) | 0;
    h4 = (h4 + h1) | 0;
    // One flat string (four concatenated pieces made a tree of seven strings, held as long as the key).
    putWordHex(h1, 0);
    putWordHex(h2, 8);
    putWordHex(h3, 16);
    putWordHex(h4, 24);
    return String.fromCharCode.apply(null, codes);
  }
}
