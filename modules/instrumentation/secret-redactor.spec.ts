import { createCipheriv, createHash, randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { knownSecrets, SecretRedactor } from './secret-redactor.js';

// Key-shaped strings are assembled at run time from a seeded generator: no literal in this file
// looks like a credential to a secret scanner, and every run tests the same strings.
function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
  const from = (alphabet: string, n: number) => Array.from({ length: n }, () => alphabet[next() % alphabet.length]).join('');
  return {
    alnum: (n: number) => from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', n),
    upper: (n: number) => from('ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', n),
    digits: (n: number) => from('0123456789', n),
    /** A keystream: fast enough for megabytes, the same every run. */
    bytes: (n: number) => createCipheriv('aes-128-ctr', Buffer.alloc(16, seed), Buffer.alloc(16, next() & 0xff)).update(Buffer.alloc(n)),
  };
}

const g = generator(42);
const TOKEN = `rt_${g.alnum(40)}`;
const GATEWAY = `gw-${g.alnum(32)}`;
const SHAPES: Array<[string, string]> = [
  ['pattern:anthropic-key', ['sk', 'ant', 'api03', g.alnum(80)].join('-')],
  ['pattern:openai-key', ['sk', 'proj', `${g.alnum(60)}_${g.alnum(40)}`].join('-')],
  ['pattern:openai-key', `sk-${g.alnum(48)}`],
  ['pattern:aws-access-key-id', `AK${'IA'}${g.upper(16)}`],
  ['pattern:github-token', `gh${'p'}_${g.alnum(36)}`],
  ['pattern:github-token', `github${'_pat_'}${g.alnum(22)}_${g.alnum(59)}`],
  ['pattern:slack-token', `xo${'xb'}-${g.digits(12)}-${g.digits(13)}-${g.alnum(24)}`],
  ['pattern:huggingface-token', `h${'f_'}${g.alnum(34)}`],
  ['pattern:google-api-key', `AI${'za'}${g.alnum(35)}`],
];
const PEM = [`-----BEGIN RSA PRIVATE ${'KEY'}-----`, ...Array.from({ length: 12 }, () => g.bytes(48).toString('base64')), `-----END RSA PRIVATE ${'KEY'}-----`].join('\n');

const redactor = new SecretRedactor([
  { kind: 'run-token', value: TOKEN },
  { kind: 'gateway-token', value: GATEWAY },
]);

describe('SecretRedactor: known values', () => {
  it('replaces a known value wherever it appears, and counts it per kind', () => {
    const { text, hits } = redactor.redactText(`GRADING_SERVER_URL=http://127.0.0.1:9/g/${TOKEN} and ${TOKEN}; gw=${GATEWAY}`);
    expect(text).toBe('GRADING_SERVER_URL=http://127.0.0.1:9/g/[REDACTED:run-token] and [REDACTED:run-token]; gw=[REDACTED:gateway-token]');
    expect(hits).toEqual([
      { kind: 'run-token', count: 2 },
      { kind: 'gateway-token', count: 1 },
    ]);
  });

  it('finds the URL-encoded and base64-encoded forms', () => {
    const odd = new SecretRedactor([{ kind: 'credential:DB_PASSWORD', value: 'p@ss/w0rd+more' }]);
    expect(odd.redactText(`postgres://u:${encodeURIComponent('p@ss/w0rd+more')}@db/x`).text).toBe('postgres://u:[REDACTED:credential:DB_PASSWORD]@db/x');
    expect(odd.redactText('u:p%40ss%2fw0rd%2bmore').text).toBe('u:[REDACTED:credential:DB_PASSWORD]');
    // `Basic base64(user:token)`: the token sits at some alignment inside the encoding.
    for (const user of ['a', 'ab', 'abc']) {
      const basic = Buffer.from(`${user}:${TOKEN}`).toString('base64');
      const { text, hits } = redactor.redactText(`Authorization: Basic ${basic}`);
      expect(hits).toEqual([{ kind: 'run-token', count: 1 }]);
      expect(text).toContain('[REDACTED:run-token]');
      // What is left of the encoding is a few edge characters, not enough to recover the token.
      expect(text.replace('Authorization: Basic ', '').replace('[REDACTED:run-token]', '').length).toBeLessThanOrEqual(8);
    }
  });

  it('ignores values shorter than 8 characters', () => {
    const short = new SecretRedactor([{ kind: 'x', value: 'abc1234' }]);
    expect(short.secrets).toEqual([]);
    expect(short.redactText('abc1234 abc1234').hits).toEqual([]);
  });

  it('replaces the whole of a known value before any key shape can cut into it', () => {
    const value = `Bearer${'x'.repeat(4)}:${g.alnum(20)}`; // the Bearer pattern would stop at ':'
    const r = new SecretRedactor([{ kind: 'credential:X', value: value.slice(6) }]);
    const { text } = r.redactText(`Authorization: Bearer ${value.slice(6)}`);
    expect(text).toBe('Authorization: Bearer [REDACTED:credential:X]');
  });
});

