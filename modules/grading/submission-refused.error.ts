import type { SubmissionRejected } from '../ledger/events/catalog.js';

export type RefusalStatus = 400 | 403 | 404 | 409 | 413 | 422;

/** A run limit the refused submission went over (recorded as LimitReached before SubmissionRejected). */
export interface ExceededLimit {
  limit: string;
  value: number;
  max: number;
  observedAt: string;
}

/** A submission refused before grading: answered with `status` and recorded as SubmissionRejected. */
export class SubmissionRefusedError extends Error {
  override readonly name = 'SubmissionRefusedError';
  constructor(
    readonly status: RefusalStatus,
    readonly reasonClass: SubmissionRejected['reasonClass'],
    message: string,
    readonly limit?: ExceededLimit,
  ) {
    super(message);
  }
}

export const invalidPath = (status: RefusalStatus, message: string) => new SubmissionRefusedError(status, 'invalid_path', message);
export const invalidCheckpoint = (message: string) => new SubmissionRefusedError(422, 'invalid_checkpoint', message);
/** Over a size limit of the run: 413 (Content Too Large), the reason class of any unacceptable checkpoint. */
export const overLimit = (message: string, limit: ExceededLimit) => new SubmissionRefusedError(413, 'invalid_checkpoint', message, limit);
