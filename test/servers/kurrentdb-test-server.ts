/**
 * In-memory KurrentDB gRPC server FOR TESTS ONLY: no auth, no TLS, no persistence, no cluster.
 * It lets CI exercise the KurrentDB adapter through the official `@kurrent/kurrentdb-client`
 * (whose reads go through its native Rust bridge, appends and subscriptions through grpc-js),
 * built from the service definitions that the client package itself ships.
 *
 * RPCs implemented:
 * - event_store.client.server_features.ServerFeatures/GetSupportedMethods
 *     advertises Streams.Read and Streams.Append only, so the client appends with Streams.Append
 *     (it switches to Streams.BatchAppend only when a server advertises it).
 * - event_store.client.streams.Streams/Append   (client streaming: options, then proposed messages)
 * - event_store.client.streams.Streams/Read     (server streaming), for:
 *     stream reads forwards/backwards from start/end/revision with a count;
 *     $all reads forwards/backwards from start/end/position with a count, with or without a
 *     stream-name or event-type filter (prefixes or regex);
 *     catch-up subscriptions to $all (from start/end/position) with the same filters.
 * Everything else (BatchAppend, Delete, Tombstone, stream subscriptions, persistent subscriptions,
 * projections, gossip, users, operations) answers UNIMPLEMENTED.
 *
 * Semantics reproduced:
 * - per-stream revisions 0,1,2,…; global positions with commit == prepare, strictly increasing and
 *   sparse (byte-offset-like), shared by the whole log, so $all is in commit order;
 * - expected state `any` / `no_stream` / `stream_exists` / exact revision; a mismatch answers
 *   AppendResp.wrong_expected_version with the current and the expected revision;
 * - idempotent re-append: when the stream is past the expected revision and the events at the
 *   following revisions carry the same ids (all of them), the append succeeds without writing and
 *   reports the revision and position of the already stored last event (the server compares ids
 *   only, never payloads);
 * - a stream read of an unknown stream answers ReadResp.stream_not_found;
 * - $all reads from a position are inclusive of it (forwards) and exclusive of it (backwards);
 *   catch-up subscriptions are exclusive of their start position; a subscription sends
 *   confirmation, then the stored events, a checkpoint and caught_up, then every new matching
 *   event as it is appended (no gap, no duplicate: the switch to live happens synchronously);
 * - event ids are returned in the UUID format the request asks for (string or structured);
 *   `created` metadata is in 100 ns ticks since the Unix epoch, as the client expects.
 * Not reproduced: multi-event appends sharing one transaction commit position (each event gets
 * its own), `$`-system streams/events in $all, the maximum append size, stream deletion and
 * metadata, link resolution, idempotency for `any` appends, fell-behind notifications.
 */
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { UUID as UUIDMsg } from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import type { AppendReq, AppendResp, ReadReq, ReadResp } from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js';

type StreamsPb = typeof import('@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js');
type SharedPb = typeof import('@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js');
type FeaturesPb = typeof import('@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_pb.js');

// The generated modules are CommonJS with dynamically attached exports, so load them with require.
const require = createRequire(import.meta.url);
const PROTOCOLS = '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1';
const streamsPb = require(`${PROTOCOLS}/streams_pb.js`) as StreamsPb;
const sharedPb = require(`${PROTOCOLS}/shared_pb.js`) as SharedPb;
const featuresPb = require(`${PROTOCOLS}/serverfeatures_pb.js`) as FeaturesPb;
const { StreamsService } = require(`${PROTOCOLS}/streams_grpc_pb.js`) as { StreamsService: grpc.ServiceDefinition };
const { ServerFeaturesService } = require(`${PROTOCOLS}/serverfeatures_grpc_pb.js`) as {
  ServerFeaturesService: grpc.ServiceDefinition;
};

const { ReadResp: ReadRespMsg, AppendResp: AppendRespMsg, ReadReq: ReadReqMsg, AppendReq: AppendReqMsg } = streamsPb;
const ReadOptions = ReadReqMsg.Options;
const Expected = AppendReqMsg.Options.ExpectedStreamRevisionCase;

const SERVER_VERSION = '25.0.0';
const TICKS_PER_MS = 10_000n;

