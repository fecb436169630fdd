import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';

/** `a2rl keys`: the ledger's signing key and the public keys verify-bundle trusts (registered with the audit commands). */
export function registerKeysCommands(program: Command): void {
  const keys = program
    .command('keys')
    .description("the ledger's Ed25519 signing key, under A2RL_HOME/keys (never in a workspace or a bundle), and the public keys verify-bundle trusts (A2RL_HOME/keys/trusted)");
  keys
    .command('init')
    .description('create the signing key (refuses to replace an existing one; the first run creates it too)')
    .action(async () => {
      const { initSigningKey, keysDir } = await import('../../modules/ledger/tree-head.js');
      const { home } = loadConfig();
      const key = initSigningKey(home);
      process.stdout.write(`created signing key ${key.keyId} in ${keysDir(home)}\n${key.publicKeyPem}`);
    });
  keys
    .command('show')
    .description('print the public key (PEM) and its key id')
    .action(async () => {
      const { loadPublicKey, keysDir } = await import('../../modules/ledger/tree-head.js');
      const { home } = loadConfig();
      const key = loadPublicKey(home);
      if (!key) throw new Error(`no signing key in ${keysDir(home)}; create one with \`a2rl keys init\``);
      process.stdout.write(`${key.publicKeyPem}key id: ${key.keyId}\n`);
    });
  keys
    .command('trust')
    .description("trust a signer's public key for verify-bundle (PEM, e.g. what `a2rl keys show` prints on the signer's host); prints its key id and fingerprint")
    .argument('<file>', 'file holding the public key (PEM)')
    .action(async (file: string) => {
      const [{ trustKey, trustedKeysDir }, { readFileSync }] = await Promise.all([import('../../modules/audit/trusted-keys.js'), import('node:fs')]);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new Error(`cannot read key file ${file}: ${(err as Error).message}`);
      }
      const { home } = loadConfig();
      const { key, added } = trustKey(home, text, file);
      process.stdout.write(`${added ? 'trusted' : 'already trusted'}: key id ${key.keyId}, fingerprint sha256:${key.fingerprint}${added ? ` (in ${trustedKeysDir(home)})` : key.source === 'ledger' ? " (this ledger's own key)" : ''}\n`);
    });
  keys
    .command('trusted')
    .description("list the keys verify-bundle accepts without --pubkey: this ledger's own key and those added with `a2rl keys trust`")
    .option('--json', 'one JSON array of {keyId, fingerprint, source, file, publicKeyPem}')
    .action(async (opts: { json?: boolean }) => {
      const { listTrustedKeys } = await import('../../modules/audit/trusted-keys.js');
      const list = listTrustedKeys(loadConfig().home);
      if (opts.json) process.stdout.write(`${JSON.stringify(list)}\n`);
      else if (!list.length) process.stdout.write('no trusted keys: add one with `a2rl keys trust <file>`\n');
      else for (const k of list) process.stdout.write(`${k.keyId}  sha256:${k.fingerprint}  ${k.source === 'ledger' ? 'ledger (this ledger\'s signing key)' : 'trusted'}\n`);
    });
  keys
    .command('untrust')
    .description('stop trusting a key added with `a2rl keys trust` (the ledger\'s own key stays trusted)')
    .argument('<keyId|fingerprint>', 'key id (16 hex digits) or full sha256 fingerprint, as `a2rl keys trusted` lists them')
    .action(async (id: string) => {
      const { untrustKey } = await import('../../modules/audit/trusted-keys.js');
      const key = untrustKey(loadConfig().home, id.replace(/^sha256:/, ''));
      process.stdout.write(`no longer trusted: key id ${key.keyId}, fingerprint sha256:${key.fingerprint}\n`);
    });
}
