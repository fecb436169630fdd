import { BadRequestException, Controller, Get, HttpException, HttpStatus, Inject, NotFoundException, Param, Query } from '@nestjs/common';
import { ApiBadRequestResponse, ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { InvalidReplayPointError, ReplayError, ReplayIntegrityError, SeqOutOfRangeError, TimeBeforeRunError, UnknownRunError } from '../replay/errors.js';
import { parseReplayPoint, ReplayService, type ReplayPoint } from '../replay/replay.service.js';
import { ReplayFileQuery, ReplayTreeQuery } from './dashboard.dto.js';
import { readFileContent } from './file-content.js';
import { checkId } from './path-params.js';

/** A workspace path as the ledger records them: relative, `/`-separated, no empty, `.` or `..` segment. */
function checkPath(path: string): string {
  const segments = path.split('/');
  if (/[\0-\x1f]/.test(path) || segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw new BadRequestException('path must be a workspace-relative file path (no leading "/", no "." or ".." segments)');
  }
  return path;
}

/** The replay page: a run's workspace file tree at any event, and a file's content and diff to its previous revision. */
@ApiTags('dashboard')
@ApiBadRequestResponse({ description: 'a bad run id, `at` or `path`' })
@ApiNotFoundResponse({ description: 'no such run, or no such file at that point' })
@Controller('runs/:id/replay')
export class ReplayController {
  constructor(
    private readonly replay: ReplayService,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  @Get('tree')
  @ApiOkResponse({ description: '{at: {seq, time, type}, files: [{path, size, sha256, seq}]} right after the event `at` names, sorted by path' })
  async tree(@Param('id') id: string, @Query() q: ReplayTreeQuery) {
    return answer(async () => {
      const { at, files } = await this.replay.state(id, await this.point(id, q.at));
      const list = [...files.values()].sort((a, b) => (a.path < b.path ? -1 : 1)).map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, seq: f.seq }));
      return { at: { seq: at.seq, time: at.occurredAt, type: at.type }, files: list };
    });
  }

  @Get('file')
  @ApiOkResponse({ description: '{path, at: {seq, time}, seq (the event that wrote it), size, sha256, binary, content (UTF-8, at most 1 MiB) | null, truncated, previous: {seq} | null, diff (unified hunks to the previous revision) | null}' })
  async file(@Param('id') id: string, @Query() q: ReplayFileQuery) {
    const path = checkPath(q.path);
    return answer(async () => {
      const { at, files } = await this.replay.state(id, await this.point(id, q.at));
      const file = files.get(path);
      if (!file) throw new NotFoundException(`no file "${path}" in run ${id}'s workspace at seq ${at.seq}`);
      const shown = await readFileContent(this.artifacts, file);
      // The revision before: the change the event that wrote this revision made to the path.
      const delta = file.seq > 0 ? (await this.replay.diff(id, file.seq - 1, file.seq)).files.find((f) => f.path === path) : undefined;
      const before = delta?.before ?? null;
      return {
        path, at: { seq: at.seq, time: at.occurredAt }, seq: file.seq, size: file.size, sha256: file.sha256, ...shown,
        previous: before ? { seq: before.seq, sha256: before.sha256, size: before.size } : null,
        diff: before ? delta!.diff : null,
      };
    });
  }

  /** The `at` given, else the run's last event. */
  private async point(id: string, at: string | undefined): Promise<ReplayPoint> {
    checkId('run', id);
    if (at !== undefined) return parseReplayPoint(at);
    const last = await this.store.streamRevision(streamName(id));
    if (last === null) throw new UnknownRunError(id);
    return Number(last);
  }
}

/** Replay's errors as HTTP answers: unknown run 404, a point out of range or malformed 400, unreproducible content 500. */
async function answer<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UnknownRunError) throw new NotFoundException(error.message);
    if (error instanceof SeqOutOfRangeError || error instanceof TimeBeforeRunError || error instanceof InvalidReplayPointError) throw new BadRequestException(error.message);
    if (error instanceof ReplayIntegrityError) throw new HttpException({ statusCode: 500, message: error.message, error: 'ReplayIntegrityError' }, HttpStatus.INTERNAL_SERVER_ERROR);
    if (error instanceof ReplayError) throw new BadRequestException(error.message);
    throw error;
  }
}
