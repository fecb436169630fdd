import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { loadConfig } from '../config/config.js';
import { checkOutputFile } from '../config/open-errors.js';
import { inertLine, inertText } from '../../modules/reports/inert-text.js';
import { recordCliAction } from './access-trail.js';
import { registerKeysCommands } from './keys.commands.js';
import { appSide } from './app-side.js';
import { jsonOut } from './terminal.js';
import { registerVerifyCommand } from './verify.commands.js';

/** Commands for audit and forensics: keys, verify, replay, export, verify-bundle. */
export function registerAuditCommands(program: Command): void {
  registerKeysCommands(program);
  registerVerifyCommand(program);

  program
    .command('replay')
    .description("exact replay of a run's workspace: its files at a seq or time (--at … --out), the step-through timeline (--timeline), or what changed between two points (--diff)")
    .argument('<runId>', 'run id')
    .option('--at <seq|time>', 'materialise the workspace right after this event: a seq, or an ISO 8601 time (the last event at or before it)')
    .option('--out <dir>', 'with --at: directory to write the files to (must be empty or new)')
    .option('--force', 'with --out: empty a non-empty directory first')
    .option('--timeline', 'list every event: seq, time, type, one-line summary')
    .option('--diff <points...>', 'two points (seq or ISO time): files added, removed and modified between them, with unified diffs of text files')
    .option('--json', 'with --timeline: one JSON object per event; with --diff or --at: one JSON object')
    .action(async (runId: string, opts: { at?: string; out?: string; force?: boolean; timeline?: boolean; diff?: string[]; json?: boolean }) => {
      const modes = [opts.at !== undefined, opts.timeline === true, opts.diff !== undefined].filter(Boolean).length;
      if (modes !== 1) throw new Error('give exactly one of --at <seq|time> --out <dir>, --timeline, --diff <seqA> <seqB>');
      if (opts.at !== undefined && !opts.out) throw new Error('--at needs --out <dir>');
      if (opts.diff && opts.diff.length !== 2) throw new Error(`--diff takes two points (seq or ISO time), got ${opts.diff.length}`);
      const [{ ReplayService, parseReplayPoint }, format, { READ_MODELS }, { ARTIFACT_STORE }, { EVENT_STORE }] = await Promise.all([
        import('../../modules/replay/replay.service.js'),
        import('../../modules/replay/format.js'),
        import('../../modules/readmodels/read-models.port.js'),
        import('../../modules/artifacts/artifacts.module.js'),
        import('../../modules/ledger/tokens.js'),
      ]);
      const at = opts.at === undefined ? undefined : parseReplayPoint(opts.at);
      const points = opts.diff?.map(parseReplayPoint);
      const { withApp, ProjectionRunnerService } = await appSide();
      await withApp(async (app) => {
        const projections = app.get(ProjectionRunnerService);
        const replay = new ReplayService({
          events: app.get(EVENT_STORE),
          readModels: app.get(READ_MODELS),
          artifacts: app.get(ARTIFACT_STORE),
          catchUp: () => projections.catchUp('workspace-revisions'),
        });
        if (at !== undefined) {
          const result = await replay.materialize(runId, at, opts.out!, { force: opts.force });
          process.stdout.write(opts.json ? jsonOut(`${canonicalJson(result)}\n`) : inertText(format.renderMaterialized(result)));
        } else if (points) {
          const diff = await replay.diff(runId, points[0], points[1]);
          process.stdout.write(opts.json ? jsonOut(`${canonicalJson(diff)}\n`) : inertText(format.renderDiff(diff)));
        } else {
          const entries = await replay.timeline(runId);
          process.stdout.write(opts.json ? jsonOut(format.timelineJson(entries)) : inertText(format.renderTimeline(entries)));
        }
      });
    });

  // Audit bundles (issue 5): modules/audit/bundle, imported on use. verify-bundle is offline: it
  // reads no store, only the bundle and the --pubkey file, or else the trusted keys under A2RL_HOME.

  program
    .command('export')
    .description("write a run's self-contained audit bundle (.tar.gz): events.ndjson, signed tree heads with proofs, the public key, artifacts, reports; recorded in the access stream (actor cli: the OS user)")
    .argument('[runId]', 'run id (with --format inspect, or --campaign instead)')
    .requiredOption('-o, --output <bundle.tar.gz>', 'bundle file to write (--format inspect|atif: the file; with --campaign: a directory)')
    .option('--format <format>', 'bundle (the audit bundle) | inspect (an Inspect AI eval log, JSON) | atif (an ATIF v1.7 trajectory, JSON): docs/analysis.md "Exports"', 'bundle')
    .option('--campaign <id>', "with --format inspect: one Inspect log per task × agent × driver of the campaign's accepted runs, into the -o directory")
    .option('--with-checkpoints', "include the submitted checkpoints' files (left out by default; the manifest marks them omitted)")
    .option('--json', 'one JSON object: {runId, bundle (absolute path), bytes, sha256 (of the bundle file), events, heads, blobs, omittedBlobs, withCheckpoints, keyId}')
    .action(async (runId: string | undefined, opts: { output: string; format: string; campaign?: string; withCheckpoints?: boolean; json?: boolean }) => {
      // The ecosystem's formats (src/commands/exports.commands.ts); the audit bundle below.
      const { exportFormatted, EXPORT_FORMATS } = await import('./exports.commands.js');
      if (!EXPORT_FORMATS.includes(opts.format as never)) throw new Error(`--format must be ${EXPORT_FORMATS.join(', ')}, got "${opts.format}"`);
      if (opts.format !== 'bundle') return exportFormatted(runId, { ...opts, format: opts.format as 'inspect' | 'atif' });
      if (runId === undefined || opts.campaign !== undefined) throw new Error('an audit bundle is of one run: give its id (--campaign is for --format inspect)');
      const [{ exportBundle }, { loadPublicKey, keysDir }, { openLedger, openArtifacts }] = await Promise.all([
        import('../../modules/audit/bundle/index.js'),
        import('../../modules/ledger/tree-head.js'),
        import('../open-stores.js'),
      ]);
      const { TASKS } = await import('../../tasks/index.js');
      const config = loadConfig();
      checkOutputFile('-o', opts.output); // a bad path fails here, in one line, before any store is opened
      const key = loadPublicKey(config.home);
      if (!key) throw new Error(`no signing key in ${keysDir(config.home)}: runs of this ledger were not signed, so there is nothing to verify a bundle against`);
      const eventStore = await openLedger(config);
      try {
        const artifacts = await openArtifacts(config);
        try {
          const taskLevel = (task: string) => TASKS.find((t) => t.id === task)?.level ?? null;
          let s;
          try {
            s = await exportBundle({ runId, eventStore, artifacts, publicKeyPem: key.publicKeyPem, withCheckpoints: opts.withCheckpoints, taskLevel }, opts.output);
          } catch (err) {
            await recordCliAction(config, { action: 'export', target: { runId }, done: false, detail: (err as Error).message.split('\n')[0] }, eventStore);
            throw err;
          }
          const omitted = s.omittedBlobs ? ` (${s.omittedBlobs} checkpoint files left out; --with-checkpoints includes them)` : '';
          const digest = await fileDigest(opts.output);
          const where = resolve(opts.output);
          await recordCliAction(config, {
            action: 'export',
            target: { runId },
            done: true,
            detail: `bundle of ${s.events} events, ${digest.bytes} bytes, sha256 ${digest.sha256}, key id ${key.keyId}${opts.withCheckpoints ? ', with checkpoints' : ''}, written to ${where}`,
          }, eventStore);
          if (opts.json) {
            const file = { bundle: where, ...digest };
            process.stdout.write(`${JSON.stringify({ ...s, ...file, withCheckpoints: opts.withCheckpoints === true, keyId: key.keyId })}\n`);
          } else process.stdout.write(`wrote ${opts.output}: run ${runId}, ${s.events} events, ${s.heads} signed tree heads, ${s.blobs} blobs${omitted}, key id ${key.keyId}\n`);
        } finally {
          await artifacts.close();
        }
      } finally {
        await eventStore.close();
      }
    });

  program
    .command('verify-bundle')
    .description("verify an audit bundle offline (no ledger or network): every event line, signed head, proof, blob and report, signed by a key you trust (--pubkey, or one in `a2rl keys trusted`); exit 1 naming the first failure")
    .argument('<bundle.tar.gz>', 'bundle written by `a2rl export`')
    .option('--pubkey <file>', "the signer's public key (PEM) obtained independently: the bundled key must be this one")
    .option('--trust-embedded-key', "without --pubkey and a trusted key: accept the key inside the bundle unchecked (a re-signed bundle then passes)")
    .option('--max-inflated <bytes>', 'refuse a bundle that inflates to more than this (e.g. 8G; default 64× the file size, at least 64 MiB)')
    .option('--json', 'print the result, with every failure, as one JSON object')
    .action(async (file: string, opts: { pubkey?: string; trustEmbeddedKey?: boolean; maxInflated?: string; json?: boolean }) => {
      const [{ verifyBundle, describeFailure }, { listTrustedKeys }, { existsSync, readFileSync, statSync }] = await Promise.all([
        import('../../modules/audit/bundle/index.js'),
        import('../../modules/audit/trusted-keys.js'),
        import('node:fs'),
      ]);
      if (!existsSync(file) || !statSync(file).isFile()) throw new Error(`no bundle file ${file}`);
      if (opts.pubkey !== undefined && opts.trustEmbeddedKey) throw new Error('give --pubkey <file> or --trust-embedded-key, not both');
      let publicKeyPem: string | undefined;
      if (opts.pubkey !== undefined) {
        try {
          publicKeyPem = readFileSync(opts.pubkey, 'utf8');
        } catch (err) {
          throw new Error(`cannot read --pubkey ${opts.pubkey}: ${(err as Error).message}`);
        }
      }
      // Without --pubkey: this ledger's key and those added with `a2rl keys trust` (nothing is created).
      const trustedKeys = publicKeyPem === undefined ? listTrustedKeys(loadConfig().home).map((k) => k.publicKeyPem) : undefined;
      const maxInflatedBytes = opts.maxInflated === undefined ? undefined : byteCount('--max-inflated', opts.maxInflated);
      const result = await verifyBundle(file, { publicKeyPem, trustedKeys, trustEmbeddedKey: opts.trustEmbeddedKey, maxInflatedBytes });
      if (result.ok && result.keyTrust === 'embedded') {
        process.stderr.write(`note: signed by key ${result.keyId}, the key inside the bundle, which was not checked against a trust list (--trust-embedded-key): a bundle re-signed with another key passes too; pin the signer's key with --pubkey <file> or \`a2rl keys trust <file>\`\n`);
      }
      // Notes (reports of another renderer version, not re-rendered) are inert lines; --json carries them in `notes`.
      for (const note of result.notes) process.stderr.write(`note: ${note}\n`);
      if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify({ ...result, failures: result.failures.map((f) => ({ ...f, text: describeFailure(f) })) })}\n`));
      // The verdict is ours and last: the failure is one inert line (describeFailure) after "failed
      // verification:", so no bundle text can break the line, move the cursor or recolour it.
      if (!result.ok) {
        const more = result.failures.length > 1 ? ` (and ${result.failures.length - 1} more${opts.json ? '' : '; --json lists all'})` : '';
        throw new Error(`bundle ${inertLine(file)} failed verification: ${describeFailure(result.failures[0])}${more}`);
      }
      if (!opts.json) {
        const omitted = result.omittedBlobs ? ` (${result.omittedBlobs} checkpoint files not included)` : '';
        const key = { pubkey: 'the --pubkey key', trusted: 'a trusted key', embedded: 'the embedded key, unchecked', untrusted: '' }[result.keyTrust!];
        const checked = result.reportsChecked ? 'chain, proofs, artifacts and reports verified' : 'chain, proofs and artifacts verified, reports not re-rendered (another renderer version)';
        process.stdout.write(`OK ${inertLine(file)}: run ${inertLine(result.runId ?? '')}, ${result.events} events, ${result.heads} signed tree heads, ${result.blobs} blobs${omitted}; ${checked}; signed by key ${result.keyId} (${key})\n`);
      }
    });
}

/** Size and sha256 of a written file (`export --json`), read as a stream. */
async function fileDigest(file: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  await pipeline(createReadStream(file), async (chunks: AsyncIterable<Buffer>) => {
    for await (const chunk of chunks) {
      bytes += chunk.length;
      hash.update(chunk);
    }
  });
  return { bytes, sha256: hash.digest('hex') };
}

/** `8G`, `512MiB`, `1048576`: a byte count (K, M, G, T are powers of 1024). */
function byteCount(option: string, value: string): number {
  const m = /^(\d+)\s*([kmgt]?)(i?b)?$/i.exec(value.trim());
  const n = m ? Number(m[1]) * 1024 ** ' kmgt'.indexOf((m[2] || ' ').toLowerCase()) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${option} takes a size in bytes such as 8G, 512M or 1048576, got "${value}"`);
  return n;
}
