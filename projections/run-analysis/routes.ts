import type { Route } from './analysis.types.js';

/** Training families recognised in text, most specific first (see docs/analysis.md, "Routes"). */
export type Family = 'grpo' | 'ppo' | 'online_rl_other' | 'dpo' | 'sft';

/** Order in which families are tried: online RL before offline, specific algorithms before generic ones. */
export const FAMILY_ORDER: readonly Family[] = ['grpo', 'ppo', 'online_rl_other', 'dpo', 'sft'];

/** Identifier/keyword evidence per family, matched case-insensitively on a file's path and content. */
// `(?<![a-z])` instead of `\b`: identifiers such as train_sft.py or reward_fn must match too.
export const FAMILY_PATTERNS: Readonly<Record<Family, RegExp>> = {
  grpo: /grpo|group[\s_-]*relative|num_generations/i,
  ppo: /(?<![a-z])ppo|proximal[\s_-]*policy|clip[\s_-]*(?:ratio|range|epsilon|eps)(?![a-z])|cliprange|value[\s_-]*head/i,
  online_rl_other: /(?<![a-z])(?:reinforce|rewards?|rloo|rollouts?)(?![a-z])|policy[\s_-]*gradient|\/env\/(?:reset|step)/i,
  dpo: /(?<![a-z])dpo|direct[\s_-]*preference|preference[\s_-]*pairs?|(?<![a-z])chosen(?![a-z])[\s\S]{0,400}(?<![a-z])rejected(?![a-z])/i,
  sft: /(?<![a-z])sft|supervised|cross[\s_-]*entropy|behaviou?r[\s_-]*cloning|imitation|fine[\s_-]*tun|demonstrations?(?![a-z])|self[\s_-]*train/i,
};

/**
 * Generation inside a training process leaves no event (only /env rollouts do), so for the executed
 * route it is recognised from the scripts that ran: trainers that sample from the policy in their loop.
 */
export const IN_PROCESS_GENERATION = /\b(?:GRPOTrainer|PPOTrainer|PPOv2Trainer|RLOOTrainer|OnlineDPOTrainer)\b|num_generations/;

export interface TextSource {
  /** What the text is (a code/ path, or "argv"). */
  path: string;
  text: string;
  /** Seqs of the events behind this text (never empty). */
  seqs: number[];
}

/** Families with evidence in at least one source, with the seqs of the matching sources. */
export function familiesIn(sources: TextSource[]): Map<Family, number[]> {
  const found = new Map<Family, number[]>();
  for (const family of FAMILY_ORDER) {
    const seqs = sources.filter((s) => FAMILY_PATTERNS[family].test(`${s.path}\n${s.text}`)).flatMap((s) => s.seqs);
    if (seqs.length) found.set(family, sortedUnique(seqs));
  }
  return found;
}

/** The declared route: the first family in FAMILY_ORDER the code shows evidence of; `none` without any. */
export function declaredRoute(sources: TextSource[]): { route: Route; evidence: number[] } {
  const found = familiesIn(sources);
  for (const family of FAMILY_ORDER) {
    const seqs = found.get(family);
    if (seqs) return { route: family, evidence: seqs };
  }
  return { route: 'none', evidence: [] };
}

/**
 * The executed route of training that did run: online RL when rollouts were recorded while it ran or
 * its scripts generate in-process (grpo/ppo when the argv or scripts say so, else online_rl_other);
 * otherwise dpo when they show preference training, else sft (supervised fitting of some kind).
 */
export function executedFamily(sources: TextSource[], online: boolean): { route: Family; evidence: number[] } {
  const found = familiesIn(sources);
  const generates = sources.filter((s) => IN_PROCESS_GENERATION.test(s.text));
  if (online || generates.length) {
    const extra = generates.flatMap((s) => s.seqs);
    for (const family of ['grpo', 'ppo'] as const) {
      const seqs = found.get(family);
      if (seqs) return { route: family, evidence: sortedUnique([...seqs, ...extra]) };
    }
    return { route: 'online_rl_other', evidence: sortedUnique(extra) };
  }
  const dpo = found.get('dpo');
  if (dpo) return { route: 'dpo', evidence: dpo };
  return { route: 'sft', evidence: found.get('sft') ?? [] };
}

export function sortedUnique(values: number[]): number[] {
  return [...new Set(values)].sort((a, b) => a - b);
}
