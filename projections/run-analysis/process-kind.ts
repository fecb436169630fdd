import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';

/**
 * What kind of program a recorded process ran: an interpretation of ProcessStarted facts, made
 * here (not at record time) so that a better rule reclassifies every old run on rebuild. The rules
 * and their order are written down in docs/analysis.md ("Process kinds"); keep the two in step.
 *
 * Only the program and the script or module it runs decide — never free text in the arguments:
 * `claude -p "train with grpo"` is the agent, not a training launch. Where the tracer captured what
 * really ran (ProcessStarted.exe / .script, read at exec), that decides — the resolved #! script, else
 * the real executable image — never the name it was invoked by: a link `torchrun -> /bin/sleep` is
 * `sleep`. Older events without those facts keep the older rule (the executable path, else argv[0]).
 */
export type ProcessKind = 'training' | 'evaluation' | 'install' | 'agent-tool' | 'other';

export type ProcessFacts = Pick<EventData<'ProcessStarted'>, 'argv' | 'executable' | 'exe' | 'script'>;

/** Where the harness mounts the agent adapters inside the sandbox (SANDBOX_AGENT_DIR, modules/sandbox/sandbox.ts). */
const AGENT_MOUNT = '/agent/';
/** The agent CLIs (and their platform binaries, e.g. codex-x86_64-unknown-linux-musl). */
const AGENT_CLI = /^(claude|codex|gemini|opencode|openhands)([-_.].*)?$/;
/** Directories the agent CLIs are installed in when run as `node <dir>/cli.js`. */
const AGENT_PACKAGE_DIR = /^(claude-code|codex|gemini-cli|opencode(-ai)?|openhands(-ai)?)$/;
const SHELL = /^(sh|bash|dash|zsh|ksh|mksh|ash|fish)$/;
const PYTHON = /^(python|pypy)[0-9.]*$/;
const NODE = /^(node|nodejs|bun)$/;
const SCRIPT_FILE = /\.(py|sh|bash|zsh|js|mjs|cjs|ts|mts)$/;
/** Distributed launchers: they run a training script on every worker unless it is an evaluation. */
const LAUNCHER = new Set(['torchrun', 'deepspeed']);
const LAUNCHER_MODULE = new Set(['torch.distributed.run', 'torch.distributed.launch', 'accelerate.commands.launch', 'deepspeed', 'deepspeed.launcher.runner']);
/** `trl <command>`: every command trains except these. */
const TRL_NOT_TRAINING = new Set(['env', 'vllm-serve', 'chat', 'help']);
const EVALUATOR = new Set(['lm_eval', 'lm-eval']);
/** Package installers and the commands of theirs that install (first non-option argument). */
const INSTALLER: Record<string, Set<string>> = {
  pip: new Set(['install', 'download']),
  pipx: new Set(['install']),
  uv: new Set(['add', 'sync', 'install']),
  npm: new Set(['install', 'i', 'ci', 'add']),
  pnpm: new Set(['install', 'i', 'add']),
  yarn: new Set(['install', 'add']),
  conda: new Set(['install', 'create']),
  mamba: new Set(['install', 'create']),
  micromamba: new Set(['install', 'create']),
  apt: new Set(['install']),
  'apt-get': new Set(['install']),
  poetry: new Set(['install', 'add']),
};
/** Interpreter options that take the next argument as their value (so it is not the script). */
const PYTHON_VALUE_OPTIONS = new Set(['-W', '-X', '--check-hash-based-pycs']);
const NODE_VALUE_OPTIONS = new Set(['-r', '--require', '--import', '--loader', '--experimental-loader', '-C', '--conditions', '--env-file', '--input-type', '--title']);
const SHELL_VALUE_OPTIONS = new Set(['-o', '+o', '-O', '+O', '--rcfile', '--init-file']);

/** Packages whose entry scripts (resolved `#!` files under node_modules/<package>/) are installers. */
const NODE_INSTALLER_PACKAGE = /\/node_modules\/(npm|pnpm|yarn)\//;

/** The kind a program has on its own facts: what it is and what script or module it runs. */
export function programKind(p: ProcessFacts): ProcessKind {
  const args = p.argv.slice(1);
  if (p.script?.via === 'shebang') return shebangKind(p.script.path, args);
  if (p.exe) return imageKind(basename(p.exe.path), args, p.script?.path);
  // Recorded before exec-time capture: the executable path as exec'd (for a #! script, the script).
  const file = p.executable || p.argv[0] || '';
  const name = basename(file);
  if (SCRIPT_FILE.test(name)) return scriptKind(file);
  return namedKind(name, args);
}

