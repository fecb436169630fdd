import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { LedgerModule } from '../ledger/ledger.module.js';
import { AccessControl } from './access-control.js';
import { AccessController } from './access.controller.js';
import { AccessGuard } from './access.guard.js';
import { AccessLedger } from './access-ledger.js';

/**
 * Who may look (docs/security.md): API tokens and the access stream, the global guard (required
 * beyond loopback) and sign-in. The operator's actions over HTTP (export, cancel, regrade, verify) are
 * modules/run-actions/, which records them through this module's AccessControl. Needs the global
 * adapters (EVENT_STORE, CLOCK, SETTINGS).
 */
@Module({
  imports: [LedgerModule],
  controllers: [AccessController],
  providers: [AccessLedger, AccessControl, { provide: APP_GUARD, useClass: AccessGuard }],
  exports: [AccessLedger, AccessControl],
})
export class AccessModule {}
