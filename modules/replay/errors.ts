/** Errors of `a2rl replay`; each message names the run and what to do about it. */
export class ReplayError extends Error {
  override readonly name: string = 'ReplayError';
}

export class UnknownRunError extends ReplayError {
  override readonly name = 'UnknownRunError';
  constructor(readonly runId: string) {
    super(`no run "${runId}" in the ledger`);
  }
}

export class SeqOutOfRangeError extends ReplayError {
  override readonly name = 'SeqOutOfRangeError';
  constructor(readonly runId: string, readonly seq: number, readonly lastSeq: number) {
    super(`seq ${seq} is out of range for run ${runId}: its events are seq 0..${lastSeq}`);
  }
}

export class TimeBeforeRunError extends ReplayError {
  override readonly name = 'TimeBeforeRunError';
  constructor(readonly runId: string, readonly time: string, readonly firstEventAt: string) {
    super(`${time} is before run ${runId} began (its first event is at ${firstEventAt})`);
  }
}

/** A replay point that is neither a seq (non-negative integer) nor an ISO 8601 date-time. */
export class InvalidReplayPointError extends ReplayError {
  override readonly name = 'InvalidReplayPointError';
  constructor(readonly text: string) {
    super(`"${text}" is neither a seq (0, 1, …) nor an ISO 8601 time with a zone (e.g. 2026-01-01T12:00:00Z or …+02:00)`);
  }
}

export class OutDirNotEmptyError extends ReplayError {
  override readonly name = 'OutDirNotEmptyError';
  constructor(readonly outDir: string) {
    super(`output directory ${outDir} is not empty; choose an empty or new directory, or pass --force to replace its contents`);
  }
}

/** The recorded content cannot be reproduced: a blob is missing or differs from its sha256, or a path is unsafe. */
export class ReplayIntegrityError extends ReplayError {
  override readonly name = 'ReplayIntegrityError';
}
