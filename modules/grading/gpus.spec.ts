import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { deviceLocks, detectAvailableGpus, GpuRequestError, gradingDevice } from './gpus.js';

describe('detectAvailableGpus', () => {
  it("takes CUDA_VISIBLE_DEVICES as the paper's server does, sorted by index, UUIDs after", () => {
    expect(detectAvailableGpus({ CUDA_VISIBLE_DEVICES: '3, 1,,10' }, '/nonexistent')).toEqual(['1', '3', '10']);
    expect(detectAvailableGpus({ CUDA_VISIBLE_DEVICES: 'GPU-ab12,0' }, '/nonexistent')).toEqual(['0', 'GPU-ab12']);
    expect(detectAvailableGpus({ CUDA_VISIBLE_DEVICES: '' }, '/nonexistent')).toEqual([]);
  });

  it('counts /dev/nvidia<N> when CUDA_VISIBLE_DEVICES is unset, and finds none without them', async () => {
    const dev = await mkdtemp(path.join(os.tmpdir(), 'a2rl-dev-'));
    try {
      expect(detectAvailableGpus({}, dev)).toEqual([]);
      for (const name of ['nvidia0', 'nvidia1', 'nvidiactl', 'nvidia-uvm']) await writeFile(path.join(dev, name), '');
      expect(detectAvailableGpus({}, dev)).toEqual(['0', '1']);
    } finally {
      await rm(dev, { recursive: true, force: true });
    }
  });
});

describe('gradingDevice', () => {
  const four = ['0', '1', '2', '3'];
  const refusal = (gpu: unknown, available: string[]) => {
    try {
      gradingDevice(gpu as string, available);
      return null;
    } catch (err) {
      return err instanceof GpuRequestError ? { message: err.message, available: err.availableGpus } : 'other error';
    }
  };

  it('defaults to the first available GPU, or cpu on a machine without one', () => {
    expect(gradingDevice(undefined, four)).toBe('0');
    expect(gradingDevice(null, ['2', '3'])).toBe('2');
    expect(gradingDevice(undefined, [])).toBe('cpu');
  });

  it('normalises lists, indices and cuda: names; cpu is always allowed', () => {
    expect(gradingDevice('3,2', four)).toBe('2,3');
    expect(gradingDevice(' 2 , 3, 3, ', four)).toBe('2,3');
    expect(gradingDevice(1, four)).toBe('1');
    expect(gradingDevice('cuda:1,cuda:0', four)).toBe('0,1');
    expect(gradingDevice('CPU', [])).toBe('cpu');
  });

  it('refuses GPUs that are not available, empty lists and cpu mixed with GPUs, naming the available ones', () => {
    expect(refusal('2,9', four)).toEqual({ message: expect.stringMatching(/^GPU 9 not available: the available GPUs are 0,1,2,3/), available: four });
    expect(refusal(0, [])).toEqual({ message: expect.stringMatching(/GPU 0 not available: no GPU is available/), available: [] });
    expect(refusal(' , ', four)).toEqual({ message: expect.stringMatching(/gpu is empty/), available: four });
    expect(refusal('cpu,1', four)).toEqual({ message: expect.stringMatching(/cannot mix "cpu"/), available: four });
  });

  it('locks each GPU of a list, cpu as one device', () => {
    expect(deviceLocks('2,3')).toEqual(['2', '3']);
    expect(deviceLocks('cpu')).toEqual(['cpu']);
  });
});
