"""How gsm8k is asked and scored (the task's description): a 4-shot conversation (the fixed worked
rounds of eval_context.json, then the question) in the evaluation's template, a worked answer ending
"The answer is <n>", the last number before any "Question:" is the prediction."""
import json
import os
import re

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval_context.json")) as _f:
    CONTEXT = json.load(_f)
USER_TEMPLATE = CONTEXT["userTemplate"]
NUMBER = re.compile(r"-?\d+\.\d+|-?\d+")


def read_rows(data_dir):
    with open(os.path.join(data_dir, "train.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def gold(answer):
    return answer.split("#### ")[1].replace(",", "").strip()


def worked_answer(answer):
    """GSM8K's solution in the few-shot style: calculator annotations dropped, "#### n" said as a sentence."""
    steps, _, final = answer.partition("#### ")
    steps = re.sub(r"<<[^>]*>>", "", steps).strip()
    return f"{steps}\nThe answer is {final.replace(',', '').strip()}"


def prompt(question):
    return [{"role": "user", "content": USER_TEMPLATE.format(question=question)}]


def eval_context():
    """The fixed rounds the evaluation puts before every question, as chat messages."""
    messages = []
    for shot in CONTEXT["rounds"]:
        messages += [{"role": "user", "content": USER_TEMPLATE.format(question=shot["question"])}, {"role": "assistant", "content": shot["answer"]}]
    return messages


def predicted(reply):
    numbers = NUMBER.findall(reply.split("Question:")[0])
    return numbers[-1] if numbers else None


def is_correct(reply, reference):
    guess = predicted(reply)
    if guess is None:
        return False
    try:
        return abs(float(guess) - int(reference)) < 1e-6
    except ValueError:
        return guess == reference
