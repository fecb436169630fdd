// Type-level checks (apart from api-types.ts, whose every declaration becomes a schema): the
// type-check fails when a spelled-out shape there parts from what the server sends.
import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { LedgerEvent, RunSummary } from './api-types.js';
import type { RunSummaryItem } from './run-summary.js';

type SameType<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
export type ApiTypeChecks = [Holds<SameType<RunSummary, RunSummaryItem>>, Holds<A2rlEvent extends Omit<LedgerEvent, 'data'> & { data: object } ? true : false>];
