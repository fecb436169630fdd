/**
 * The household world: seeded layouts (receptacles, objects, one goal) and the text game played in
 * them, in the spirit of ALFWorld. Everything here is deterministic: a layout is a pure function of
 * its seed, and the game is a pure function of the layout and the actions taken.
 */
import type { EnvResetResult, EnvSession, EnvStepResult } from '../task-pack.js';
import { Rng } from './prng.js';

export type GoalKind = 'pick' | 'clean' | 'heat' | 'cool';
export const GOAL_KINDS: readonly GoalKind[] = ['pick', 'clean', 'heat', 'cool'];

export interface Goal {
  kind: GoalKind;
  /** Object type, e.g. `mug`: any instance of it satisfies the goal. */
  object: string;
  /** Receptacle name, e.g. `cabinet 2`. */
  target: string;
}

/** A generated layout; plain JSON so the held-out set can be stored as data. */
export interface Layout {
  seed: number;
  /** Receptacle names, sorted. */
  receptacles: string[];
  /** Initial contents of every receptacle (object instance names, sorted). */
  contents: Record<string, string[]>;
  goal: Goal;
}

export const MAX_STEPS = 30;

/** Appliance each treatment uses (the agent must go there and apply the verb). */
export const APPLIANCE: Readonly<Record<Exclude<GoalKind, 'pick'>, string>> = {
  clean: 'sinkbasin 1',
  heat: 'microwave 1',
  cool: 'fridge 1',
};

const OPENABLE = new Set(['cabinet', 'drawer', 'fridge', 'microwave']);

/** [type, min count, max count] of receptacles in a room. */
const RECEPTACLE_COUNTS: ReadonlyArray<readonly [string, number, number]> = [
  ['cabinet', 2, 6],
  ['countertop', 1, 2],
  ['diningtable', 0, 1],
  ['drawer', 1, 4],
  ['fridge', 1, 1],
  ['garbagecan', 1, 1],
  ['microwave', 1, 1],
  ['shelf', 0, 3],
  ['sidetable', 0, 1],
  ['sinkbasin', 1, 1],
];

/** Where each object type tends to be found (receptacle type → weight): the priors a policy can learn. */
const WHERE: Readonly<Record<string, Readonly<Record<string, number>>>> = {
  apple: { fridge: 5, countertop: 3, diningtable: 3, garbagecan: 1 },
  potato: { fridge: 4, countertop: 3, diningtable: 2, garbagecan: 1, cabinet: 1 },
  tomato: { fridge: 4, countertop: 3, diningtable: 3, sidetable: 1 },
  egg: { fridge: 6, countertop: 2, garbagecan: 1 },
  lettuce: { fridge: 6, countertop: 2, diningtable: 2 },
  bread: { countertop: 4, diningtable: 4, cabinet: 1 },
  mug: { cabinet: 3, countertop: 3, shelf: 2, sinkbasin: 2, microwave: 1 },
  cup: { cabinet: 4, countertop: 3, shelf: 2, sinkbasin: 1, microwave: 1 },
  plate: { cabinet: 5, countertop: 2, diningtable: 3, shelf: 1 },
  bowl: { cabinet: 4, shelf: 3, countertop: 2, diningtable: 1 },
  knife: { drawer: 5, countertop: 3, diningtable: 2 },
  spoon: { drawer: 5, countertop: 2, diningtable: 2, sinkbasin: 1 },
  fork: { drawer: 5, countertop: 2, diningtable: 2, sidetable: 1 },
  sponge: { sinkbasin: 3, countertop: 2, cabinet: 2 },
};

/** Object types each goal kind may ask for. */
const GOAL_OBJECTS: Readonly<Record<GoalKind, readonly string[]>> = {
  pick: Object.keys(WHERE),
  clean: ['apple', 'potato', 'tomato', 'egg', 'lettuce', 'mug', 'cup', 'plate', 'bowl', 'knife', 'spoon', 'fork'],
  heat: ['apple', 'potato', 'tomato', 'egg', 'bread', 'mug', 'cup', 'plate', 'bowl'],
  cool: ['apple', 'potato', 'tomato', 'egg', 'lettuce', 'bread', 'mug', 'cup', 'plate', 'bowl'],
};

const TARGET_TYPES = new Set(['cabinet', 'countertop', 'diningtable', 'drawer', 'shelf', 'sidetable']);

/** `mug 2` → `mug`; `sinkbasin 1` → `sinkbasin`. */
export function typeOf(name: string): string {
  return name.slice(0, name.lastIndexOf(' '));
}

/**
 * Generates the layout for `seed`. `kind` forces the goal kind (the held-out set balances kinds);
 * otherwise it is drawn from the seed.
 */
