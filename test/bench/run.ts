// `npm run bench -- <name>`: runs one benchmark; each prints its figures and ends with a JSON line.
import { auditBench } from './audit.bench.js';
import { campaignBench } from './campaign.bench.js';
import { checkpointBench } from './checkpoint.bench.js';
import { cliBench } from './cli.bench.js';
import { dashboardBench } from './dashboard.bench.js';
import { gatewayBench } from './gateway.bench.js';
import { instrumentationBench } from './instrumentation.bench.js';
import { ledgerBench } from './ledger.bench.js';
import { overheadBench } from './overhead.bench.js';
import { queryBench } from './query.bench.js';
import { sandboxBench } from './sandbox.bench.js';
import { timingsBench } from './timings.bench.js';
import { tracersBench } from './tracers.bench.js';
import { transcriptBench } from './transcript.bench.js';

const benches: Record<string, () => Promise<void>> = { ledger: ledgerBench, audit: auditBench, instrumentation: instrumentationBench, timings: timingsBench, sandbox: sandboxBench, gateway: gatewayBench, campaign: campaignBench, query: queryBench, dashboard: dashboardBench, checkpoint: checkpointBench, cli: cliBench, overhead: overheadBench, transcript: transcriptBench, tracers: tracersBench };

const name = process.argv[2];
const bench = name ? benches[name] : undefined;
if (!bench) {
  console.error(`usage: npm run bench -- <${Object.keys(benches).join('|')}>`);
  process.exit(2);
}
await bench();