/**
 * A `#!` script, by its resolved file: the script rule for script-named files (and installers'
 * entry scripts such as npm's npm-cli.js), else its name as a program's (torchrun, pip, trl, …).
 */
function shebangKind(path: string, args: string[]): ProcessKind {
  const installer = NODE_INSTALLER_PACKAGE.exec(path);
  if (installer) return installerKind(installer[1], args);
  if (path.startsWith(AGENT_MOUNT) || SCRIPT_FILE.test(basename(path))) return scriptKind(path);
  return namedKind(basename(path), args);
}

/**
 * A binary by the real image's name: interpreters (their script by its resolved path when
 * captured), shells, agent CLIs, installers. The Python tools that are `#!` scripts in reality
 * (torchrun, deepspeed, accelerate, trl, lm_eval) do not count as such when an image of that name runs:
 * a binary copied or linked under such a name is not the tool.
 */
function imageKind(name: string, args: string[], script?: string): ProcessKind {
  if (PYTHON_TOOLS.has(name)) return 'other';
  return namedKind(name, args, script);
}

/** Tools that exist only as Python entry scripts. */
const PYTHON_TOOLS = new Set(['torchrun', 'deepspeed', 'accelerate', 'trl', 'lm_eval', 'lm-eval']);

/** A program by its name (`script`: the resolved path of the script it runs, when captured). */
function namedKind(name: string, args: string[], script?: string): ProcessKind {
  if (PYTHON.test(name)) return pythonKind(args, script);
  if (NODE.test(name)) return scriptArgKind(args, NODE_VALUE_OPTIONS, ['-e', '--eval', '-p', '--print'], script);
  if (SHELL.test(name)) return shellKind(args, script);
  if (AGENT_CLI.test(name)) return 'agent-tool';
  if (LAUNCHER.has(name)) return launcherKind(args);
  if (name === 'accelerate') return firstOperand(args) === 'launch' ? launcherKind(args.slice(args.indexOf('launch') + 1)) : 'other';
  if (name === 'trl') {
    const command = firstOperand(args);
    return command !== undefined && !TRL_NOT_TRAINING.has(command) ? 'training' : 'other';
  }
  if (EVALUATOR.has(name)) return 'evaluation';
  return installerKind(name, args);
}

/**
 * `sh -c '<string>'` runs a command string: it is not classified by that string (free text, which
 * may quote a prompt), because the programs the string runs are recorded as processes of their own
 * and classified by these rules. `sh script.sh` is classified by its script.
 */
function shellKind(args: string[], script?: string): ProcessKind {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (SHELL_VALUE_OPTIONS.has(a)) i++;
    else if (a === '-c' || /^-[a-zA-Z]*c[a-zA-Z]*$/.test(a)) return 'other';
    else if (a === '-' || a === '-s' || a === '--') return a === '--' && args[i + 1] ? scriptKind(script ?? args[i + 1]) : 'other';
    else if (!/^[-+]/.test(a)) return scriptKind(script ?? a);
  }
  return 'other'; // interactive, or reading commands from stdin
}

function pythonKind(args: string[], script?: string): ProcessKind {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '-m') return args[i + 1] ? moduleKind(args[i + 1], args.slice(i + 2)) : 'other';
    if (/^-[a-zA-Z]*m./.test(a) && !a.startsWith('--')) return moduleKind(a.slice(a.indexOf('m') + 1), args.slice(i + 1));
    if (a === '-c' || /^-[a-zA-Z]*c/.test(a)) return 'other'; // inline code is text, not a script
    if (PYTHON_VALUE_OPTIONS.has(a)) i++;
    else if (a === '-') return 'other';
    else if (!a.startsWith('-')) return scriptKind(script ?? a);
  }
  return 'other';
}

/** `python -m <module> args`: known tools by their module, anything else like a script of that name. */
function moduleKind(module: string, args: string[]): ProcessKind {
  const root = module.split('.')[0];
  if (LAUNCHER_MODULE.has(module)) return launcherKind(args);
  if (root === 'pip') return installerKind('pip', args);
  if (root === 'uv') return installerKind('uv', args);
  if (root === 'lm_eval') return 'evaluation';
  if (root === 'trl') {
    const own = nameKind(module.split('.').slice(1));
    if (own !== 'other') return own;
    const command = firstOperand(args);
    return command !== undefined && TRL_NOT_TRAINING.has(command) ? 'other' : 'training';
  }
  if (AGENT_CLI.test(root)) return 'agent-tool';
  const parts = module.split('.');
  const own = nameKind(tokens(parts[parts.length - 1]));
  return own !== 'other' ? own : parts.length > 1 ? nameKind(tokens(parts[parts.length - 2])) : 'other';
}

