import type { SubmissionRejected } from '../ledger/events/catalog.js';

export type RefusalStatus = 400 | 403 | 404 | 409 | 422;

/** A submission refused before grading: answered with `status` and recorded as SubmissionRejected. */
export class SubmissionRefusedError extends Error {
  override readonly name = 'SubmissionRefusedError';
  constructor(
    readonly status: RefusalStatus,
    readonly reasonClass: SubmissionRejected['reasonClass'],
    message: string,
  ) {
    super(message);
  }
}

export const invalidPath = (status: RefusalStatus, message: string) => new SubmissionRefusedError(status, 'invalid_path', message);
export const invalidCheckpoint = (message: string) => new SubmissionRefusedError(422, 'invalid_checkpoint', message);
