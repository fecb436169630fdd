import type { Command } from 'commander';
import type { AccessStreamLedger } from '../../modules/access/access-stream.js';
import { tokenStatus, withoutHash, type TokenInfo } from '../../modules/access/access-state.js';
import { parseExpiry } from '../../modules/access/token-secret.js';
import type { A2rlEvent, AccessRole } from '../../modules/ledger/events/catalog.js';
import { loadConfig } from '../config/config.js';
import { checkHome } from '../config/open-errors.js';
import { table } from './cli-support.js';
import { jsonOut } from './terminal.js';
import { choiceOption } from './option-parsers.js';

const systemClock = () => new Date();

/** Commands over the access stream (docs/security.md, "Who may look"): API tokens and the access records. */
export function registerAccessCommands(program: Command): void {
  const tokens = program
    .command('tokens')
    .description('API tokens for the HTTP API and dashboard (required when a2rl serve listens beyond loopback): only their sha256 is stored, in the access stream');
  tokens
    .command('create')
    .description('create a token and print its secret once (it cannot be shown again)')
    .addOption(choiceOption('--role <role>', 'viewer (reads runs) or operator (also exports, regrades, cancels, reads the access stream)', ['viewer', 'operator'] as const, 'viewer or operator').makeOptionMandatory())
    .option('--name <name>', 'who or what holds it (shown in lists and access records)', 'token')
    .option('--expires <when>', 'a duration (12h, 30d, 8w) or an ISO 8601 time; default: never')
    .option('--json', 'one JSON object: {tokenId, name, role, expiresAt, secret}')
    .action(async (opts: { role: AccessRole; name: string; expires?: string; json?: boolean }) => {
      const name = opts.name.trim();
      if (!name || name.length > 200) throw new Error('--name must be 1 to 200 characters');
      const expiresAt = parseExpiry(opts.expires, systemClock());
      const { secret, token } = await withAccess((ledger) => ledger.createToken({ role: opts.role, name, expiresAt }));
      if (opts.json) process.stdout.write(`${JSON.stringify({ tokenId: token.tokenId, name: token.name, role: token.role, expiresAt: token.expiresAt, secret })}\n`);
      else {
        process.stdout.write(`${secret}\n`);
        process.stderr.write(`created ${token.role} token ${token.tokenId} "${token.name}"${token.expiresAt ? `, expires ${token.expiresAt}` : ''}: the secret above is shown only now\n`);
      }
    });
  tokens
    .command('list')
    .description('every token: id, name, role, created, expires, revoked (never a secret or hash)')
    .option('--json', 'one JSON array of {tokenId, name, role, createdAt, expiresAt, revokedAt, status}')
    .action(async (opts: { json?: boolean }) => {
      const state = await withAccess((ledger) => ledger.read());
      const now = systemClock();
      const rows = [...state.tokens.values()].map((t) => listed(t, now));
      if (opts.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
      else if (!rows.length) process.stdout.write('no tokens: create one with `a2rl tokens create --role viewer`\n');
      else {
        const header = ['ID', 'NAME', 'ROLE', 'CREATED', 'EXPIRES', 'STATUS'];
        process.stdout.write(`${table([header, ...rows.map((t) => [t.tokenId, t.name, t.role, t.createdAt, t.expiresAt ?? 'never', t.revokedAt ? `revoked ${t.revokedAt}` : t.status])])}\n`);
      }
    });
  tokens
    .command('revoke')
    .description('revoke a token: requests with it are refused from now on (a running server reads the revocation on the next request)')
    .argument('<tokenId>', 'the token id, as `a2rl tokens list` shows it')
    .action(async (tokenId: string) => {
      const { token, already } = await withAccess((ledger) => ledger.revokeToken(tokenId));
      process.stdout.write(already ? `token ${token.tokenId} was already revoked (${token.revokedAt})\n` : `revoked token ${token.tokenId} "${token.name}"\n`);
    });

  program
    .command('access')
    .description('the access stream for auditors: who signed in, used a token, exported, regraded, cancelled or verified what, and when (refusals included)')
    .option('--run <runId>', "only records whose target is this run")
    .option('--json', 'NDJSON: one event per line (token events without their hash)')
    .action(async (opts: { run?: string; json?: boolean }) => {
      const events = (await withAccess((ledger) => ledger.events())).filter((e) => !opts.run || (e.type === 'AccessRecorded' && e.data.target?.runId === opts.run));
      // Sign-in records carry names anyone who reaches POST /auth/login typed: table() shows them inert.
      if (opts.json) for (const e of events) process.stdout.write(jsonOut(`${JSON.stringify(withoutHash(e))}\n`));
      else if (!events.length) process.stdout.write(opts.run ? `no access records for run ${opts.run}\n` : 'the access stream is empty\n');
      else process.stdout.write(`${table([['TIME', 'WHO', 'WHAT', 'TARGET', 'OUTCOME'], ...events.map(row)])}\n`);
    });
}

/** The access stream of the ledger the settings name, without the Nest app. */
async function withAccess<T>(work: (ledger: AccessStreamLedger) => Promise<T>): Promise<T> {
  const config = loadConfig();
  checkHome(config.home);
  const [{ openLedger }, { AccessStreamLedger: Ledger }] = await Promise.all([import('../open-stores.js'), import('../../modules/access/access-stream.js')]);
  const store = await openLedger(config);
  try {
    return await work(new Ledger(store, systemClock));
  } finally {
    await store.close();
  }
}

function listed(t: TokenInfo, now: Date) {
  return { tokenId: t.tokenId, name: t.name, role: t.role, createdAt: t.createdAt, expiresAt: t.expiresAt, revokedAt: t.revokedAt, status: tokenStatus(t, now) };
}

function row(e: A2rlEvent): string[] {
  switch (e.type) {
    case 'TokenCreated':
      return [e.occurredAt, 'a2rl tokens', 'token created', `${e.data.tokenId} "${e.data.name}" (${e.data.role})`, e.data.expiresAt ? `expires ${e.data.expiresAt}` : 'ok'];
    case 'TokenRevoked':
      return [e.occurredAt, 'a2rl tokens', 'token revoked', e.data.tokenId, 'ok'];
    case 'AccessRecorded': {
      const d = e.data;
      const who = `${d.actor.kind} ${d.actor.kind === 'token' ? `${d.actor.id} "${d.actor.name}"` : d.actor.name}${d.actor.role ? ` (${d.actor.role})` : ''}`;
      const target = d.target?.runId ? `run ${d.target.runId}` : d.target?.campaignId ? `campaign ${d.target.campaignId}` : '-';
      const outcome = `${d.outcome}${d.verified === undefined ? '' : d.verified ? ', verified' : ', verification failed'}${d.detail ? `: ${d.detail}` : ''}`;
      return [e.occurredAt, who, d.action, target, outcome];
    }
    default:
      return [e.occurredAt, '-', e.type, '-', '-'];
  }
}
