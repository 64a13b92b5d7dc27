"""No rule about the options' form finds a Learn question's answer more often than
chance: not the longest or the shortest option, not the one most like the others in its
words, not the one odd in form (the only square table, the only one without a code name
in brackets, the only one of another number of dimensions) — for every question of every
node, Pre-LN and Post-LN, drawn many times."""

import re
from collections import Counter

import pytest

from explorer.core.gpt.nodes import all_hook_names, node_for_hook
from explorer.core.lessons.learn import question_for, questions_for

from .test_quiz import CONFIGS, passes  # noqa: F401 (the fixture)

SHAPE = re.compile(r"^\((\d+(?:, \d+)*),?\)$")
DRAWS = 60


def _form(option: str) -> dict:
    shape = SHAPE.match(option)
    if shape:
        dims = [int(d) for d in shape.group(1).split(", ")]
        return {"dimensions": len(dims), "square": len(dims) >= 2 and dims[-1] == dims[-2]}
    return {"named in brackets": "(" in option}


def _words(option: str) -> set[str]:
    return set(re.findall(r"[\w−√]+", option.lower()))


def tells(options: tuple[str, ...]) -> dict[str, int]:
    """Each form rule that singles out one option, with the option it picks."""
    picked = {}
    lengths = [len(o) for o in options]
    for rule, pick in (("longest", max), ("shortest", min)):
        if lengths.count(pick(lengths)) == 1:
            picked[rule] = lengths.index(pick(lengths))
    if not all(SHAPE.match(o) or o.isdigit() for o in options):  # words, not numbers
        words = [_words(o) for o in options]
        likeness = [sum(len(a & b) / len(a | b) for j, b in enumerate(words) if j != i)
                    for i, a in enumerate(words)]
        top = max(likeness)
        if sum(abs(v - top) < 1e-9 for v in likeness) == 1:
            picked["most like the others"] = likeness.index(top)
    forms = [_form(o) for o in options]
    for feature in forms[0]:
        values = Counter(f.get(feature) for f in forms)
        if len(options) >= 3 and len(values) == 2 and min(values.values()) == 1:
            odd = next(v for v, n in values.items() if n == 1)
            picked[f"the only one by {feature}"] = [f.get(feature) for f in forms].index(odd)
    return picked


def test_the_rules_see_what_they_look_for():
    assert tells(("(1, 6, 4, 4)", "(1, 6, 4, 8)", "(1, 6, 4, 2)", "(1, 6, 4, 16)"))[
        "the only one by square"] == 0
    assert tells(("a b c", "a b d", "a e c", "f b c"))["most like the others"] == 0
    assert tells(("input x", "add's output (add1)", "norm's output (norm1)", "att (att)"))[
        "the only one by named in brackets"] == 0
    assert tells(("(2, 3, 32)", "(6, 32)", "(2, 3, 64)", "(2, 3, 16)"))[
        "the only one by dimensions"] == 1  # the seeds' (6, 768): odd, and wrong


@pytest.mark.parametrize("key", list(CONFIGS))
def test_no_form_rule_finds_the_answer_above_chance(passes, key):  # noqa: F811
    cfg, views = CONFIGS[key], passes[key]
    found, asked, chance = Counter(), Counter(), {}
    for name in all_hook_names(cfg, inside=True):
        kind = node_for_hook(name, cfg.norm_position).kind
        for n, maker in enumerate(questions_for(name, cfg.norm_position)):
            group = (maker.__name__, str(kind))
            for seed in range(DRAWS):
                q = question_for(name, views, cfg.norm_position, n, seed=seed)
                asked[group] += 1
                found.update((group, rule) for rule, i in tells(q.options).items()
                             if i == q.answer)
                chance[group] = max(chance.get(group, 0), 1 / len(q.options))
    over = {f"{group} {rule}": f"{count}/{asked[group]}" for (group, rule), count in found.items()
            if count / asked[group] > chance[group] + 0.2}
    assert not over, over
    assert len(asked) >= 20  # every kind's questions were drawn
