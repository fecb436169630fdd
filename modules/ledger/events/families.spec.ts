import { describe, expect, it } from '@jest/globals';
import { ACCESS_EVENTS } from './access-events.js';
import { CAMPAIGN_EVENTS } from './campaign-events.js';
import { EVENT_CATALOG, EVENT_TYPES, STREAM_OF_TYPE } from './catalog.js';
import { ACCESS_EVENT_TYPES, CAMPAIGN_EVENT_TYPES } from './ids.js';
import { RUN_EVENTS } from './run-events.js';

// The catalog is the merge of three family maps; stream membership is read from them, nowhere else.
describe('event families', () => {
  const families = { run: RUN_EVENTS, campaign: CAMPAIGN_EVENTS, access: ACCESS_EVENTS };

  it('share no type, and together are the catalog, in its order', () => {
    const all = Object.values(families).flatMap((f) => Object.keys(f));
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual(EVENT_TYPES);
    for (const [type, entry] of Object.entries(EVENT_CATALOG)) expect(Object.values(families).some((f) => (f as Record<string, unknown>)[type] === entry)).toBe(true);
  });

  it('give each type its stream, and the stream sets the stores check', () => {
    for (const [name, family] of Object.entries(families)) for (const type of Object.keys(family)) expect(STREAM_OF_TYPE[type as keyof typeof STREAM_OF_TYPE]).toBe(name);
    expect([...CAMPAIGN_EVENT_TYPES]).toEqual(Object.keys(CAMPAIGN_EVENTS));
    expect([...ACCESS_EVENT_TYPES]).toEqual(Object.keys(ACCESS_EVENTS));
    expect(Object.keys(RUN_EVENTS)).toHaveLength(26);
  });
});