interface StoredEvent {
  stream: string;
  revision: bigint;
  position: bigint; // commit == prepare
  id: string;
  metadata: Map<string, string>; // type, content-type, created
  customMetadata: Uint8Array;
  data: Uint8Array;
}

type Filter = (e: StoredEvent) => boolean;

class Log {
  readonly all: StoredEvent[] = [];
  readonly streams = new Map<string, StoredEvent[]>();
  readonly listeners = new Set<(e: StoredEvent) => void>();
  private nextPosition = 1024n;

  write(stream: string, messages: AppendReq.ProposedMessage[]): StoredEvent[] {
    const events = this.streams.get(stream) ?? [];
    this.streams.set(stream, events);
    const created = BigInt(Date.now()) * TICKS_PER_MS;
    const written = messages.map((m) => {
      const metadata = new Map<string, string>();
      m.getMetadataMap().forEach((value: string, key: string) => metadata.set(key, value));
      metadata.set('created', created.toString());
      const event: StoredEvent = {
        stream,
        revision: BigInt(events.length),
        position: this.nextPosition,
        id: uuidToString(m.getId()),
        metadata,
        customMetadata: m.getCustomMetadata_asU8(),
        data: m.getData_asU8(),
      };
      // Positions are byte-offset-like: sparse and strictly increasing.
      this.nextPosition += 100n + BigInt(event.data.length + event.customMetadata.length);
      events.push(event);
      this.all.push(event);
      return event;
    });
    for (const event of written) for (const listener of this.listeners) listener(event);
    return written;
  }
}

function uuidToString(uuid: UUIDMsg | undefined): string {
  if (!uuid) return randomUUID();
  if (!uuid.hasStructured()) return uuid.getString();
  const s = uuid.getStructured()!;
  const hex = (v: string) => BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0');
  const ms = hex(s.getMostSignificantBits());
  const ls = hex(s.getLeastSignificantBits());
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-${ms.slice(12)}-${ls.slice(0, 4)}-${ls.slice(4)}`;
}

function uuidMessage(id: string, structured: boolean): UUIDMsg {
  const uuid = new sharedPb.UUID();
  if (!structured) return uuid.setString(id);
  const hex = id.replace(/-/g, '');
  const signed = (h: string) => BigInt.asIntN(64, BigInt(`0x${h}`)).toString();
  return uuid.setStructured(
    new sharedPb.UUID.Structured().setMostSignificantBits(signed(hex.slice(0, 16))).setLeastSignificantBits(signed(hex.slice(16))),
  );
}

function streamIdentifier(name: string) {
  return new sharedPb.StreamIdentifier().setStreamName(Buffer.from(name, 'utf8'));
}

function streamNameOf(id: { getStreamName_asU8(): Uint8Array } | undefined): string {
  return Buffer.from(id?.getStreamName_asU8() ?? new Uint8Array()).toString('utf8');
}

function eventResponse(e: StoredEvent, structuredIds: boolean): ReadResp {
  const recorded = new ReadRespMsg.ReadEvent.RecordedEvent()
    .setId(uuidMessage(e.id, structuredIds))
    .setStreamIdentifier(streamIdentifier(e.stream))
    .setStreamRevision(e.revision.toString())
    .setPreparePosition(e.position.toString())
    .setCommitPosition(e.position.toString())
    .setCustomMetadata(e.customMetadata)
    .setData(e.data);
  for (const [k, v] of e.metadata) recorded.getMetadataMap().set(k, v);
  const read = new ReadRespMsg.ReadEvent().setEvent(recorded).setCommitPosition(e.position.toString());
  return new ReadRespMsg().setEvent(read);
}

function compileFilter(options: ReadReq.Options): Filter {
  if (!options.hasFilter()) return () => true;
  const f = options.getFilter()!;
  const onType = f.hasEventType();
  const expr = onType ? f.getEventType()! : f.getStreamIdentifier()!;
  const prefixes = expr.getPrefixList();
  const regex = expr.getRegex() ? new RegExp(expr.getRegex()) : null;
  return (e) => {
    const subject = onType ? (e.metadata.get('type') ?? '') : e.stream;
    if (prefixes.length > 0) return prefixes.some((p: string) => subject.startsWith(p));
    return regex ? regex.test(subject) : true;
  };
}

function limitOf(options: ReadReq.Options): number {
  const count = BigInt(options.getCount() || '0');
  return count > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(count);
}

export async function startKurrentDbTestServer(): Promise<{ url: string; stop(): Promise<void> }> {
  const log = new Log();
  const server = new grpc.Server();

  server.addService(ServerFeaturesService, {
    getSupportedMethods(_call: unknown, callback: grpc.sendUnaryData<unknown>) {
      const methods = ['read', 'append'].map((name) =>
        new featuresPb.SupportedMethod().setServiceName('event_store.client.streams.Streams').setMethodName(name),
      );
      callback(null, new featuresPb.SupportedMethods().setMethodsList(methods).setEventStoreServerVersion(SERVER_VERSION));
    },
  });

  server.addService(StreamsService, {
    append(call: grpc.ServerReadableStream<AppendReq, AppendResp>, callback: grpc.sendUnaryData<AppendResp>) {
      let options: AppendReq.Options | undefined;
      const proposed: AppendReq.ProposedMessage[] = [];
      call.on('data', (req: AppendReq) => {
        if (req.hasOptions()) options = req.getOptions();
        else if (req.hasProposedMessage()) proposed.push(req.getProposedMessage()!);
      });
      call.on('error', () => undefined);
      call.on('end', () => {
        if (!options) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'append without options' });
        callback(null, appendResponse(log, options, proposed));
      });
    },
    read(call: grpc.ServerWritableStream<ReadReq, ReadResp>) {
      const options = call.request.getOptions();
      if (!options) return call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'read without options' });
      const structuredIds = options.getUuidOption()?.hasStructured() ?? false;
      const send = (e: StoredEvent) => call.write(eventResponse(e, structuredIds));
      if (options.hasStream()) {
        if (options.hasSubscription()) {
          return call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'stream subscriptions are not implemented by this test server' });
        }
        readStream(log, options).forEach(send);
        if (!log.streams.has(streamNameOf(options.getStream()!.getStreamIdentifier()))) {
          call.write(new ReadRespMsg().setStreamNotFound(new ReadRespMsg.StreamNotFound().setStreamIdentifier(options.getStream()!.getStreamIdentifier())));
        }
        return call.end();
      }
      if (!options.hasSubscription()) {
        readAll(log, options).forEach(send);
        return call.end();
      }
      subscribeAll(log, options, call, send);
    },
    // Delete, Tombstone and BatchAppend are left out: grpc-js answers them UNIMPLEMENTED.
  });

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    url: `kurrentdb://127.0.0.1:${port}?tls=false`,
    stop: () =>
      new Promise<void>((resolve) => {
        log.listeners.clear();
        server.tryShutdown(() => resolve());
        // Open subscriptions would hold a graceful shutdown forever.
        setTimeout(() => server.forceShutdown(), 200).unref();
      }),
  };
}

