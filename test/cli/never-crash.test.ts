import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { redactUrl } from '../../src/core/redact-url.js';
import { runBustSession } from '../../src/demo/bust-session.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { builtCli } from '../suite.js';
import { type Captured, fullCapture } from './captures.js';
import { cli } from './run-cli.js';

const bin = builtCli();
const tmp = (name: string) => mkdtempSync(join(tmpdir(), `cacheward-nc-${name}-`));

let hashes: string;
let full: Captured;
let pairs: string;

beforeAll(async () => {
  hashes = (await runBustSession(tmp('hashes'))).dir;
  full = await fullCapture();
  pairs = tmp('pairs');
  await cli(['demo', '--write', pairs]);
}, 60_000);

/** Runs the built CLI with its stdout already closed by the reader, like `cacheward … | head -0`. */
function withClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += String(d);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

/** One line on stderr, exit 2, and no stack trace. */
function oneLine(r: { code: number; stderr: string }, ...contains: string[]) {
  expect(r.code, r.stderr).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  for (const c of contains) expect(r.stderr).toContain(c);
}

describe('piping into head (EPIPE) ends quietly with exit 0', () => {
  const commands = (): Array<[string, string[]]> => [
    ['demo', ['demo']],
    ['report', ['report', hashes]],
    ['report --json', ['report', '--json', hashes]],
    ['whatif', ['whatif', hashes, '--ttl', '1h']],
    ['whatif --fix', ['whatif', full.dir, '--fix', 'tools-freeze']],
    ['replay', ['replay', full.dir, '--fix', 'tools-freeze']],
    [
      'diff',
      ['diff', join(pairs, 'tool-added-mid-session.a.json'), join(pairs, 'tool-added-mid-session.b.json')],
    ],
    ['show', ['show', full.ids[0] as string, '--dir', full.dir]],
    ['prices', ['prices']],
    ['prices --example', ['prices', '--example']],
    ['sim', ['sim', '--port', '0']],
    ['proxy', ['proxy', '--port', '0', '--dir', tmp('proxy')]],
    ['run', ['run', '--sim', '--dir', tmp('run'), '--', process.execPath, '-e', '0']],
    ['--help', ['--help']],
    ['--version', ['--version']],
  ];

  it('on every command', async () => {
    expect(existsSync(bin), 'dist/ is built by `npm test` (tsup) before vitest runs').toBe(true);
    const names = commands().map(([n]) => n);
    expect(names).toEqual(
      expect.arrayContaining([
        'demo',
        'report',
        'whatif',
        'replay',
        'diff',
        'show',
        'sim',
        'proxy',
        'run',
        'prices',
      ]),
    );
    for (const [name, args] of commands()) {
      const r = await withClosedStdout(args);
      expect(r.code, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stderr, name).not.toMatch(/EPIPE|Error|\n\s+at /);
    }
  }, 120_000);
});

describe('report, whatif and replay on something that is not a capture', () => {
  const empty = () => tmp('empty');
  const other = () => {
    const d = tmp('other');
    writeFileSync(join(d, 'notes.txt'), 'hello');
    mkdirSync(join(d, 'state'));
    return d;
  };
  const notCapture = () => {
    const f = join(tmp('file'), 'capture-x.jsonl');
    writeFileSync(f, '{"hello": "world"}\n');
    return f;
  };
  const runs: Array<[string, (p: string) => string[]]> = [
    ['report', (p) => ['report', p]],
    ['whatif --ttl', (p) => ['whatif', p, '--ttl', '1h']],
    ['whatif --fix', (p) => ['whatif', p, '--fix', 'tools-freeze']],
    ['replay', (p) => ['replay', p, '--gate']],
  ];

  it('an empty folder: one line, exit 2', async () => {
    for (const [, args] of runs) oneLine(await cli(args(empty())), 'an empty folder', '--dir');
  });

  it('a folder with no capture files: one line naming what it holds', async () => {
    for (const [name, args] of runs) {
      const r = await cli(args(other()));
      oneLine(
        r,
        'no capture files (capture-*.jsonl) in this folder, only 2 other entries (notes.txt, state)',
      );
      expect(name).toBeTruthy();
    }
  });

  it('a file that is not a capture: one line naming file and line', async () => {
    for (const [, args] of runs) {
      const f = notCapture();
      oneLine(await cli(args(f)), `${f}:1: not a capture file`);
    }
    const f = join(tmp('blank'), 'x.jsonl');
    writeFileSync(f, '\n\n');
    oneLine(await cli(['report', f]), 'an empty file, not a capture');
    oneLine(await cli(['report', '/nonexistent/captures']), 'no such file or folder');
    // A capture cut off inside its only record: torn, not another format.
    const cut = join(tmp('cut'), 'c.jsonl');
    writeFileSync(cut, '{"v":1,"id":"r1","times":{"start":1767225620000},"session":{"key":"s","sour');
    oneLine(await cli(['report', cut]), `${cut}: a capture file with no whole record`);
    // A folder whose capture file was opened and never written (a wrapper that was never used).
    const unused = tmp('unused');
    writeFileSync(join(unused, 'capture-20261206T093041-5652-0001.jsonl'), '');
    oneLine(
      await cli(['report', unused]),
      'no capture records or transcript requests could be read (none of their lines is a record)',
    );
  });
});

