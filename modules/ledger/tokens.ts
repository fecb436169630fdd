/** Injection tokens for the ledger's ports (interfaces have no runtime identity in TypeScript). */
export const EVENT_STORE = Symbol('EVENT_STORE');
export const CLOCK = Symbol('CLOCK');

/** The harness clock; injected so tests can fix time. Read once per event, then recorded. */
export type Clock = () => Date;