export function generateLayout(seed: number, kind?: GoalKind): Layout {
  const rng = Rng.fromLabel(`ref-household/layout/${seed}`);
  const receptacles: string[] = [];
  for (const [type, lo, hi] of RECEPTACLE_COUNTS) {
    const n = rng.int(lo, hi);
    for (let i = 1; i <= n; i++) receptacles.push(`${type} ${i}`);
  }
  receptacles.sort();

  const goalKind = kind ?? rng.pick(GOAL_KINDS);
  const goalObject = rng.pick(GOAL_OBJECTS[goalKind]);
  const target = rng.pick(receptacles.filter((r) => TARGET_TYPES.has(typeOf(r))));

  const contents: Record<string, string[]> = Object.fromEntries(receptacles.map((r) => [r, [] as string[]]));
  const counts = new Map<string, number>();
  const place = (type: string): void => {
    // Never start an instance of the goal type inside the target: the goal must take work.
    const spots = receptacles.filter((r) => WHERE[type]![typeOf(r)] && !(type === goalObject && r === target));
    if (spots.length === 0) return;
    const spot = spots[rng.weighted(spots.map((r) => WHERE[type]![typeOf(r)]!))]!;
    const n = (counts.get(type) ?? 0) + 1;
    counts.set(type, n);
    contents[spot]!.push(`${type} ${n}`);
  };
  const goalInstances = rng.int(1, 2);
  for (let i = 0; i < goalInstances; i++) place(goalObject);
  const types = Object.keys(WHERE);
  const distractors = rng.int(6, 12);
  for (let i = 0; i < distractors; i++) place(rng.pick(types));
  for (const r of receptacles) contents[r]!.sort();

  return { seed, receptacles, contents, goal: { kind: goalKind, object: goalObject, target } };
}

export function goalText(goal: Goal): string {
  const task =
    goal.kind === 'pick'
      ? `put some ${goal.object} in ${goal.target}.`
      : `${goal.kind} some ${goal.object} and put it in ${goal.target}.`;
  return `Your task is to: ${task}`;
}

/** A stable identity for a layout (used to keep training sessions off held-out layouts). */
export function layoutFingerprint(layout: Layout): string {
  return JSON.stringify([layout.receptacles, layout.receptacles.map((r) => layout.contents[r]), layout.goal]);
}

function listing(items: readonly string[]): string {
  if (items.length === 0) return 'nothing';
  const parts = items.map((o) => `a ${o}`);
  return parts.length === 1 ? parts[0]! : `${parts.slice(0, -1).join(', ')}, and ${parts[parts.length - 1]}`;
}

/** One episode on one layout. Implements the EnvSession contract of the task pack. */
export class HouseholdGame implements EnvSession {
  private location: string | null = null;
  private opened = new Set<string>();
  private contents = new Map<string, string[]>();
  private holding: string | null = null;
  private treated = new Map<string, Set<GoalKind>>();
  private steps = 0;
  private won = false;
  private over = false;

  constructor(readonly layout: Layout, private readonly maxSteps = MAX_STEPS) {
    this.reset();
  }

  reset(): EnvResetResult {
    this.location = null;
    this.opened = new Set();
    this.contents = new Map(this.layout.receptacles.map((r) => [r, [...this.layout.contents[r]!]]));
    this.holding = null;
    this.treated = new Map();
    this.steps = 0;
    this.won = false;
    this.over = false;
    const observation =
      `You are in the middle of a room. Looking quickly around you, you see ${listing(this.layout.receptacles)}.` +
      `\n\n${goalText(this.layout.goal)}`;
    return { observation, admissibleActions: this.admissibleActions(), info: this.info() };
  }

  get done(): boolean {
    return this.over;
  }

  /** Admissible actions in the current state, sorted (empty once the episode is over). */
  admissibleActions(): string[] {
    if (this.over) return [];
    const actions = ['look', 'inventory'];
    for (const r of this.layout.receptacles) if (r !== this.location) actions.push(`go to ${r}`);
    const here = this.location;
    if (here !== null) {
      if (OPENABLE.has(typeOf(here))) actions.push(this.opened.has(here) ? `close ${here}` : `open ${here}`);
      if (this.visible(here)) {
        if (this.holding === null) {
          for (const o of this.contents.get(here)!) actions.push(`take ${o} from ${here}`);
        } else {
          actions.push(`put ${this.holding} in/on ${here}`);
        }
      }
      if (this.holding !== null) {
        if (here === APPLIANCE.clean) actions.push(`clean ${this.holding} with ${here}`);
        if (here === APPLIANCE.heat) actions.push(`heat ${this.holding} with ${here}`);
        if (here === APPLIANCE.cool) actions.push(`cool ${this.holding} with ${here}`);
      }
    }
    return actions.sort();
  }

  step(action: string): EnvStepResult {
    if (this.over) {
      return { observation: 'The episode is over. Reset to start a new one.', reward: 0, done: true, admissibleActions: [], info: this.info() };
    }
    this.steps++;
    const observation = this.admissibleActions().includes(action) ? this.apply(action) : 'Nothing happens.';
    if (this.won || this.steps >= this.maxSteps) this.over = true;
    return { observation, reward: this.won ? 1 : 0, done: this.over, admissibleActions: this.admissibleActions(), info: this.info() };
  }

