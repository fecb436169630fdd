import os from 'node:os';
import { describe, expect, it } from '@jest/globals';
import { emptyCampaign, evolveCampaign, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { testPlan } from '../../projections/campaign-progress/testing/campaign-plan.js';
import { decider, type Fact } from '../../test/testing/given.js';
import type { WorkerInfo } from '../ledger/events/catalog.js';
import { decideCampaign, type CampaignCommand } from './campaign.js';
import { liveHolderHere, resumeRefusal } from './resume-rules.js';

// When `a2rl campaign resume` may take a campaign up: the rules that used to live in the command.

const ID = 'cmp-20261124100000-abcdef';
const campaign = decider<CampaignProgress, CampaignCommand>({ stream: 'campaign', id: ID, initial: emptyCampaign(ID), evolve: evolveCampaign, decide: decideCampaign });
const scheduled = (queue: 'local' | 'redis'): Fact[] => [
  { type: 'CampaignScheduled', data: { ...testPlan(2, 1), queue, ...(queue === 'redis' ? { concurrency: undefined } : {}) } },
  { type: 'RunRequested', data: { cell: 0, attempt: 1 } },
  { type: 'RunRequested', data: { cell: 1, attempt: 1 } },
];
const worker = (host: string, pid: number): WorkerInfo => ({ id: `${host}-${pid}-abcd`, host, pid, gpus: [] });
const assigned = (w: WorkerInfo): Fact => ({ type: 'RunAssigned', data: { cell: 0, attempt: 1, runId: 'r-0-1', worker: w, gpus: [] } });
const here = (alive: number[]) => ({ pid: 1000, alive: (pid: number) => alive.includes(pid) });

describe('campaign resume rules', () => {
  it('refuses a cancelled campaign whatever the queue', async () => {
    const cancelled = await campaign.given(...scheduled('local'), { type: 'CampaignCancelled', data: {} }).state();
    expect(resumeRefusal(cancelled, 'local', here([]))).toBe(`campaign ${ID} was cancelled; there is nothing to resume`);
    expect(resumeRefusal(cancelled, 'redis', here([]))).toMatch(/was cancelled/);
  });

  it('sends an open campaign of a Redis queue back to its queue, and lets a completed one be taken up anywhere', async () => {
    const open = await campaign.given(...scheduled('redis')).state();
    expect(resumeRefusal(open, 'local', here([]))).toBe(`campaign ${ID} runs on a Redis queue: resume it with --queue redis://…`);
    expect(resumeRefusal(open, 'redis', here([]))).toBeNull();
  });

  it('refuses a campaign whose embedded scheduler still lives on this host, and takes one whose holder is gone, elsewhere or this process', async () => {
    const host = os.hostname();
    const held = await campaign.given(...scheduled('local'), assigned(worker(host, 4242))).state();
    expect(liveHolderHere(held, here([4242]))).toBe(4242);
    expect(resumeRefusal(held, 'local', here([4242]))).toBe(`campaign ${ID} is still being run by process 4242 on this host (\`a2rl campaign status ${ID} --follow\` follows it)`);
    expect(resumeRefusal(held, 'local', here([]))).toBeNull(); // the holder died: its cell is settled as lost
    const mine = await campaign.given(...scheduled('local'), assigned(worker(host, 1000))).state();
    expect(liveHolderHere(mine, here([1000]))).toBeNull();
    const elsewhere = await campaign.given(...scheduled('local'), assigned(worker(`not-${host}`, 4242))).state();
    expect(liveHolderHere(elsewhere, here([4242]))).toBeNull();
  });
});
