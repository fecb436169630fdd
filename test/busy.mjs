// `npm run test:busy [-- <jest args>]`: runs `npm test` while busy loops keep the cores loaded (two
// by default, both cores of the reference machine; A2RL_BUSY_LOOPS=n for another count), so that a
// test depending on the machine being idle fails here rather than on an operator's or CI's machine.
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';

const count = Number(process.env.A2RL_BUSY_LOOPS ?? 2);
if (!Number.isInteger(count) || count < 0) {
  console.error(`test:busy: A2RL_BUSY_LOOPS must be a whole number, got "${process.env.A2RL_BUSY_LOOPS}"`);
  process.exit(2);
}

const loops = Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' }));
const stopLoops = () => loops.forEach((loop) => loop.kill('SIGKILL'));
console.error(`test:busy: ${count} busy loop(s) running (pids ${loops.map((l) => l.pid).join(', ') || 'none'})`);

const startedAt = Date.now();
const tests = spawn('npm', ['test', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopLoops();
    tests.kill(signal);
  });
}
tests.on('exit', (code, signal) => {
  stopLoops();
  // What the run was measured under, for the figures quoted from it.
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  console.error(`test:busy: ${minutes} min with ${count} busy loop(s); load average at the end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  process.exitCode = code ?? (signal ? 1 : 0);
});
