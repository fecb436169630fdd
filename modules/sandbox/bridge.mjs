// The sandbox's bridge: runs inside the agent's network namespace (loopback only), listens on
// 127.0.0.1:<port> for each `--forward <port>=<unix socket>` and pipes every connection to that
// socket of the harness (bound read-only into the sandbox); then runs the agent command and exits
// as it does. Plain JavaScript with no dependencies: it is started by the node binary the sandbox
// sees, before anything of the agent.
//
//   node bridge.mjs [--lifeline /run/a2rl/lifeline.sock] --forward 5000=/run/a2rl/grading.sock … -- <command> [args…]
//
// The lifeline is a connection to the harness held open for the whole run: when the harness dies,
// the kernel closes it and the bridge kills every process of the agent (bwrap's --die-with-parent
// is the first line of defence; this one does not depend on the parent-death signal surviving).
import { spawn } from 'node:child_process';
import net from 'node:net';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
if (split < 0 || split === argv.length - 1) fail('usage: bridge.mjs --forward <port>=<socket> … -- <command> [args…]');
const forwards = [];
let lifeline;
for (let i = 0; i < split; i += 2) {
  if (argv[i] === '--lifeline' && argv[i + 1]?.startsWith('/')) {
    lifeline = argv[i + 1];
    continue;
  }
  const match = argv[i] === '--forward' ? /^(\d{1,5})=(\/.+)$/.exec(argv[i + 1] ?? '') : null;
  if (!match) fail(`bad bridge option: ${argv[i]} ${argv[i + 1] ?? ''}`);
  forwards.push({ port: Number(match[1]), socket: match[2] });
}
const [command, ...args] = argv.slice(split + 1);

function fail(message) {
  process.stderr.write(`a2rl bridge: ${message}\n`);
  process.exit(125);
}

function listen({ port, socket }) {
  const server = net.createServer((inside) => {
    const outside = net.connect(socket);
    inside.pipe(outside).pipe(inside);
    // Either side failing ends both; an unreachable harness socket just closes the agent's connection.
    inside.on('error', () => outside.destroy());
    outside.on('error', () => inside.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

try {
  const servers = await Promise.all(forwards.map(listen));
  for (const server of servers) server.unref(); // the agent's exit ends the bridge
} catch (err) {
  fail(`cannot listen inside the sandbox: ${err.message}`);
}

if (lifeline) {
  const line = net.connect(lifeline);
  await new Promise((resolve) => {
    line.once('connect', resolve);
    line.once('error', (err) => fail(`cannot reach the harness: ${err.message}`));
  });
  line.on('error', () => undefined);
  // The harness is gone: nothing of the run may outlive it (kill(-1) spares this process and init).
  line.on('close', () => {
    try {
      process.kill(-1, 'SIGKILL');
    } finally {
      process.exit(137);
    }
  });
  line.unref();
}

const child = spawn(command, args, { stdio: 'inherit' });
child.on('error', (err) => fail(`cannot start ${command}: ${err.message}`));
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    setTimeout(() => process.exit(128), 1000).unref(); // a signal node ignores (SIGPIPE)
  } else process.exit(code ?? 1);
});
