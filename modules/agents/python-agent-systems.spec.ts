import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { resolveCommand } from './agent-registry.js';
import { installedPortablePython, portablePythonRootOf, portablePythonSpec } from './portable-python.js';
import { installedPythonAgentSystem, listPythonAgentSystems, pythonAgentsDir, pythonAgentSystemKey } from './python-agent-systems.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'a2rl-pyagents-spec-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('Python agent systems (infra/python-agents)', () => {
  const systems = listPythonAgentSystems();

  it('declares OpenHands on the portable Python and R&D-Agent on the machine\'s, each with its commands', () => {
    expect(systems.map((s) => [s.id, s.python, Object.keys(s.commands)])).toEqual([
      ['openhands', 'portable', ['openhands']],
      ['rdagent', 'system', ['rdagent-python']],
    ]);
  });

  it('pins every package of each lock to one version with its hashes, from one pinned requirement', () => {
    for (const s of systems) {
      const direct = readFileSync(path.join(s.dir, 'requirements.in'), 'utf8').split('\n').filter((l) => l.trim() && !l.startsWith('#'));
      expect(direct.every((l) => /^[A-Za-z0-9._-]+==[^\s]+$/.test(l.trim()))).toBe(true);
      const lines = readFileSync(path.join(s.dir, 'requirements.txt'), 'utf8').split('\n');
      const requirements = lines.map((l, i) => ({ l, i })).filter(({ l }) => /^[A-Za-z0-9]/.test(l));
      expect(requirements.length).toBeGreaterThan(50);
      for (const { l, i } of requirements) {
        expect(`${l} ${lines[i + 1] ?? ''}`).toMatch(/^[A-Za-z0-9._-]+(\[[^\]]*\])?==\S+ \\ +--hash=sha256:[0-9a-f]{64}/);
      }
    }
  });

  it('keys an install by its lock: a changed lock is a new install', () => {
    const copy = path.join(tmp, 'systems');
    cpSync(pythonAgentsDir(), copy, { recursive: true });
    const before = listPythonAgentSystems(copy).map(pythonAgentSystemKey);
    writeFileSync(path.join(copy, 'rdagent', 'requirements.txt'), '# changed\n', { flag: 'a' });
    const after = listPythonAgentSystems(copy).map(pythonAgentSystemKey);
    expect([after[0] === before[0], after[1] === before[1]]).toEqual([true, false]);
  });

  it('takes the portable Python from Debian 13 (trixie), Python 3.13', () => {
    expect(portablePythonSpec()).toMatchObject({ suite: 'trixie', python: '3.13', packages: ['python3.13', 'python3.13-venv'] });
  });

  const portable = installedPortablePython();
  (portable ? it : it.skip)(`the installed portable Python runs with its own libraries ${portable ? '' : '(skipped: not installed; npm test\'s pretest installs it)'}`, () => {
    const out = spawnSync(portable!, ['-c', 'import ssl, sqlite3, ctypes, sys; print("%d.%d" % sys.version_info[:2], ssl.OPENSSL_VERSION.split()[1][0])'], { encoding: 'utf8' });
    expect(out.stdout.trim()).toBe('3.13 3');
    expect(portablePythonRootOf(portable!)).toBe(path.dirname(path.dirname(path.dirname(portable!))));
  });

  for (const system of systems) {
    const installed = installedPythonAgentSystem(system);
    (installed ? it : it.skip)(`${system.id}: its commands resolve to a folder of their own, bound with its venv and interpreter ${installed ? '' : '(skipped: not installed)'}`, () => {
      for (const name of Object.keys(system.commands)) {
        const found = resolveCommand(name)!;
        expect(found.binDir).toBe(path.join(installed!.prefix, 'a2rl-bin'));
        // The agent's PATH gains the command only: the system's own python and pip stay out of it.
        expect(readdirSync(found.binDir).sort()).toEqual(Object.keys(system.commands).sort());
        expect(found.binds[0]).toBe(installed!.prefix);
        expect(installed!.python.startsWith(`${found.binds[1]}/`)).toBe(true);
      }
    });
  }
});