describe('a gate that checked nothing does not pass', () => {
  it('replay --gate on hashes-mode captures: exit 2, telling to capture with --capture full', async () => {
    oneLine(
      await cli(['replay', hashes, '--gate', '--fix', 'tools-freeze']),
      'nothing to replay',
      '--capture full',
    );
    oneLine(await cli(['replay', hashes]), '--capture full');
  });

  it('whatif --fix on hashes-mode captures says the same', async () => {
    oneLine(await cli(['whatif', hashes, '--fix', 'tools-freeze']), 'nothing to replay', '--capture full');
  });

  it('replay --gate on full captures passes, and says what it skipped (a count_tokens call)', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const dir = tmp('count');
    const proxy = createProxy({ upstream: simUrl, dir, clock, capture: 'full', logger: {} });
    await proxy.listen();
    const body = agentConversation({ turns: 2, seed: 3 });
    const { max_tokens: _, ...counted } = body;
    for (const [route, b] of [
      ['/v1/messages', body],
      ['/v1/messages/count_tokens', counted],
      ['/v1/messages', appendUserTurn(body, 'more')],
    ] as const) {
      await fetch(`${proxy.url}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'x-cacheward-session': 's' },
        body: JSON.stringify(b),
      }).then((r) => r.text());
    }
    await proxy.flush();
    await proxy.close();
    await sim.close();
    const r = await cli(['replay', dir, '--gate', '--fix', 'tools-freeze,pin-reminders']);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain('1 records skipped (not full mode, not a prompt route, a count_tokens call');
  });
});

describe('one line, exit 2, no stack trace', () => {
  it('report --html into a folder that does not exist, or onto a folder', async () => {
    oneLine(
      await cli(['report', hashes, '--html', '/nonexistent/dir/report.html']),
      'the folder /nonexistent/dir does not exist',
    );
    oneLine(await cli(['report', hashes, '--html', tmp('html')]), 'that is a folder');
  });

  it('demo --write onto a file', async () => {
    const f = join(tmp('demo'), 'a-file');
    writeFileSync(f, 'x');
    oneLine(await cli(['demo', '--write', f]), `--write ${f}: a file is there, not a folder`);
  });

  describe('a file where a folder should be: refused at start-up by the built CLI, before anything listens or runs', () => {
    /** The built CLI, to its end (a proxy that started anyway is killed after 15 s, failing the exit code). */
    const built = (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const r = spawnSync(process.execPath, [bin, ...args], {
        encoding: 'utf8',
        timeout: 15_000,
        env: { ...process.env, ...env },
      });
      expect(r.stdout, 'nothing printed on stdout: no URL, so nothing listened').toBe('');
      return { code: r.status ?? -1, stderr: r.stderr };
    };
    const aFile = () => {
      const f = join(tmp('file-dir'), 'a-file');
      writeFileSync(f, 'x');
      return f;
    };

    it('proxy --dir onto a file, or below one', () => {
      const f = aFile();
      oneLine(built(['proxy', '--port', '0', '--dir', f]), `--dir ${f}: a file is there, not a folder`);
      oneLine(
        built(['proxy', '--port', '0', '--dir', join(f, 'captures')]),
        `--dir ${join(f, 'captures')}: ${f} is a file, not a folder`,
      );
    });

    it('run --dir onto a file: the command is not run', () => {
      const f = aFile();
      const ran = join(tmp('ran'), 'ran');
      const r = built([
        'run',
        '--sim',
        '--dir',
        f,
        '--',
        process.execPath,
        '-e',
        `require('fs').writeFileSync(${JSON.stringify(ran)}, '')`,
      ]);
      oneLine(r, `--dir ${f}: a file is there, not a folder`);
      expect(existsSync(ran)).toBe(false);
    });

    it('the default capture folder a file ($XDG_STATE_HOME/cacheward)', () => {
      const state = tmp('state');
      writeFileSync(join(state, 'cacheward'), 'x');
      oneLine(
        built(['proxy', '--port', '0'], { XDG_STATE_HOME: state }),
        `the default capture folder ${join(state, 'cacheward')}: a file is there, not a folder; move it away, or pass --dir FOLDER`,
      );
    });

    it('--ca-dir onto a file: ca, and proxy --forward', () => {
      const f = aFile();
      oneLine(built(['ca', '--ca-dir', f]), `--ca-dir ${f}: a file is there, not a folder`);
      oneLine(
        built(['proxy', '--port', '0', '--forward', '--ca-dir', f, '--dir', tmp('fwd')]),
        `--ca-dir ${f}: a file is there, not a folder`,
      );
    });

    it('a folder that does not exist yet is still created', async () => {
      const dir = join(tmp('new'), 'a', 'b');
      const r = await cli(['run', '--sim', '--no-warm-up', '--dir', dir, '--', process.execPath, '-e', '0']);
      expect(r.code, r.stderr).toBe(0);
      expect(existsSync(dir)).toBe(true);
    });
  });

  it('sim and proxy on a port in use', async () => {
    const server: Server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = String((server.address() as AddressInfo).port);
    try {
      oneLine(await cli(['sim', '--port', port]), `--port ${port}: already in use`);
      oneLine(await cli(['proxy', '--port', port, '--dir', tmp('pp')]), `--port ${port}: already in use`);
    } finally {
      server.close();
    }
  });

  it('validates --seed and --port', async () => {
    oneLine(await cli(['sim', '--seed', 'abc']), '--seed abc: not an integer');
    oneLine(await cli(['sim', '--seed', '1.5']), '--seed 1.5: not an integer');
    oneLine(await cli(['sim', '--port', '99999']), '--port 99999: not a port number');
  });

  it('refuses an --upstream that is not an http(s) URL with a host, before anything starts', async () => {
    for (const bad of [
      'ftp://example.com',
      'localhost:8080',
      'http://',
      'api.anthropic.com',
      'https://u:p@example.com',
    ]) {
      for (const flag of ['--upstream', '--anthropic-upstream', '--openai-upstream']) {
        // Named as given, its credentials redacted (`https://***@example.com`).
        oneLine(
          await cli(['proxy', '--port', '0', '--dir', tmp('up'), flag, bad]),
          `${flag} ${redactUrl(bad)}:`,
        );
      }
    }
  });

  it('diff --format on a body of another format names the detected format', async () => {
    const d = tmp('fmt');
    const chat = join(d, 'chat.json');
    writeFileSync(
      chat,
      JSON.stringify({
        model: 'gpt-5.4',
        messages: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'u' },
        ],
      }),
    );
    oneLine(
      await cli(['diff', '--format', 'anthropic-messages', chat, chat]),
      '--format anthropic-messages, but this body is openai-chat',
    );
    const a = join(pairs, 'tool-added-mid-session.a.json');
    oneLine(await cli(['diff', '--format', 'openai-responses', a, a]), 'but this body is anthropic-messages');
    // The right format, or a body that shows none, is accepted.
    expect((await cli(['diff', '--format', 'openai-chat', chat, chat])).code).toBe(0);
    const plain = join(d, 'plain.json');
    writeFileSync(plain, JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    expect((await cli(['diff', '--format', 'openai-chat', plain, plain])).code).toBe(0);
    expect(readdirSync(pairs).length).toBeGreaterThan(0);
  });
});
