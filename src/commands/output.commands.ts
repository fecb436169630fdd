import type { Command } from 'commander';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import type { EventBlob } from '../../modules/query/event-blob.js';
import { inertLine, inertText } from '../../modules/reports/inert-text.js';
import { withReadSide, type ReadSide } from './read-side.js';
import { jsonOut } from './terminal.js';
import { untilInterrupted } from './interrupt.js';
import { choiceOption } from './option-parsers.js';

// What the agent printed and what events reference, from the ledger and the artifact store, as
// recorded (the gateway redacts model calls before it stores them): `a2rl logs` (AgentOutput
// chunks) and `a2rl blob` (any blob an event references). On a terminal everything is shown inert
// (modules/reports/inert-text.ts): it is the agent's text. `--raw` writes the exact bytes, and only
// where they cannot act on a terminal: to a pipe or a file.

/** The most `a2rl blob` reads into memory to show (JSON is parsed whole to pretty-print it); --raw streams any size. */
const MAX_SHOWN = 64 * 1024 * 1024;

const onTerminal = () => process.stdout.isTTY === true;

/** `--raw` to a terminal is refused: exact bytes are for a pipe or a file. */
function checkRaw(raw: boolean | undefined): void {
  if (raw && onTerminal()) throw new Error('--raw writes the exact bytes only to a pipe or a file, never to a terminal: add `> file` or `| less -R`, or leave --raw out to see the text made inert');
}

/** Writes to stdout, waiting when the pipe is full (a large blob or log). */
function write(data: string | Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(data, (err) => (err ? reject(err) : resolve()));
  });
}

export function registerOutputCommands(program: Command): void {
  program
    .command('logs')
    .description("the agent's own output (its stdout and stderr, AgentOutput events) as recorded, in seq order; shown inert")
    .argument('<runId>', 'run id')
    .option('--follow', 'print new output as it is recorded, until the run ends, or Ctrl-C')
    .addOption(choiceOption('--stream <stream>', 'only stdout or stderr', ['stdout', 'stderr'] as const, 'stdout or stderr'))
    .option('--process <seq>', "only the output of the process started at this seq (ProcessStarted) — a2rl records the agent's own output, not each process's: refused with what is recorded instead")
    .option('--json', 'NDJSON: one object per chunk {seq, stream, observedAt, size, sha256, binary, text (UTF-8) | base64}')
    .option('--raw', 'the exact bytes, to a pipe or a file only (never to a terminal)')
    .action(async (runId: string, opts: LogsOptions) => {
      if (opts.raw && opts.json) throw new Error('give --raw or --json, not both');
      checkRaw(opts.raw);
      const processSeq = opts.process === undefined ? undefined : seqArgument('--process', opts.process);
      await withReadSide(async (side) => {
        if (processSeq !== undefined) await refuseProcess(side, runId, processSeq);
        await printLogs(side, runId, opts);
      });
    });

  program
    .command('blob')
    .description('a blob an event references (a model call\'s request or response, an output chunk, a file revision, a grading\'s items, …) as stored, checked against its sha256; JSON pretty-printed, text shown inert, binary only with --raw')
    .argument('<runId>', 'run id')
    .argument('<seq>', 'the event (its seq, as `a2rl events` lists it)')
    .option('--part <name>', 'which blob of an event with several: request or response (a model call), chunk, content, items, checkpoint, …; default: the first')
    .option('--json', 'one JSON object: {runId, seq, type, part, parts: [{part, sha256, size}], sha256, size, binary, format, content | base64}')
    .option('--raw', 'the exact bytes, to a pipe or a file only (never to a terminal)')
    .action(async (runId: string, seqText: string, opts: { part?: string; json?: boolean; raw?: boolean }) => {
      const seq = seqArgument('<seq>', seqText);
      if (opts.raw && opts.json) throw new Error('give --raw or --json, not both');
      checkRaw(opts.raw);
      await withReadSide((side) => printBlob(side, runId, seq, opts));
    });
}

interface LogsOptions {
  follow?: boolean;
  stream?: 'stdout' | 'stderr';
  process?: string;
  json?: boolean;
  raw?: boolean;
}

function seqArgument(name: string, text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new Error(`${name} must be an event seq (0, 1, …), got "${inertLine(text.slice(0, 40))}"`);
  return Number(text);
}

async function eventAt(side: ReadSide, runId: string, seq: number): Promise<A2rlEvent> {
  const { readEventPage } = await import('../../modules/query/run-reading.js');
  const page = await readEventPage(side.store, runId, { afterSeq: seq - 1, limit: 1 });
  if (!page) throw new Error(`no run "${inertLine(runId)}" in the ${side.store.backend} ledger`);
  const event = page.find((e) => e.seq === seq);
  if (!event) throw new Error(`run ${inertLine(runId)} has no event ${seq}`);
  return event;
}

/** `--process`: a2rl does not record each process's output (issue 31's decisions); say what there is, naming the process. */
async function refuseProcess(side: ReadSide, runId: string, seq: number): Promise<never> {
  const event = await eventAt(side, runId, seq);
  if (event.type !== 'ProcessStarted') throw new Error(`--process takes the seq of a ProcessStarted event; event ${seq} of run ${inertLine(runId)} is ${event.type}`);
  const argv = (event.data as { argv: string[] }).argv.join(' ');
  throw new Error(`the output of process ${(event.data as { pid: number }).pid} (${inertLine(argv.slice(0, 120))}, seq ${seq}) is not recorded: a2rl records the agent's own stdout and stderr (\`a2rl logs ${inertLine(runId)}\`), not each process's`);
}

