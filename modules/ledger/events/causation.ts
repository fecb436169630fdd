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
  private readonly commands: Array<{ command: string; cause: Cause; used: boolean }> = [];

  /** Notes the tool calls of a stored LlmCallRecorded (ids seen again later point at the latest call). */
  note(event: A2rlEvent): void {
    if (event.type === 'LlmCallRecorded') this.noteCalls({ event: event.id, seq: event.seq }, event.data.toolCalls);
  }

  /** Notes tool calls asked for by the model call stored as `call`. */
  noteCalls(call: Cause, toolCalls: EventData<'LlmCallRecorded'>['toolCalls']): void {
    for (const toolCall of toolCalls) {
      if (toolCall.id === undefined) continue;
      const cause = { event: call.event, seq: call.seq, toolCallId: toolCall.id };
      this.calls.set(toolCall.id, cause);
      const command = commandOf(toolCall.input);
      if (command !== null) this.commands.push({ command, cause: { ...cause, command: command.slice(0, COMMAND_EVIDENCE_CHARS) }, used: false });
    }
  }

  /** The call whose tool call this model call's first answered tool result answers, if any was recorded. */
  answered(data: Pick<EventData<'LlmCallRecorded'>, 'toolResults'>): Cause | undefined {
    for (const result of data.toolResults) {
      const cause = result.id === undefined ? undefined : this.calls.get(result.id);
      if (cause) return cause;
    }
    return undefined;
  }

  /**
   * The model call whose shell tool call started a process with this argv: its command is one argv
   * entry (`bash -c <command>`) or the whole argv joined by spaces. Each tool call starts at most one
   * linked process (the first match; its children are linked by ppid), and a process started before
   * its call was stored is not linked.
   */
  startedBy(argv: readonly string[]): Cause | undefined {
    const joined = argv.join(' ');
    for (let i = this.commands.length - 1; i >= 0; i--) {
      const entry = this.commands[i];
      if (entry.used || !(joined === entry.command || argv.includes(entry.command))) continue;
      entry.used = true;
      return entry.cause;
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
