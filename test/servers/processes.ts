import { execFileSync } from 'node:child_process';

/** Live (non-zombie) processes whose command line mentions the marker: what a test expects gone after stop(). */
export function processesWith(marker: string): string[] {
  const out = execFileSync('ps', ['-eo', 'stat=,args='], { encoding: 'utf8' });
  return out.split('\n').filter((line) => line.includes(marker) && !line.trim().startsWith('Z') && !line.includes('ps -eo'));
}

/** The error a promise rejects with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}
