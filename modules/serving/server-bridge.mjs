// A confined server's bridge: runs inside the server's network namespace (loopback only) as the
// server's uid, listens on a Unix socket in the directory bound for it and pipes every connection
// to 127.0.0.1:<port>, where the server listens; then runs the server command and exits as it does.
// The harness adopts the socket (moves it out of the server's reach) and serves a loopback port of
// the host from it (modules/serving/confinement.ts). Plain JavaScript with no dependencies.
//
//   node server-bridge.mjs --socket /run/a2rl-server/server.sock --port <port> -- <command> [args…]
//
// SIGTERM/SIGINT/SIGHUP reach the server from the harness through the process group: the bridge
// outlives them so that the server has its grace to shut down (its exit ends the sandbox).
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 && i < split ? argv[i + 1] : undefined;
};
const socket = option('--socket');
const port = Number(option('--port'));
if (split < 0 || split === argv.length - 1 || !socket?.startsWith('/') || !Number.isInteger(port) || port < 1 || port > 65535) {
  fail('usage: server-bridge.mjs --socket <path> --port <port> -- <command> [args…]');
}
const [command, ...args] = argv.slice(split + 1);

function fail(message) {
  process.stderr.write(`a2rl server bridge: ${message}\n`);
  process.exit(125);
}

const server = net.createServer((outside) => {
  const inside = net.connect(port, '127.0.0.1');
  outside.pipe(inside).pipe(outside);
  // Not listening yet (still loading) or gone: the harness's connection just closes.
  outside.on('error', () => inside.destroy());
  inside.on('error', () => outside.destroy());
});
try {
  rmSync(socket, { force: true });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  server.on('error', () => undefined);
  server.unref(); // the server's exit ends the bridge
} catch (err) {
  fail(`cannot listen on ${socket}: ${err.message}`);
}

// The server writes into pipes of its own, copied to ours: Node makes this process's stdout and
// stderr non-blocking (a flag of the file description, shared with a child that inherits them), and a
// server writing to a non-blocking pipe loses what meets a full buffer (EAGAIN) whenever the harness
// reads late: the end of a traceback, or the server itself, whose logging then fails.
const child = spawn(command, args, { stdio: ['inherit', 'pipe', 'pipe'] });
child.stdout.pipe(process.stdout, { end: false });
child.stderr.pipe(process.stderr, { end: false });
// The harness closes its ends only when it stops the server: the copy's last writes may then fail.
for (const out of [process.stdout, process.stderr]) out.on('error', () => undefined);
child.on('error', (err) => fail(`cannot start ${command}: ${err.message}`));
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => undefined);
// Its output is copied to the end before the bridge exits as it did; a leftover process of the
// server's holding the pipes open is not waited for beyond a second.
const copied = Promise.all([child.stdout, child.stderr].map((stream) => new Promise((done) => stream.once('close', done))));
child.on('exit', (code, signal) => {
  void Promise.race([copied, new Promise((done) => setTimeout(done, 1000))]).then(() => exitAs(code, signal));
});

async function exitAs(code, signal) {
  // What was copied has reached the harness's pipes (a write's callback runs once it is written).
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise((done) => stream.write('', done))));
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    setTimeout(() => process.exit(128), 1000).unref(); // a signal node ignores (SIGPIPE)
  } else process.exit(code ?? 1);
}