function appendResponse(log: Log, options: AppendReq.Options, proposed: AppendReq.ProposedMessage[]): AppendResp {
  const stream = streamNameOf(options.getStreamIdentifier());
  const events = log.streams.get(stream) ?? [];
  const current = events.length === 0 ? null : BigInt(events.length - 1);
  const kind = options.getExpectedStreamRevisionCase();
  const expected = kind === Expected.REVISION ? BigInt(options.getRevision()) : null;
  const succeed = (last: StoredEvent) =>
    new AppendRespMsg().setSuccess(
      new AppendRespMsg.Success()
        .setCurrentRevision(last.revision.toString())
        .setPosition(new AppendRespMsg.Position().setCommitPosition(last.position.toString()).setPreparePosition(last.position.toString())),
    );

  const matches =
    (kind === Expected.ANY) ||
    (kind === Expected.NO_STREAM && current === null) ||
    (kind === Expected.STREAM_EXISTS && current !== null) ||
    (kind === Expected.REVISION && current === expected);
  if (matches) {
    if (proposed.length === 0) {
      return new AppendRespMsg().setSuccess(
        new AppendRespMsg.Success().setNoPosition(new sharedPb.Empty()).setCurrentRevision((current ?? -1n).toString()),
      );
    }
    return succeed(log.write(stream, proposed).at(-1)!);
  }

  // Idempotency: the stream moved past the expected revision, but only because these very events
  // (by id, all of them) were written there by an earlier attempt.
  const first = kind === Expected.NO_STREAM ? 0 : kind === Expected.REVISION ? Number(expected) + 1 : -1;
  if (first >= 0 && proposed.length > 0 && first + proposed.length <= events.length) {
    const same = proposed.every((m, i) => events[first + i].id === uuidToString(m.getId()));
    if (same) return succeed(events[first + proposed.length - 1]);
  }

  const wrong = new AppendRespMsg.WrongExpectedVersion();
  if (current === null) wrong.setCurrentNoStream(new sharedPb.Empty());
  else wrong.setCurrentRevision(current.toString());
  if (kind === Expected.REVISION) wrong.setExpectedRevision(expected!.toString());
  else if (kind === Expected.NO_STREAM) wrong.setExpectedNoStream(new sharedPb.Empty());
  else if (kind === Expected.STREAM_EXISTS) wrong.setExpectedStreamExists(new sharedPb.Empty());
  else wrong.setExpectedAny(new sharedPb.Empty());
  return new AppendRespMsg().setWrongExpectedVersion(wrong);
}

