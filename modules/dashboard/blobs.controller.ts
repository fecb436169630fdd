import { Controller, Get, HttpException, HttpStatus, Inject, NotFoundException, Param, Query } from '@nestjs/common';
import { ApiBadRequestResponse, ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { RunSource } from '../query/run-source.js';
import { ReplayIntegrityError } from '../replay/errors.js';
import { BlobQuery, OutputQuery } from './dashboard.dto.js';
import { blobParts, pickPart, readBlob } from './event-blobs.js';
import { checkId } from './path-params.js';

/** Output events read per page, and the text one page carries at most (a page stops after the chunk that passes it). */
const OUTPUT_EVENTS_PER_PAGE = 200;
const OUTPUT_BYTES_PER_PAGE = 256 * 1024;
const OUTPUT_TYPES = new Set(['AgentOutput'] as const);

/**
 * The blobs events reference, for the dashboard: a model call's request and response, an output
 * chunk, a file revision, a grading's items — as stored (redacted before they were stored), read at
 * most 1 MiB and checked against the ledger's sha256. The page renders them as text, never as HTML.
 */
@ApiTags('dashboard')
@ApiBadRequestResponse({ description: 'a bad run id, seq or part' })
@ApiNotFoundResponse({ description: 'no such run or event, or the event has no such blob' })
@Controller('runs/:id')
export class BlobsController {
  constructor(
    private readonly source: RunSource,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
  ) {}

  @Get('blobs/:seq')
  @ApiOkResponse({ description: '{runId, seq, type, part, parts: [{part, sha256, size}], sha256, size, format: json|sse|text|binary|none, binary, content (UTF-8, at most 1 MiB) | null, truncated}' })
  async blob(@Param('id') id: string, @Param('seq') seqText: string, @Query() q: BlobQuery) {
    checkId('run', id);
    if (!/^\d{1,15}$/.test(seqText)) throw new HttpException(`seq must be an event number (0, 1, …), not ${JSON.stringify(seqText.slice(0, 40))}`, HttpStatus.BAD_REQUEST);
    const seq = Number(seqText);
    const page = await this.source.page(id, { afterSeq: seq - 1, limit: 1 });
    if (!page) throw new NotFoundException(`run "${id}" has no events`);
    const event = page.find((e) => e.seq === seq);
    if (!event) throw new NotFoundException(`run ${id} has no event ${seq}`);
    const parts = blobParts(event);
    const part = pickPart(parts, q.part);
    if (!part) {
      throw new NotFoundException(parts.length ? `event ${seq} (${event.type}) has no blob "${q.part}"; it has ${parts.map((p) => p.part).join(', ')}` : `event ${seq} (${event.type}) references no blob`);
    }
    const shown = await this.read(seq, part);
    return { runId: id, seq, type: event.type, part: part.part, parts, sha256: part.sha256, size: part.size, ...shown };
  }

  @Get('output')
  @ApiOkResponse({ description: "the agent's own output (AgentOutput chunks) after after_seq: {runId, chunks: [{seq, stream, observedAt, text | null, binary, truncated}], lastSeq, more}; next page: after_seq = lastSeq" })
  async output(@Param('id') id: string, @Query() q: OutputQuery) {
    checkId('run', id);
    const events = await this.source.page(id, { afterSeq: q.after_seq, limit: OUTPUT_EVENTS_PER_PAGE, types: OUTPUT_TYPES });
    if (!events) throw new NotFoundException(`run "${id}" has no events`);
    const chunks: { seq: number; stream: string; observedAt: string | null; text: string | null; binary: boolean; truncated: boolean }[] = [];
    let bytes = 0;
    let lastSeq = q.after_seq;
    let more = events.length === OUTPUT_EVENTS_PER_PAGE;
    for (const event of events) {
      if (bytes >= OUTPUT_BYTES_PER_PAGE) {
        more = true;
        break;
      }
      lastSeq = event.seq;
      const data = event.data as { stream?: string; observedAt?: string };
      if (q.stream && data.stream !== q.stream) continue;
      const part = pickPart(blobParts(event), 'chunk');
      if (!part) continue;
      const shown = await this.read(event.seq, part);
      bytes += part.size;
      chunks.push({ seq: event.seq, stream: String(data.stream ?? 'stdout'), observedAt: data.observedAt ?? null, text: shown.content, binary: shown.binary, truncated: shown.truncated });
    }
    return { runId: id, chunks, lastSeq, more };
  }

  private async read(seq: number, part: Parameters<typeof readBlob>[2]) {
    try {
      return await readBlob(this.artifacts, seq, part);
    } catch (error) {
      if (error instanceof ReplayIntegrityError) throw new HttpException({ statusCode: 500, message: error.message, error: 'IntegrityError' }, HttpStatus.INTERNAL_SERVER_ERROR);
      throw error;
    }
  }
}