/** The AgentOutput chunks, in seq order (with --follow: until the run closes or Ctrl-C). */
async function printLogs(side: ReadSide, runId: string, opts: LogsOptions): Promise<void> {
  const [{ runEventsFrom }, { streamName }, { followRunEvents }] = await Promise.all([
    import('../../modules/query/run-reading.js'),
    import('../../modules/ledger/events/ids.js'),
    import('../../modules/query/follow.js'),
  ]);
  const printer = new ChunkPrinter(side.artifacts, opts);
  if (!opts.follow) {
    if ((await side.store.streamRevision(streamName(runId))) === null) throw new Error(`no run "${inertLine(runId)}" in the ${side.store.backend} ledger`);
    for await (const event of runEventsFrom(side.store, runId, { afterSeq: -1, limit: Infinity, types: new Set(['AgentOutput'] as const) })) await printer.print(event);
    await printer.end();
    return;
  }
  await untilInterrupted(async (signal) => {
    for await (const event of followRunEvents(side.source, runId, { signal })) if (event.type === 'AgentOutput') await printer.print(event);
    await printer.end();
  });
}

/** Prints output chunks as text (decoded per stream, so a character split between chunks stays whole), NDJSON or raw bytes. */
class ChunkPrinter {
  private readonly decoders = new Map<string, InstanceType<typeof TextDecoder>>();
  private printed = 0;

  constructor(
    private readonly artifacts: ArtifactStore,
    private readonly opts: LogsOptions,
  ) {}

  async print(event: A2rlEvent): Promise<void> {
    const { eventBlobs, readEventBlob, isBinaryContent } = await import('../../modules/query/event-blob.js');
    const data = event.data as { stream: 'stdout' | 'stderr'; observedAt?: string };
    if (this.opts.stream && data.stream !== this.opts.stream) return;
    const chunk = eventBlobs(event).find((b) => b.part === 'chunk');
    if (!chunk) return;
    const bytes = await readEventBlob(this.artifacts, chunk, `output chunk of event ${event.seq}`, MAX_SHOWN);
    this.printed += 1;
    if (this.opts.raw) return write(bytes);
    const binary = isBinaryContent(bytes);
    if (this.opts.json) {
      const { canonicalJson } = await import('../../modules/ledger/events/canonical-json.js');
      const content = binary ? { base64: bytes.toString('base64') } : { text: bytes.toString('utf8') };
      return write(jsonOut(`${canonicalJson({ seq: event.seq, stream: data.stream, observedAt: data.observedAt ?? null, size: chunk.size, sha256: chunk.sha256, binary, ...content })}\n`));
    }
    if (binary && bytes.includes(0)) {
      return write(`\n[${data.stream} chunk at seq ${event.seq}: ${chunk.size} bytes of binary output; a2rl blob ${inertLine(event.runId)} ${event.seq} --raw > file]\n`);
    }
    let decoder = this.decoders.get(data.stream);
    if (!decoder) this.decoders.set(data.stream, (decoder = new TextDecoder('utf-8')));
    return write(inertText(decoder.decode(bytes, { stream: true })));
  }

  async end(): Promise<void> {
    if (!this.opts.raw && !this.opts.json) for (const decoder of this.decoders.values()) {
      const rest = decoder.decode();
      if (rest) await write(inertText(rest));
    }
    if (!this.printed && !this.opts.json && !this.opts.raw) process.stderr.write(`no output recorded${this.opts.stream ? ` on ${this.opts.stream}` : ''}\n`);
  }
}

/** `a2rl blob`: one blob of one event. */
async function printBlob(side: ReadSide, runId: string, seq: number, opts: { part?: string; json?: boolean; raw?: boolean }): Promise<void> {
  const { eventBlobs, openBlob, BlobCheck, readEventBlob, isBinaryContent, readableText } = await import('../../modules/query/event-blob.js');
  const event = await eventAt(side, runId, seq);
  const parts = eventBlobs(event);
  const blob: EventBlob | undefined = opts.part === undefined ? parts[0] : parts.find((p) => p.part === opts.part);
  if (!blob) {
    if (!parts.length) throw new Error(`event ${seq} (${event.type}) references no blob`);
    throw new Error(`event ${seq} (${event.type}) has no blob "${inertLine(opts.part ?? '')}"; it has ${parts.map((p) => p.part).join(', ')} (--part)`);
  }
  const what = `${blob.part} of event ${seq} (${event.type})`;
  if (opts.raw) {
    // Streamed as read, any size; checked at the end (a mismatch is reported after the bytes, exit 1).
    const check = new BlobCheck(blob, what);
    for await (const chunk of await openBlob(side.artifacts, blob, what)) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      check.update(buf);
      await write(buf);
    }
    check.end();
    return;
  }
  const bytes = await readEventBlob(side.artifacts, blob, what, MAX_SHOWN);
  const binary = isBinaryContent(bytes);
  if (opts.json) {
    const shown = binary ? { format: 'binary', base64: bytes.toString('base64') } : { format: readableText(bytes.toString('utf8')).format, content: bytes.toString('utf8') };
    await write(jsonOut(`${JSON.stringify({ runId, seq, type: event.type, part: blob.part, parts, sha256: blob.sha256, size: blob.size, binary, ...shown })}\n`));
    return;
  }
  if (binary) {
    throw new Error(`${what} is binary (${blob.size} bytes): it is not shown as text; write it to a file with \`a2rl blob ${inertLine(runId)} ${seq}${opts.part ? ` --part ${blob.part}` : ''} --raw > file\``);
  }
  const { text } = readableText(bytes.toString('utf8'));
  await write(inertText(text.endsWith('\n') ? text : `${text}\n`));
}
