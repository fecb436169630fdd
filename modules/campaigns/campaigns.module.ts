import { Module } from '@nestjs/common';
import { LedgerModule } from '../ledger/ledger.module.js';
import { CampaignLedger } from './campaign-ledger.js';
import { CampaignService } from './campaign.service.js';

/**
 * Campaigns: the matrix task × agent × driver × seed as one job per cell, event-sourced in the
 * campaign's stream. The queue adapters (in-process, BullMQ) are chosen by the commands.
 */
@Module({
  imports: [LedgerModule],
  providers: [CampaignLedger, CampaignService],
  exports: [CampaignLedger, CampaignService],
})
export class CampaignsModule {}