function readStream(log: Log, options: ReadReq.Options): StoredEvent[] {
  const stream = options.getStream()!;
  const events = log.streams.get(streamNameOf(stream.getStreamIdentifier())) ?? [];
  const backwards = options.getReadDirection() === ReadOptions.ReadDirection.BACKWARDS;
  const limit = limitOf(options);
  const from = stream.hasRevision() ? Number(BigInt(stream.getRevision())) : stream.hasEnd() ? events.length - 1 : backwards ? events.length - 1 : 0;
  if (!backwards) return events.slice(stream.hasEnd() ? events.length : from, from + limit);
  const start = Math.min(from, events.length - 1);
  return events.slice(Math.max(0, start - limit + 1), start + 1).reverse();
}

function allStart(options: ReadReq.Options): bigint | 'start' | 'end' {
  const all = options.getAll()!;
  if (all.hasPosition()) return BigInt(all.getPosition()!.getCommitPosition());
  return all.hasEnd() ? 'end' : 'start';
}

function readAll(log: Log, options: ReadReq.Options): StoredEvent[] {
  const from = allStart(options);
  const filter = compileFilter(options);
  const limit = limitOf(options);
  const backwards = options.getReadDirection() === ReadOptions.ReadDirection.BACKWARDS;
  const inRange = backwards
    ? (e: StoredEvent) => from === 'end' || (from !== 'start' && e.position < from)
    : (e: StoredEvent) => from === 'start' || (from !== 'end' && e.position >= from);
  const ordered = backwards ? [...log.all].reverse() : log.all;
  const out: StoredEvent[] = [];
  for (const e of ordered) {
    if (out.length >= limit) break;
    if (inRange(e) && filter(e)) out.push(e);
  }
  return out;
}

function subscribeAll(log: Log, options: ReadReq.Options, call: grpc.ServerWritableStream<ReadReq, ReadResp>, send: (e: StoredEvent) => void): void {
  const from = allStart(options);
  const filter = compileFilter(options);
  call.write(new ReadRespMsg().setConfirmation(new ReadRespMsg.SubscriptionConfirmation().setSubscriptionId(randomUUID())));
  // Catch-up and the switch to live happen in one synchronous step, so nothing can slip between.
  const after = from === 'start' ? -1n : from === 'end' ? (log.all.at(-1)?.position ?? -1n) : from;
  for (const e of log.all) if (e.position > after && filter(e)) send(e);
  const head = log.all.at(-1)?.position ?? 0n;
  if (options.hasFilter()) {
    call.write(new ReadRespMsg().setCheckpoint(new ReadRespMsg.Checkpoint().setCommitPosition(head.toString()).setPreparePosition(head.toString())));
  }
  call.write(
    new ReadRespMsg().setCaughtUp(
      new ReadRespMsg.CaughtUp().setPosition(new ReadRespMsg.Position().setCommitPosition(head.toString()).setPreparePosition(head.toString())),
    ),
  );
  const listener = (e: StoredEvent) => {
    if (e.position > after && filter(e)) send(e);
  };
  log.listeners.add(listener);
  const stop = () => log.listeners.delete(listener);
  call.on('cancelled', stop);
  call.on('close', stop);
  call.on('error', stop);
}
