import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

// A local stand-in for a package index (PEP 503) serving one tiny pure-Python wheel: what the egress
// proxy's tests install with a real pip, on a machine with no route to pypi.org.

export const PKG = 'a2rl_egress_probe';
export const WHEEL = `${PKG}-0.1-py3-none-any.whl`;

/** Builds a one-module pure-Python wheel (a zip with the package, METADATA, WHEEL and RECORD). */
export function buildWheel(dir: string, python = 'python3'): Buffer {
  const script = `
import base64, hashlib, sys, zipfile
pkg, dist = ${JSON.stringify(PKG)}, ${JSON.stringify(`${PKG}-0.1.dist-info`)}
files = {
    f"{pkg}/__init__.py": b"VALUE = 'installed through the a2rl egress proxy'\\n",
    f"{dist}/METADATA": b"Metadata-Version: 2.1\\nName: a2rl-egress-probe\\nVersion: 0.1\\n",
    f"{dist}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: a2rl-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
record = "".join(f"{name},{digest(data)},{len(data)}\\n" for name, data in files.items()) + f"{dist}/RECORD,,\\n"
files[f"{dist}/RECORD"] = record.encode()
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        z.writestr(name, data)
`;
  const out = join(dir, WHEEL);
  const built = spawnSync(python, ['-c', script, out], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`building the test wheel failed: ${built.stderr}`);
  return readFileSync(out);
}

/** A PEP 503 simple index serving one project with one wheel; `hits` lists the paths asked for. The caller closes `server`. */
export async function fakeIndex(wheel: Buffer): Promise<{ server: HttpServer; port: number; hits: string[] }> {
  const sha = createHash('sha256').update(wheel).digest('hex');
  const hits: string[] = [];
  const server = createHttpServer((req, res) => {
    hits.push(req.url ?? '');
    const html = (links: string) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!DOCTYPE html><html><body>${links}</body></html>`);
    };
    if (req.url === '/simple/') return html('<a href="/simple/a2rl-egress-probe/">a2rl-egress-probe</a>');
    if (req.url === '/simple/a2rl-egress-probe/') return html(`<a href="/files/${WHEEL}#sha256=${sha}">${WHEEL}</a>`);
    if (req.url === `/files/${WHEEL}`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': wheel.length });
      return res.end(wheel);
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