describe('SecretRedactor: key shapes', () => {
  it.each(SHAPES)('finds %s standing alone, in quotes, after = and in a URL', (kind, key) => {
    for (const around of [(k: string) => k, (k: string) => `"${k}"`, (k: string) => `KEY=${k}\n`, (k: string) => `https://x/?key=${k}&y=1`]) {
      const { text, hits } = new SecretRedactor().redactText(around(key));
      expect(text).toBe(around(`[REDACTED:${kind}]`));
      expect(hits).toEqual([{ kind, count: 1 }]);
    }
  });

  it('does not find a key shape inside a longer token', () => {
    for (const [, key] of SHAPES) expect(new SecretRedactor().redactText(`x${key}y`).hits).toEqual([]);
  });

  it('finds a PEM private key block', () => {
    const { text, hits } = new SecretRedactor().redactText(`key:\n${PEM}\nrest`);
    expect(text).toBe('key:\n[REDACTED:pattern:private-key]\nrest');
    expect(hits).toEqual([{ kind: 'pattern:private-key', count: 1 }]);
  });

  it('finds the token of an Authorization: Bearer header and keeps the header', () => {
    const jwt = `${g.alnum(36)}.${g.alnum(80)}.${g.alnum(43)}`;
    const r = new SecretRedactor();
    expect(r.redactText(`curl -H 'Authorization: Bearer ${jwt}' http://x`).text).toBe("curl -H 'Authorization: Bearer [REDACTED:pattern:bearer-token]' http://x");
    expect(r.redactText(`{"authorization": "Bearer ${jwt}"}`).text).toBe('{"authorization": "Bearer [REDACTED:pattern:bearer-token]"}');
  });

  it('does not fire on sha256 digests, UUIDs, base64 text or ordinary code', () => {
    const digest = createHash('sha256').update('x').digest('hex');
    const base64 = generator(7).bytes(3 * 1024 * 1024).toString('base64');
    const lines = base64.replace(/(.{76})/g, '$1\n');
    const code = 'import torch\nmodel = AutoModel.from_pretrained("gpt2")  # task-specific disk-cache\nhf_hub_download(repo_id, filename)\nsk-learn\n';
    const r = new SecretRedactor();
    for (const text of [digest, `sha256:${digest}`, randomUUID(), base64, lines, code, `{"sha256":"${digest}","key":"sha256/${digest.slice(0, 2)}/${digest}"}`]) {
      expect(r.redactText(text).hits).toEqual([]);
    }
  });
});

describe('SecretRedactor: event data', () => {
  it('redacts strings at any depth and names each field by its JSON path', () => {
    const data = {
      pid: 7,
      argv: ['curl', '-d', `token=${TOKEN}`],
      manifest: [{ path: 'a' }, { path: 'b' }, { path: 'c' }, { path: `weights/${TOKEN}.bin`, size: 3 }],
      details: { [`k ${TOKEN}`]: 'v', nested: { ok: true } },
    };
    const before = JSON.stringify(data);
    const { data: out, hits } = redactor.redactData(data);
    expect(out).toEqual({
      pid: 7,
      argv: ['curl', '-d', 'token=[REDACTED:run-token]'],
      manifest: [{ path: 'a' }, { path: 'b' }, { path: 'c' }, { path: 'weights/[REDACTED:run-token].bin', size: 3 }],
      details: { 'k [REDACTED:run-token]': 'v', nested: { ok: true } },
    });
    expect(hits).toEqual([
      { field: 'argv[2]', kind: 'run-token', count: 1 },
      { field: 'manifest[3].path', kind: 'run-token', count: 1 },
      { field: 'details["k [REDACTED:run-token]"]{key}', kind: 'run-token', count: 1 },
    ]);
    expect(JSON.stringify(data)).toBe(before); // the input is not touched
    expect(out.manifest[0]).toBe(data.manifest[0]); // unchanged branches are shared
    expect(out.details.nested).toBe(data.details.nested);
  });

  it('returns the data itself when there is nothing to redact', () => {
    const data = { argv: ['python', 'train.py'], cwd: '/w' };
    const result = redactor.redactData(data);
    expect(result.data).toBe(data);
    expect(result.hits).toEqual([]);
  });
});

