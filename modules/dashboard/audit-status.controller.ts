import { Controller, Get, Inject, NotFoundException, Param } from '@nestjs/common';
import { ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { createPublicKey } from 'node:crypto';
import { fingerprintOf } from '../audit/trusted-keys.js';
import { loadPublicKey } from '../ledger/tree-head.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { treeHeadStatus } from './audit-status.js';
import { checkId } from './path-params.js';
import { Verifications } from './verifications.js';

/** This ledger's signing key, public part: PEM, key id and `sha256:<hex>` fingerprint; null before the first run made one. */
function ledgerKey(home: string) {
  const key = loadPublicKey(home);
  if (!key) return null;
  return { keyId: key.keyId, fingerprint: `sha256:${fingerprintOf(createPublicKey(key.publicKeyPem))}`, publicKeyPem: key.publicKeyPem };
}

/** The audit page: a run's signed tree heads (checked), its last verification, and the key they are checked with. */
@ApiTags('dashboard')
@Controller()
export class AuditStatusController {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly verifications: Verifications,
  ) {}

  @Get('runs/:id/audit')
  @ApiOkResponse({ description: '{signedHeads, lastHead: {seq, time, treeSize, keyId, valid} | null, keyId, keyFingerprint, lastVerified: {time, ok, actor} | null}; valid: the head\'s root is that of the events before it and its signature verifies with this ledger\'s key' })
  @ApiNotFoundResponse({ description: 'no such run' })
  async audit(@Param('id') id: string) {
    checkId('run', id);
    const key = ledgerKey(this.settings.home);
    const heads = await treeHeadStatus(this.store, id, key?.publicKeyPem ?? null);
    if (!heads) throw new NotFoundException(`no run "${id}" in the ledger`);
    return { ...heads, keyId: key?.keyId ?? null, keyFingerprint: key?.fingerprint ?? null, lastVerified: await this.verifications.lastOf(id) };
  }

  @Get('keys/public')
  @ApiOkResponse({ description: "{keyId, fingerprint: 'sha256:<hex>', publicKeyPem}: the key this ledger signs tree heads with (what `a2rl keys show` prints)" })
  @ApiNotFoundResponse({ description: 'no signing key yet (the first run creates it)' })
  publicKey() {
    const key = ledgerKey(this.settings.home);
    if (!key) throw new NotFoundException('this ledger has no signing key yet: the first run creates one (or `a2rl keys init`)');
    return key;
  }
}