/** torchrun / deepspeed / accelerate launch: evaluation when what it runs is one, else training. */
function launcherKind(args: string[]): ProcessKind {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '-m' || a === '--module') return args[i + 1] && moduleKind(args[i + 1], args.slice(i + 2)) === 'evaluation' ? 'evaluation' : 'training';
    if (!a.startsWith('-') && SCRIPT_FILE.test(a)) return scriptKind(a) === 'evaluation' ? 'evaluation' : 'training';
  }
  return 'training';
}

/** An interpreter's first operand is its script (after options and their values). */
function scriptArgKind(args: string[], valueOptions: Set<string>, inline: string[], script?: string): ProcessKind {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (inline.includes(a)) return 'other';
    if (valueOptions.has(a)) i++;
    else if (a === 'run' && i === 0) continue; // `bun run script`
    else if (!a.startsWith('-')) return scriptKind(script ?? a);
  }
  return 'other';
}

/**
 * A script by its path: the harness's agent adapters (mounted at /agent) and the agent CLIs are
 * agent-tool; otherwise its file name decides (training, evaluation, install), then the agent CLI
 * packages, then the name of the directory it is in.
 */
function scriptKind(path: string): ProcessKind {
  if (path.startsWith(AGENT_MOUNT)) return 'agent-tool';
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  const file = segments.pop() ?? '';
  const stem = file.replace(SCRIPT_FILE, '');
  const own = nameKind(tokens(stem));
  if (own !== 'other') return own;
  if (AGENT_CLI.test(stem) || segments.some((s) => AGENT_PACKAGE_DIR.test(s))) return 'agent-tool';
  const dir = segments.at(-1);
  return dir ? nameKind(tokens(dir)) : 'other';
}

const TRAINING_METHOD = new Set(['sft', 'grpo', 'ppo', 'dpo', 'orpo', 'kto', 'rloo', 'rlhf', 'simpo', 'rl']);

/**
 * The words of a script (or module, or directory) name: train… / finetun… / pretrain… / a
 * post-training method (sft, grpo, ppo, dpo, rl, …) → training; eval… → evaluation; install… →
 * install. A name with an eval word and no train… word evaluates (eval_sft.py evaluates an SFT
 * model; train_eval.py trains).
 */
function nameKind(words: string[]): ProcessKind {
  const trainWord = words.some((w) => /^(train|finetun|pretrain)/.test(w));
  const method = words.some((w) => TRAINING_METHOD.has(w) || w === 'fine' && words.includes('tune'));
  const evalWord = words.some((w) => w.startsWith('eval'));
  if (evalWord && !trainWord) return 'evaluation';
  if (trainWord || method) return 'training';
  if (words.some((w) => w.startsWith('install'))) return 'install';
  return 'other';
}

function tokens(name: string): string[] {
  return name.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
}

function installerKind(name: string, args: string[]): ProcessKind {
  const installer = /^pip[0-9.]*$/.test(name) ? 'pip' : name;
  const verbs = INSTALLER[installer];
  if (!verbs) return 'other';
  const command = firstOperand(args);
  if (installer === 'uv' && command === 'pip') return installerKind('pip', args.slice(args.indexOf('pip') + 1));
  if (installer === 'yarn' && command === undefined) return 'install'; // bare `yarn` installs
  return command !== undefined && verbs.has(command) ? 'install' : 'other';
}

