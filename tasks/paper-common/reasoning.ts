/**
 * OpenCompass's model-level `extract-non-reasoning-content` post-processor, which the paper harness's
 * model config switches on (`use_cot_postprocessor: true`): with only a closing `</think>`, the text
 * after the last one; otherwise every `<think>…</think>` span removed; then trimmed.
 */
export function stripReasoning(text: string, start = '<think>', end = '</think>'): string {
  if (!text.includes(start) && text.includes(end)) return text.split(end).at(-1)!.trim();
  return text.replace(new RegExp(`${escape(start)}[\\s\\S]*?${escape(end)}`, 'g'), '').trim();
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
