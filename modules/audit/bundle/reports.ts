import { analyzeRun } from '../../../projections/run-analysis/analyze.js';
import type { BlobReader } from '../../../projections/blob-reader.js';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { renderReport, REPORT_FORMATS, REPORT_RENDERER, type ReportFormat } from '../../reports/render.js';

export { REPORT_RENDERER };

/**
 * The bundle's reports: analyzeRun + renderReport (both pure) over the bundle's own events and the
 * blobs it holds, so an offline verifier re-renders them from the bundle alone and compares bytes
 * (when the bundle's renderer version is REPORT_RENDERER: bundle.json names it).
 */
export async function renderBundleReports(events: readonly A2rlEvent[], blobs: BlobReader, level: number | null): Promise<Record<ReportFormat, string>> {
  const analysis = await analyzeRun([...events], blobs);
  const out = {} as Record<ReportFormat, string>;
  for (const format of REPORT_FORMATS) out[format] = await renderReport({ analysis, events, blobs, level }, format);
  return out;
}
