import type { A2rlEvent, EventData } from './catalog.js';
import type { Cause } from './shared.js';

// Causation (docs/event-catalog.md#causation): an event that has a cause names it in its payload's
// `causedBy` — the cause's id and seq, plus the evidence where the link is a match. The emitters
// hold the cause as the stored event their recorder resolved with; these helpers make the field.

/** What a link was made on, beside the cause itself. */
export type CauseEvidence = Omit<Cause, 'event' | 'seq'>;

const COMMAND_EVIDENCE_CHARS = 1000;

/** Whether `value` is a stored event (what a run's recorder resolves with); a fake recorder's undefined is not. */
function isStored(value: unknown): value is Pick<A2rlEvent, 'id' | 'seq'> {
  const v = value as { id?: unknown; seq?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.id === 'string' && Number.isSafeInteger(v.seq);
}

/** The Cause naming `stored`, or undefined when it is no stored event (then the link is left out). */
export function causeOf(stored: unknown, evidence: CauseEvidence = {}): Cause | undefined {
  if (!isStored(stored)) return undefined;
  const cause: Cause = { event: stored.id, seq: stored.seq };
  for (const [key, value] of Object.entries(evidence) as Array<[keyof CauseEvidence, string | number | undefined]>) {
    if (value !== undefined) Object.assign(cause, { [key]: key === 'command' ? String(value).slice(0, COMMAND_EVIDENCE_CHARS) : value });
  }
  return cause;
}

/** `{ causedBy }` to spread into a payload, or nothing when there is no stored cause. */
export function causedBy(stored: unknown, evidence: CauseEvidence = {}): { causedBy?: Cause } {
  const cause = causeOf(stored, evidence);
  return cause ? { causedBy: cause } : {};
}

/**
 * The tool calls a run's model asked for, by id, as their LlmCallRecorded events are stored: a later
 * model call answering one (a tool result with that `tool_call_id`) was caused by it.
 */
export class ToolCallIndex {
  private readonly calls = new Map<string, Cause>();

  /** Notes the tool calls asked for by the model call stored as `call` (an id seen again later points at the latest call). */
  noteCalls(call: Cause, toolCalls: EventData<'LlmCallRecorded'>['toolCalls']): void {
    for (const toolCall of toolCalls) if (toolCall.id !== undefined) this.calls.set(toolCall.id, { event: call.event, seq: call.seq, toolCallId: toolCall.id });
  }

  /** The call whose tool call this model call's first answered tool result answers, if any was recorded. */
  answered(data: Pick<EventData<'LlmCallRecorded'>, 'toolResults'>): Cause | undefined {
    for (const result of data.toolResults) {
      const cause = result.id === undefined ? undefined : this.calls.get(result.id);
      if (cause) return cause;
    }
    return undefined;
  }
}

interface ShellCall {
  command: string;
  toolCallId: string;
  /** The model call's stored event, or the promise of it (the call was queued, not yet durable). */
  call: unknown;
  used: boolean;
}

/**
 * The shell commands a run's model asked for (tool calls with a `command`), noted as their model
 * calls are queued for recording, in that order: a process whose argv is one of them was started by
 * that call.
 */
export class ShellCallIndex {
  private readonly commands: ShellCall[] = [];

  /** How many commands are noted: a process matches only those noted before it was queued (see startedBy). */
  get noted(): number {
    return this.commands.length;
  }

  /** Notes the shell commands of a model call queued for recording; `call` resolves with its stored event. */
  noteCalls(call: unknown, toolCalls: EventData<'LlmCallRecorded'>['toolCalls']): void {
    for (const toolCall of toolCalls) {
      const command = toolCall.id === undefined ? null : commandOf(toolCall.input);
      if (command !== null) this.commands.push({ command, toolCallId: toolCall.id!, call, used: false });
    }
  }

  /**
   * The model call whose shell tool call started a process with this argv, among the first `upTo`
   * commands noted: its command is one argv entry (`bash -c <command>`) or the whole argv joined by
   * spaces. Each tool call starts at most one linked process (the latest unused match; its children
   * are linked by ppid). Waits for the call's event to be stored — the caller must have queued it
   * after the call, so it never waits for itself; undefined when it could not be stored.
   */
  async startedBy(argv: readonly string[], upTo = this.commands.length): Promise<Cause | undefined> {
    const joined = argv.join(' ');
    for (let i = Math.min(upTo, this.commands.length) - 1; i >= 0; i--) {
      const entry = this.commands[i];
      if (entry.used || !(joined === entry.command || argv.includes(entry.command))) continue;
      entry.used = true;
      const stored = await Promise.resolve(entry.call).catch(() => undefined);
      return causeOf(stored, { toolCallId: entry.toolCallId, command: entry.command });
    }
    return undefined;
  }
}

/** The shell command of a tool call's input (JSON text): `command` as a string, or the last entry of a `command` array (`["bash", "-lc", "…"]`). */
function commandOf(input: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(input);
  } catch {
    return null; // cut at 2000 characters, or not JSON: no reliable command
  }
  const command = (parsed as { command?: unknown } | null)?.command;
  const text = typeof command === 'string' ? command : Array.isArray(command) && typeof command.at(-1) === 'string' ? (command.at(-1) as string) : null;
  return text !== null && text.trim().length > 1 ? text : null;
}