describe('SecretRedactor: blobs', () => {
  it('rewrites only the secret bytes of a text blob and keeps bytes that are not UTF-8', () => {
    const odd = Buffer.from([0xff, 0xfe, 0x80, 0xc3, 0x28, 0x0a]);
    const blob = Buffer.concat([odd, Buffer.from(`token=${TOKEN}\n`), odd, Buffer.from(SHAPES[0][1]), odd]);
    const result = redactor.redactBlob(blob)!;
    expect(result.bytes.equals(Buffer.concat([odd, Buffer.from('token=[REDACTED:run-token]\n'), odd, Buffer.from('[REDACTED:pattern:anthropic-key]'), odd]))).toBe(true);
    expect(result.hits).toEqual([
      { kind: 'run-token', count: 1 },
      { kind: 'pattern:anthropic-key', count: 1 },
    ]);
  });

  it('finds a known value that is not ASCII by its UTF-8 bytes', () => {
    const r = new SecretRedactor([{ kind: 'credential:X', value: 'pässwörd-🔑-12345' }]);
    expect(r.redactBlob(Buffer.from('a pässwörd-🔑-12345 b'))!.bytes.toString()).toBe('a [REDACTED:credential:X] b');
  });

  it('returns null for a clean blob and for a binary one (a NUL in its first 8 KiB)', () => {
    expect(redactor.redactBlob(Buffer.from('nothing here\n'))).toBeNull();
    expect(redactor.redactBlob(Buffer.concat([Buffer.from([0]), Buffer.from(TOKEN)]))).toBeNull();
    // A NUL after the first 8 KiB: still text.
    const late = Buffer.concat([Buffer.alloc(9000, 0x61), Buffer.from([0]), Buffer.from(TOKEN)]);
    expect(redactor.redactBlob(late)!.hits).toEqual([{ kind: 'run-token', count: 1 }]);
  });

  it('redacts a multi-megabyte blob whole or fed in pieces to the same bytes, secrets across every boundary', () => {
    // Secrets every ~300 KiB, so some straddle the 1 MiB windows and the odd-sized pieces.
    const parts: Buffer[] = [];
    const rand = generator(9);
    let expected = 0;
    for (let i = 0; i < 40; i++) {
      parts.push(Buffer.from(rand.bytes(225 * 1024 + i * 37).toString('base64').replace(/(.{100})/g, '$1\n')));
      const [, key] = SHAPES[i % SHAPES.length];
      parts.push(Buffer.from(i % 3 === 0 ? ` ${TOKEN} ` : i % 3 === 1 ? `\n${PEM}\n` : ` ${key} `));
      expected++;
    }
    const blob = Buffer.concat(parts);
    const whole = redactor.redactBlob(blob)!;
    expect(whole.hits.reduce((n, h) => n + h.count, 0)).toBe(expected);
    expect(whole.bytes.includes(TOKEN)).toBe(false);
    expect(whole.bytes.includes('PRIVATE KEY')).toBe(false);

    const piecewise = redactor.blob();
    const out: Buffer[] = [];
    for (let off = 0; off < blob.length; off += 77_777) out.push(piecewise.write(blob.subarray(off, off + 77_777)));
    out.push(piecewise.end());
    expect(Buffer.concat(out).equals(whole.bytes)).toBe(true);
    expect(piecewise.hits).toEqual(whole.hits);
  });

  it('gives the same bytes fed in small windows, whatever falls on a window edge', () => {
    // Dense shapes, half of them glued to a preceding token character (so not keys): windows of 997
    // bytes start and end inside many of them, and the look-behind must still see the character before.
    const rand = generator(11);
    const lines = Array.from({ length: 3000 }, (_, i) => `${i % 2 ? 'x' : ' '}h${'f_'}${rand.alnum(34)}${i % 7 === 0 ? `\n${PEM}\n` : ''}${i % 5 === 0 ? TOKEN : ''} `);
    const blob = Buffer.from(lines.join(''));
    const whole = redactor.redactBlob(blob)!;
    expect(whole.hits).toEqual([
      { kind: 'run-token', count: 600 },
      { kind: 'pattern:huggingface-token', count: 1500 },
      { kind: 'pattern:private-key', count: 429 },
    ]);
    for (const [window, piece] of [[997, 101], [4096, 4096], [50_000, 7]]) {
      const piecewise = redactor.blob(window);
      const out: Buffer[] = [];
      for (let off = 0; off < blob.length; off += piece) out.push(piecewise.write(blob.subarray(off, off + piece)));
      out.push(piecewise.end());
      expect(Buffer.concat(out).equals(whole.bytes)).toBe(true);
    }
  });
});

describe('knownSecrets', () => {
  it('takes the run tokens and the credentials of an environment, not paths or settings', () => {
    const env = {
      OPENAI_API_KEY: 'sk-test-000000000000',
      HF_TOKEN: 'hf_test_000000000',
      AWS_SECRET_ACCESS_KEY: 'abcdefghijklmnop',
      DATABASE_URL: 'postgres://a2rl:s3cret-pass@db:5432/a2rl',
      SSH_AUTH_SOCK: '/tmp/ssh-abc/agent.1',
      PASSWORD_FILE: '/run/secrets/pw-file',
      GITHUB_TOKEN: 'short',
      PATH: '/usr/bin:/bin',
    };
    expect(knownSecrets({ runToken: TOKEN, gatewayToken: GATEWAY, env })).toEqual([
      { kind: 'run-token', value: TOKEN },
      { kind: 'gateway-token', value: GATEWAY },
      { kind: 'credential:OPENAI_API_KEY', value: env.OPENAI_API_KEY },
      { kind: 'credential:HF_TOKEN', value: env.HF_TOKEN },
      { kind: 'credential:AWS_SECRET_ACCESS_KEY', value: env.AWS_SECRET_ACCESS_KEY },
      { kind: 'credential:DATABASE_URL', value: 's3cret-pass' },
    ]);
  });
});
