import { describe, expect, it } from '@jest/globals';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { renderReport, REPORT_FORMATS, seqRanges } from './render.js';
import { memoryBlobs, sampleRun, TRAIN_V1 } from '../../projections/run-analysis/testing/run-fixture.js';

describe('renderReport', () => {
  it('renders the same bytes twice in every format (no clock, fixed number formatting)', async () => {
    for (const format of REPORT_FORMATS) {
      const first = await renderReport(sampleRun(), format);
      const second = await renderReport(sampleRun(), format);
      expect(second).toBe(first);
      expect(first.length).toBeGreaterThan(500);
    }
  });

  it('JSON form carries failure.class, route.best, metrics.valid_submission_rate and submissions[] as canonical JSON', async () => {
    const text = await renderReport(sampleRun(), 'json');
    const doc = JSON.parse(text);
    expect(doc.failure.class).toBe('success');
    expect(doc.route.best).toBe('grpo');
    expect(doc.metrics.valid_submission_rate).toBe(1);
    expect(doc.submissions.map((s: { submissionId: string }) => s.submissionId)).toEqual(['sub-1', 'sub-2']);
    expect(text.indexOf('"failure"')).toBeLessThan(text.indexOf('"metrics"')); // keys sorted
    const file = doc.submissions[1].code.files[0];
    expect(file).toMatchObject({ path: 'code/train.py', op: 'modify', linesAdded: 2, linesRemoved: 1, evidence: [9] });
    expect(file.hunks[0].lines).toEqual([' import lib', '-lr = 0.1', '+lr = 0.01', ' epochs = 3', ' train(lr, epochs)', '+print("<done> & ok")']);
  });

  it('Markdown cites the events behind the header and each submission section', async () => {
    const md = await renderReport(sampleRun(), 'md');
    expect(md).toContain('| Baseline | 10 [seq 2] |');
    expect(md).toContain('| Best | 55 [seq 13–14] |');
    expect(md).toContain('| Failure class | **success** — best \\> baseline [seq 2, 14] |');
    expect(md).toContain('### Submission 2: sub-2 — score 55');
    expect(md).toContain('- Rollouts since the previous submission: 10 episodes, 50 steps, 1 batch, success rate 0.5 [seq 11]');
    expect(md).toContain('| 101 | training | `python code/train.py --grpo` | 10 s | 15 s | exit 0 after 5 s | [seq 10, 12] |');
    expect(md).toContain('```diff\n@@ -1,4 +1,5 @@\n import lib\n-lr = 0.1\n+lr = 0.01\n');
    expect(md).toMatch(/<svg [^\n]*aria-label="score trajectory"/);
  });

  it('HTML is self-contained: no scripts, no external stylesheets, images or links, content escaped', async () => {
    const html = await renderReport(sampleRun(), 'html');
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).not.toMatch(/https?:|src=|<script|<link|<img|@import|url\(/i);
    expect(html.match(/href="([^"]*)"/g)!.every((h) => h.startsWith('href="#seq-'))).toBe(true);
    expect(html).toContain('<span class="add">+print(&quot;&lt;done&gt; &amp; ok&quot;)</span>');
    expect(html).toContain('<tr id="seq-14">');
    expect((html.match(/<svg /g) ?? []).length).toBe(2);
  });

  it('falls back to the analysis\'s line counts when a blob is missing, and renders a run with no submissions', async () => {
    const run = sampleRun();
    const doc = JSON.parse(await renderReport({ ...run, blobs: memoryBlobs([TRAIN_V1]) }, 'json'));
    expect(doc.submissions[1].code.files[0]).toMatchObject({ linesAdded: 2, linesRemoved: 1, hunks: [] });
    expect(doc.submissions[1].code.files[0].note).toMatch(/not in the artifact store/);
    const empty = { ...run, analysis: { ...run.analysis, submissions: [], best: null, improvement: null } };
    expect(await renderReport(empty, 'md')).toContain('The agent made no submission.');
  });

  it('counts lines with the same diff as the analysis derived from the events and blobs', async () => {
    const run = sampleRun();
    const analysis = await analyzeRun(run.events, run.blobs);
    const doc = JSON.parse(await renderReport({ ...run, analysis }, 'json'));
    const counts = [[[4, 0]], [[2, 1]]]; // TRAIN_V1 created (4 lines), then lr edited and a print appended
    expect(analysis.submissions.map((s) => s.codeChanges.map((c) => [c.linesAdded, c.linesRemoved]))).toEqual(counts);
    expect(doc.submissions.map((s: { code: { files: { linesAdded: number; linesRemoved: number }[] } }) => s.code.files.map((f) => [f.linesAdded, f.linesRemoved]))).toEqual(counts);
  });

  it('collapses consecutive seqs into ranges', () => {
    expect(seqRanges([9, 3, 4, 5, 11, 4])).toBe('3–5, 9, 11');
  });
});
