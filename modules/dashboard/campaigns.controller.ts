import { Controller, Get, NotFoundException, Param, Sse } from '@nestjs/common';
import { ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Observable } from 'rxjs';
import type { CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { CampaignLedger } from '../campaigns/campaign-ledger.js';
import { CampaignFeed } from './campaign-feed.js';
import { campaignDetail, campaignItem } from './campaign-view.js';
import { checkId } from './path-params.js';
import type { SseMessage } from './run-stream.js';

const ended = (p: CampaignProgress) => p.status === 'completed' || p.status === 'cancelled';

/** Campaigns for the dashboard: the list, one campaign's cells, and its progress live. */
@ApiTags('dashboard')
@Controller('campaigns')
export class CampaignsController {
  constructor(
    private readonly ledger: CampaignLedger,
    private readonly feed: CampaignFeed,
  ) {}

  @Get()
  @ApiOkResponse({ description: '{items: [{campaignId, state, cells, done, running, failed, pending, cancelled, scheduledAt, updatedAt}]} in the order scheduled' })
  async list() {
    const all = await this.ledger.list();
    return { items: all.filter((p) => p.scheduled !== null).map(campaignItem) };
  }

  @Get(':id')
  @ApiOkResponse({ description: 'the campaign: counts, matrix and per cell {cell: {index, task, agent, driver, seed, repeat, gpus}, state, runId, attempts, runs, best, baseline, reason, worker}' })
  @ApiNotFoundResponse({ description: 'no such campaign' })
  async get(@Param('id') id: string) {
    return campaignDetail(await this.progress(id));
  }

  @Sse(':id/live')
  @ApiOkResponse({ description: 'text/event-stream: `progress` (as GET /campaigns/:id) now and on every change; `end` once the campaign has completed or was cancelled' })
  @ApiNotFoundResponse({ description: 'no such campaign' })
  async live(@Param('id') id: string): Promise<Observable<SseMessage>> {
    await this.progress(id);
    return new Observable<SseMessage>((subscriber) => {
      let stopped = false;
      let unwatch: (() => void) | undefined;
      let revision = -2;
      const send = async () => {
        const p = await this.ledger.read(id);
        if (stopped || p.revision === revision) return;
        revision = p.revision;
        subscriber.next({ type: 'progress', id: String(p.revision), data: campaignDetail(p) });
        if (ended(p)) {
          subscriber.next({ type: 'end', data: { campaignId: id } });
          subscriber.complete();
        }
      };
      // Reads are chained, so progress goes out in revision order.
      let chain = Promise.resolve();
      const changed = () => {
        chain = chain.then(send).catch((error: unknown) => subscriber.error(error));
      };
      this.feed
        .watch((campaignId) => campaignId === id && changed(), () => subscriber.complete())
        .then((stop) => {
          unwatch = stop;
          if (stopped) stop();
          else changed();
        })
        .catch((error: unknown) => subscriber.error(error));
      return () => {
        stopped = true;
        unwatch?.();
      };
    });
  }

  private async progress(id: string): Promise<CampaignProgress> {
    const p = await this.ledger.read(checkId('campaign', id));
    if (p.scheduled === null) throw new NotFoundException(`no campaign "${id}" in the ledger`);
    return p;
  }
}
