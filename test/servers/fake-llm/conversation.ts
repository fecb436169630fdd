/**
 * The conversation a model request carries, in order, whatever the provider's shape: Anthropic
 * Messages (`messages`), OpenAI Responses (`input`), OpenAI Chat Completions (`messages`), Gemini
 * (`contents`). Each turn is a user text, a tool result or an assistant's text/tool call, flattened to
 * its text, so a test can ask what a CLI sent (e.g. the conversation it resumed) without per-provider code.
 */
export interface Turn {
  role: 'user' | 'tool' | 'assistant';
  text: string;
}

type Json = Record<string, unknown>;

export function conversationOf(body: unknown): Turn[] {
  const request = (body ?? {}) as Json;
  if (Array.isArray(request.contents)) return (request.contents as Json[]).flatMap(geminiTurns);
  if (Array.isArray(request.input)) return (request.input as Json[]).flatMap(responsesTurns);
  if (Array.isArray(request.messages)) return (request.messages as Json[]).flatMap(messageTurns);
  return [];
}

/** The text of the newest user turn (tool results are not user turns). */
export function lastUserText(body: unknown): string | undefined {
  return conversationOf(body).filter((t) => t.role === 'user').pop()?.text;
}

/** Anthropic content blocks or a Chat message: text, tool_use, tool_result, role "tool". */
function messageTurns(message: Json): Turn[] {
  const role = message.role === 'assistant' ? 'assistant' : message.role === 'tool' ? 'tool' : 'user';
  if (typeof message.content === 'string') return [{ role, text: message.content }];
  if (!Array.isArray(message.content)) return Array.isArray(message.tool_calls) ? [{ role: 'assistant', text: JSON.stringify(message.tool_calls) }] : [];
  const turns: Turn[] = [];
  for (const block of message.content as Json[]) {
    if (block.type === 'tool_result') turns.push({ role: 'tool', text: textOf(block.content) });
    else if (block.type === 'tool_use') turns.push({ role: 'assistant', text: JSON.stringify(block.input) });
    else if (typeof block.text === 'string') turns.push({ role, text: block.text });
  }
  return merge(turns);
}

/** Responses items: messages (input_text/output_text parts), *_call and *_call_output items. */
function responsesTurns(item: Json): Turn[] {
  const type = typeof item.type === 'string' ? item.type : 'message';
  if (type.endsWith('_call_output')) return [{ role: 'tool', text: textOf(item.output) }];
  if (type.endsWith('_call')) return [{ role: 'assistant', text: String(item.arguments ?? JSON.stringify(item.action ?? '')) }];
  if (type !== 'message') return [];
  const role = item.role === 'assistant' ? 'assistant' : item.role === 'user' ? 'user' : null;
  return role ? [{ role, text: textOf(item.content) }] : [];
}

function geminiTurns(content: Json): Turn[] {
  const parts = Array.isArray(content.parts) ? (content.parts as Json[]) : [];
  const role = content.role === 'model' ? 'assistant' : 'user';
  return merge(
    parts.map((part): Turn => {
      if (part.functionResponse) return { role: 'tool', text: JSON.stringify((part.functionResponse as Json).response ?? '') };
      if (part.functionCall) return { role: 'assistant', text: JSON.stringify((part.functionCall as Json).args ?? '') };
      return { role, text: typeof part.text === 'string' ? part.text : '' };
    }),
  );
}

/** A string, or the text parts of a content array (`text`, `input_text`, `output_text`), joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined ? '' : JSON.stringify(content);
  return (content as Json[]).map((part) => (typeof part.text === 'string' ? part.text : '')).join('\n');
}

/** Adjacent parts of the same role in one message are one turn. */
function merge(turns: Turn[]): Turn[] {
  const out: Turn[] = [];
  for (const turn of turns) {
    const last = out[out.length - 1];
    if (last && last.role === turn.role && turn.role !== 'tool') last.text += `\n${turn.text}`;
    else out.push({ ...turn });
  }
  return out;
}