/** The first argument that is not an option. */
function firstOperand(args: string[]): string | undefined {
  return args.find((a) => !a.startsWith('-'));
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** The kinds of a run's processes, in the context of its process tree. */
export interface RunProcessKinds {
  /** The kind of the program a ProcessStarted (by seq) recorded. */
  kindOf(seq: number): ProcessKind;
  /**
   * Training launches, by ProcessStarted seq: training processes that no training process started
   * (a torchrun's workers, the python a train.sh runs, the DataLoader forks of a training script
   * and the program a training wrapper exec's are part of the launch that started them).
   */
  readonly launches: ReadonlySet<number>;
}

interface Node {
  kind: ProcessKind;
  /** The agent itself (a CLI or an adapter script): its direct helpers are agent-tool too. */
  agent: boolean;
  /** This process or one of its ancestors is a training process. */
  training: boolean;
  /** observedAt of its exit when it ended without status: replaced by an exec at that time. */
  execAt?: string;
}

/**
 * Follows a run's processes in seq order. Context beyond programKind: a program the agent itself
 * (agent CLI or adapter script) started that no rule classifies — its tool-call shell wrapper
 * (Claude Code's `bash -c -l 'source …shell-snapshot… && eval "<cmd>"'`, Codex's `bash -lc`), a
 * search it runs — is agent-tool; what such a wrapper runs in turn is classified on its own facts.
 */
export class ProcessClassifier implements RunProcessKinds {
  private readonly kinds = new Map<number, ProcessKind>();
  private readonly launchSeqs = new Set<number>();
  /** The latest program of each pid (alive or ended): parents are looked up here by ppid. */
  private readonly latest = new Map<number, Node>();
  private readonly programs = new ProgramKinds();

  get launches(): ReadonlySet<number> {
    return this.launchSeqs;
  }

  /** Feeds one event (in seq order); returns the kind when it is a ProcessStarted. */
  observe(event: A2rlEvent): ProcessKind | undefined {
    if (event.type === 'ProcessExited') {
      const node = this.latest.get(event.data.pid);
      if (node && event.data.exitCode === undefined && event.data.signal === undefined) node.execAt = event.data.observedAt;
      return undefined;
    }
    if (event.type !== 'ProcessStarted') return undefined;
    const d = event.data;
    const parent = this.latest.get(d.ppid);
    // The tracer ends a program replaced by exec without status, at the exec's own time.
    const previous = this.latest.get(d.pid);
    const execFrom = previous?.execAt !== undefined && previous.execAt === d.observedAt ? previous : undefined;
    const own = this.programs.kindOf(d);
    const kind = own === 'other' && (parent?.agent || execFrom?.agent) ? 'agent-tool' : own;
    const agent = own === 'agent-tool';
    const inherited = !!(parent?.training || execFrom?.training);
    if (kind === 'training' && !inherited) this.launchSeqs.add(event.seq);
    this.latest.set(d.pid, { kind, agent, training: inherited || kind === 'training' });
    this.kinds.set(event.seq, kind);
    return kind;
  }

  kindOf(seq: number): ProcessKind {
    return this.kinds.get(seq) ?? 'other';
  }
}

/** Classifies every process of a run (events in any order; they are followed in seq order). */
export function classifyProcesses(events: readonly A2rlEvent[]): RunProcessKinds {
  const classifier = new ProcessClassifier();
  const inOrder = events.every((e, i) => i === 0 || events[i - 1].seq < e.seq);
  for (const e of inOrder ? events : [...events].sort((a, b) => a.seq - b.seq)) classifier.observe(e);
  return classifier;
}

/** Distinct programs (the facts programKind reads) a ProgramKinds remembers at most: beyond, it classifies each anew. */
const REMEMBERED_PROGRAMS = 5000;
const KIND = Symbol('kind');
type ProgramTrie = Map<unknown, ProgramTrie> & { [KIND]?: ProcessKind };

/**
 * programKind, remembered per distinct program: a long run starts the same commands again and again
 * (a 1M-event run, hundreds of thousands of launches of a few scripts), and classifying each anew
 * allocates its argv's words every time. Keyed by what programKind reads, field by field and argument
 * by argument (a trie of Maps), so a program seen before is found without building a key.
 */
class ProgramKinds {
  private readonly root: ProgramTrie = new Map();
  private size = 0;

  kindOf(p: ProcessFacts): ProcessKind {
    const grow = this.size < REMEMBERED_PROGRAMS;
    let node: ProgramTrie | undefined = this.root;
    for (const key of [p.exe?.path, p.script?.via, p.script?.path, p.executable, p.argv.length]) node = node && this.child(node, key, grow);
    for (let i = 0; node && i < p.argv.length; i++) node = this.child(node, p.argv[i], grow);
    if (node?.[KIND] !== undefined) return node[KIND];
    const kind = programKind(p);
    if (node) {
      node[KIND] = kind;
      this.size += 1;
    }
    return kind;
  }

  private child(node: ProgramTrie, key: unknown, grow: boolean): ProgramTrie | undefined {
    let next = node.get(key);
    if (!next && grow) node.set(key, (next = new Map()));
    return next;
  }
}
