"""No question maker's answer can be read off its rank among numeric options: each
maker of Learn's questions (GPT-2 Pre-LN and Post-LN, the Llama / Qwen block, OLMo,
Gemma 3, a mixture of experts) drawn 100 times on every node it asks about puts its
answer at no rank more often than chance allows (the KV-cache answer was always the
largest option, RoPE's angle always the second largest); and the scaling question's
options, in symbols, do not answer the head-width question beside it."""

import re
from collections import Counter, defaultdict

import pytest

from explorer.core.gpt.nodes import all_hook_names, order_of
from explorer.core.lessons.learn import question_for, questions_for
from tests.core.lessons.test_quiz import CONFIGS as GPT2, capture
from tests.core.lessons.test_quiz_llama import CONFIGS as LLAMA

NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:e[-+]?\d+)?")
DRAWS = 100


def value(option: str) -> float | None:
    found = NUMBER.findall(option.replace("−", "-"))
    return float(found[-1].replace(",", "")) if found else None


@pytest.fixture(scope="module")
def ranks():
    """Each maker's answer ranks (among 4 numeric options), every draw its own seed."""
    out = defaultdict(Counter)
    for key, cfg in {**GPT2, **LLAMA}.items():
        views, order = capture(cfg), order_of(cfg)
        for name in all_hook_names(cfg, inside=True):
            start = sum(map(ord, key + name)) * DRAWS
            for n, maker in enumerate(questions_for(name, order)):
                for draw in range(DRAWS):
                    q = question_for(name, views, order, n, seed=start + draw)
                    values = [value(o) for o in q.options]
                    if len(values) == 4 and None not in values and len(set(values)) == 4:
                        out[maker.__name__][sorted(values).index(values[q.answer])] += 1
    return out


def test_no_rank_gives_a_makers_answer_away(ranks):
    assert {"cache_question", "rope_angle_question", "group_question", "rms_size_question",
            "head_dim_question", "width_question"} <= set(ranks)
    over = {m: dict(c) for m, c in ranks.items()
            if sum(c.values()) >= DRAWS and max(c.values()) / sum(c.values()) > 0.25 + 0.2}
    assert not over, over


def test_the_scaling_question_names_no_width():
    cfg = GPT2["pre"]
    views, order = capture(cfg), order_of(cfg)
    name = "trf_blocks.0.att.attn_scores"
    makers = questions_for(name, order)
    asked = [m.__name__ for m in makers].index("scaling_question")
    for seed in range(20):
        q = question_for(name, views, order, asked, seed=seed)
        assert not any(c.isdigit() for o in q.options for c in o), q.options
        assert q.options[q.answer] == "√head_dim" and "√8 ≈ 2.83 here" in q.explanation
