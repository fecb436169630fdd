import { Controller, Headers, Inject, NotFoundException, Param, Query, Sse } from '@nestjs/common';
import { ApiNotFoundResponse, ApiOkResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { Observable } from 'rxjs';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { LiveQuery } from './dashboard.dto.js';
import { checkId } from './path-params.js';
import { RunsBroadcast } from './runs-broadcast.js';
import { RunStream, type SseMessage } from './run-stream.js';

/** Server-Sent Events for the dashboard's live pages. */
@ApiTags('dashboard')
@Controller()
export class LiveController {
  constructor(
    private readonly broadcast: RunsBroadcast,
    private readonly runStream: RunStream,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  @Sse('live')
  @ApiProduces('text/event-stream')
  @ApiOkResponse({ description: '`run`: the run\'s GET /runs item whenever it changed (at most ~4 a second per run); `campaign`: {campaignId} whenever a campaign changed' })
  live(): Observable<SseMessage> {
    return this.broadcast.stream();
  }

  @Sse('runs/:id/live')
  @ApiProduces('text/event-stream')
  @ApiOkResponse({ description: '`event`: each event with seq > after_seq (recorded, then live; as GET /runs/:id/events items, SSE id = seq); `status`: {state, budgetLeftMs, submissions, best, baseline, processes, lastSeq} after each batch; `end` once the run is sealed' })
  @ApiNotFoundResponse({ description: 'no such run' })
  async runLive(@Param('id') id: string, @Query() q: LiveQuery, @Headers('last-event-id') lastEventId?: string): Promise<Observable<SseMessage>> {
    checkId('run', id);
    if ((await this.store.streamRevision(streamName(id))) === null) throw new NotFoundException(`no run "${id}" in the ledger`);
    // An EventSource that reconnects says where it was: the seq of the last event it received.
    const resumed = lastEventId !== undefined && /^\d{1,15}$/.test(lastEventId) ? Number(lastEventId) : null;
    return this.runStream.events(id, Math.max(q.after_seq, resumed ?? -1));
  }
}
