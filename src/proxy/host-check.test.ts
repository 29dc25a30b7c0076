import { describe, expect, it } from 'vitest';
import { HostCheck, hostName } from './host-check.js';

describe('HostCheck', () => {
  it('reads host names from Host values', () => {
    expect(hostName('LOCALHOST:8377')).toBe('localhost');
    expect(hostName('[::1]:8377')).toBe('::1');
    expect(hostName('example.com.')).toBe('example.com');
    expect(hostName('a:b:c')).toBeUndefined();
    expect(hostName('[::1]x')).toBeUndefined();
    expect(hostName(undefined)).toBeUndefined();
  });

  it('allows loopback names, IP literals and configured names only', () => {
    const check = new HostCheck(['Proxy.LAN:9000']);
    for (const ok of [
      '127.0.0.1:8377',
      'localhost',
      'x.localhost:1',
      '[::1]:8377',
      '10.0.0.5',
      'proxy.lan:8377',
    ])
      expect(check.allows(ok), ok).toBe(true);
    for (const no of ['attacker.example:8377', 'localhost.attacker.example', '', 'proxy.lan.evil', undefined])
      expect(check.allows(no), String(no)).toBe(false);
    expect(check.refusal('evil.example:8377')).toMatch(
      /Host "evil\.example" is not allowed.*--allow-host evil\.example/,
    );
  });
});