  /** Privileged state for the expert planner. */
  snapshot(): { location: string | null; opened: ReadonlySet<string>; contents: ReadonlyMap<string, readonly string[]>; holding: string | null; isTreated: (o: string, k: GoalKind) => boolean } {
    return {
      location: this.location,
      opened: this.opened,
      contents: this.contents,
      holding: this.holding,
      isTreated: (o, k) => this.treated.get(o)?.has(k) ?? false,
    };
  }

  private info(): Record<string, unknown> {
    return { goalKind: this.layout.goal.kind, steps: this.steps, won: this.won };
  }

  private visible(r: string): boolean {
    return !OPENABLE.has(typeOf(r)) || this.opened.has(r);
  }

  private describe(r: string): string {
    if (!this.visible(r)) return `The ${r} is closed.`;
    const items = listing(this.contents.get(r)!);
    return OPENABLE.has(typeOf(r)) ? `The ${r} is open. In it, you see ${items}.` : `On the ${r}, you see ${items}.`;
  }

  /** Applies an admissible action and returns the observation. */
  private apply(action: string): string {
    let m: RegExpMatchArray | null;
    if (action === 'look') {
      return this.location === null
        ? `You are in the middle of a room. Looking quickly around you, you see ${listing(this.layout.receptacles)}.`
        : `You are at ${this.location}. ${this.describe(this.location)}`;
    }
    if (action === 'inventory') {
      return this.holding === null ? 'You are not carrying anything.' : `You are carrying: a ${this.holding}.`;
    }
    if ((m = action.match(/^go to (.+)$/))) {
      this.location = m[1]!;
      return `You arrive at ${m[1]}. ${this.describe(m[1]!)}`;
    }
    if ((m = action.match(/^open (.+)$/))) {
      this.opened.add(m[1]!);
      return `You open the ${m[1]}. ${this.describe(m[1]!)}`;
    }
    if ((m = action.match(/^close (.+)$/))) {
      this.opened.delete(m[1]!);
      return `You close the ${m[1]}.`;
    }
    if ((m = action.match(/^take (.+) from (.+)$/))) {
      const items = this.contents.get(m[2]!)!;
      items.splice(items.indexOf(m[1]!), 1);
      this.holding = m[1]!;
      return `You pick up the ${m[1]} from the ${m[2]}.`;
    }
    if ((m = action.match(/^put (.+) in\/on (.+)$/))) {
      const items = this.contents.get(m[2]!)!;
      items.push(m[1]!);
      items.sort();
      this.holding = null;
      this.won = this.satisfied(m[1]!, m[2]!);
      return `You put the ${m[1]} in/on the ${m[2]}.`;
    }
    if ((m = action.match(/^(clean|heat|cool) (.+) with (.+)$/))) {
      const kind = m[1] as GoalKind;
      const states = this.treated.get(m[2]!) ?? new Set<GoalKind>();
      // Heating undoes cooling and vice versa.
      if (kind === 'heat') states.delete('cool');
      if (kind === 'cool') states.delete('heat');
      states.add(kind);
      this.treated.set(m[2]!, states);
      return `You ${kind} the ${m[2]} using the ${m[3]}.`;
    }
    throw new Error(`unhandled admissible action: ${action}`);
  }

  private satisfied(object: string, receptacle: string): boolean {
    const { kind, object: type, target } = this.layout.goal;
    if (receptacle !== target || typeOf(object) !== type) return false;
    return kind === 'pick' || (this.treated.get(object)?.has(kind) ?? false);
  }
}

/** The privileged expert (knows where everything is): the shortest plan's next action. */
export function expertAction(game: HouseholdGame): string {
  const { goal } = game.layout;
  const s = game.snapshot();
  const goTo = (r: string): string | null => (s.location === r ? null : `go to ${r}`);
  const openIfClosed = (r: string): string | null =>
    OPENABLE.has(typeOf(r)) && !s.opened.has(r) ? `open ${r}` : null;

  if (s.holding !== null && typeOf(s.holding) !== goal.object) {
    // Not reachable from the expert's own plan; put the stray object down where it stands.
    return goTo('countertop 1') ?? `put ${s.holding} in/on countertop 1`;
  }
  if (s.holding === null) {
    const candidates: Array<[string, string]> = [];
    for (const [r, items] of s.contents) {
      if (r === goal.target) continue;
      for (const o of items) if (typeOf(o) === goal.object) candidates.push([o, r]);
    }
    // Prefer objects already visible (no open needed), then by name.
    candidates.sort(([oa, ra], [ob, rb]) => Number(!!openIfClosed(ra)) - Number(!!openIfClosed(rb)) || oa.localeCompare(ob));
    const [object, where] = candidates[0]!;
    return goTo(where) ?? openIfClosed(where) ?? `take ${object} from ${where}`;
  }
  if (goal.kind !== 'pick' && !s.isTreated(s.holding, goal.kind)) {
    const appliance = APPLIANCE[goal.kind];
    return goTo(appliance) ?? `${goal.kind} ${s.holding} with ${appliance}`;
  }
  return goTo(goal.target) ?? openIfClosed(goal.target) ?? `put ${s.holding} in/on ${goal.target}`;
}
