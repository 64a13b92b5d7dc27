"""Learn's questions on the Llama / Qwen block: every node gets questions of its own,
well formed; the new ones (RMSNorm, RoPE, the SwiGLU gate, grouped-query attention) are
answered by the live tensors — RoPE's angle and its shifted score against the model's
own scores — and no form rule finds their answers above chance."""

import random
from collections import Counter

import numpy as np
import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import (KEYS, KEYS_ROPE, KEYS_SHARED, QUERIES_ROPE, SCORES, all_hook_names,
                                     block_hook_name, node_for_hook, order_of)
from explorer.core.lessons.learn import question_for, questions_for
from explorer.core.lessons.question import Live
from explorer.core.lessons.quiz_llama import (cache_question, gate_share_question, group_question,
                                              rms_mean_question, rms_size_question,
                                              rope_angle_question, rope_shift_question,
                                              swiglu_weights_question)
from explorer.core.run.capture import Capture

from .test_option_forms import DRAWS, tells

CONFIGS = {"llama": preset("llama-tiny"), "qwen3": preset("qwen3-tiny"), "olmo3": preset("olmo3-tiny"),
           "qwen3moe": preset("qwen3moe-tiny"),
           "gemma3": preset("gemma3-tiny")}


@pytest.fixture(scope="module")
def passes():
    out = {}
    for key, cfg in CONFIGS.items():
        model = build_model(cfg, seed=3)
        ids = torch.tensor([[464, 1049, 11, 290], [40, 716, 257, 3797]])[:, :3]
        with torch.no_grad(), Capture(model, tensors=True, inside=True) as cap:
            model(ids)
        out[key] = cap.views()
    return out


def live(views, cfg, key, layer=1):
    return Live(block_hook_name(layer, key), views, order_of(cfg))


@pytest.mark.parametrize("key", list(CONFIGS))
def test_every_node_gets_well_formed_questions_of_its_own(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    order = order_of(cfg)
    assert order.family.quiz
    for name in all_hook_names(cfg, inside=True):
        makers = questions_for(name, order)
        assert len(makers) >= 2, name
        for asked in range(len(makers)):
            q = question_for(name, views, order, asked, seed=asked)
            assert 2 <= len(q.options) <= 4 and len(set(q.options)) == len(q.options), (name, q)
            assert "LayerNorm" not in q.text + "".join(q.options), (name, q)  # its own words
            for choice in range(len(q.options)):
                assert q.feedback(choice).startswith("Right." if choice == q.answer else "Not quite")


@pytest.mark.parametrize("key", list(CONFIGS))
def test_no_form_rule_finds_a_new_answer_above_chance(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    order = order_of(cfg)
    found, asked = Counter(), Counter()
    for name in all_hook_names(cfg, inside=True):
        for n, maker in enumerate(questions_for(name, order)):
            group = (maker.__name__, str(node_for_hook(name, order).kind))
            for seed in range(DRAWS):
                q = question_for(name, views, order, n, seed=seed)
                asked[group] += 1
                found.update((group, rule) for rule, i in tells(q.options).items()
                             if i == q.answer)
    over = {f"{g} {rule}": f"{n}/{asked[g]}" for (g, rule), n in found.items()
            if n / asked[g] > 1 / 4 + 0.2}
    assert not over, over


def test_rmsnorm_questions_are_answered_by_the_tensors(passes):
    cfg, views = CONFIGS["llama"], passes["llama"]
    q = rms_mean_question(live(views, cfg, "norm1"), random.Random(0))
    assert q.options[q.answer] == "leaves the mean in, divides by its root mean square"
    x = views[block_hook_name(1, "add1")].array.reshape(-1, 32)[-1]  # norm2's input
    q = rms_mean_question(live(views, cfg, "norm2"), random.Random(0))
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
    assert f"mean {x.mean():.3g} and root mean square {rms:.3g}" in q.explanation
    q = rms_size_question(live(views, cfg, "norm2"), random.Random(1))
    assert q.options[q.answer] == "1" and f"{rms / np.sqrt(rms ** 2 + 1e-5):.6f}" in q.explanation


@pytest.mark.parametrize("key", list(CONFIGS))
def test_ropes_angle_and_shifted_score_are_the_models(passes, key):
    cfg, views = CONFIGS[key], passes[key]
    q = rope_angle_question(live(views, cfg, QUERIES_ROPE), random.Random(0))
    assert q.options[q.answer] == "2"  # the last of 3 tokens at position 2, θ₀ = 1
    for seed in range(4):
        q = rope_shift_question(live(views, cfg, KEYS_ROPE), random.Random(seed))
        assert q.options[q.answer] == "it stays the same as it was"
        here, moved = (float(v) for v in
                       q.explanation.split("scores ")[1].split(" with both")[0].split(
                           " where they stand and "))
        score = float(views[block_hook_name(1, SCORES)].array[0, 0, 2, 0])  # the model's own
        assert here == pytest.approx(score, rel=1e-5, abs=1e-6)
        assert moved == pytest.approx(here, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("key, weights, group, cache", [("llama", 6144, 2, 32),
                                                         ("qwen3", 6144, 2, 64)])
def test_swiglu_and_gqa_answers_equal_hand_counts(passes, key, weights, group, cache):
    cfg, views = CONFIGS[key], passes[key]
    q = swiglu_weights_question(live(views, cfg, "ff.product"), random.Random(0))
    assert q.options[q.answer] == f"{weights:,}" == f"{3 * 32 * cfg.hidden_dim:,}"
    assert group_question(live(views, cfg, KEYS_SHARED), random.Random(0)).options[
        group_question(live(views, cfg, KEYS_SHARED), random.Random(0)).answer] == str(group)
    q = cache_question(live(views, cfg, KEYS), random.Random(0))
    assert q.options[q.answer] == str(cache) == str(2 * cfg.kv_heads * cfg.head_dim)
    silu = views[block_hook_name(1, "ff.silu")].array
    share = float((np.abs(silu) <= 0.1).mean())
    q = gate_share_question(live(views, cfg, "ff.silu"), random.Random(0))
    assert f"{100 * share:.1f}%" in q.explanation


def test_gemmas_questions_name_its_gelu_gate_and_small_inputs_are_explained(passes):
    """Gemma's gate is GELU (tanh), never SiLU, in every question; the root mean square a
    norm makes is explained by its live input, eps counting only for a tiny one."""
    cfg, views = CONFIGS["gemma3"], passes["gemma3"]
    order = order_of(cfg)
    for name in all_hook_names(cfg, inside=True):
        for asked in range(len(questions_for(name, order))):
            q = question_for(name, views, order, asked, seed=asked)
            words = q.text + "".join(q.options) + q.feedback(q.answer) + q.feedback(1 - q.answer)
            assert "SiLU" not in words and "SwiGLU" not in words.replace("SwiGLU's three", ""), (name, q)
    weights = swiglu_weights_question(live(views, cfg, "ff"), random.Random(0))
    assert "a GeGLU is not 4 × emb_dim wide" in weights.feedback(weights.answer)
    from explorer.core.lessons.question import Live
    x = np.asarray(views["trf_blocks.1.ff"].array, np.float64).reshape(-1, 32)[-1]  # its input
    rms_in = float(np.sqrt(np.mean(x ** 2)))
    normed = rms_in / np.sqrt(rms_in ** 2 + cfg.norm_eps)
    small = rms_size_question(Live("trf_blocks.1.post_norm2", views, order, cfg.norm_eps),
                              random.Random(0))
    said = small.feedback(small.answer)
    assert cfg.norm_eps == 1e-6 and f"root mean square, {rms_in:.3g}, is near √eps (0.001)" in said
    assert normed < 0.9 and f"but {normed:.3g} for the last vector here" in said


def test_the_experts_question_is_answered_by_the_pass_routing(passes):
    """Which experts the last token runs: the non-zero weights of its row in the pass,
    named with their weights; each distractor is another set of experts (the next-best
    kept, the k least, the best alone), never the answer; a mixture's mistake says the KV
    cache is as a dense block's."""
    from explorer.core.lessons.explain import numbers
    from explorer.core.lessons.quiz_moe import experts_question
    cfg, views = CONFIGS["qwen3moe"], passes["qwen3moe"]
    row = views[block_hook_name(1, "ff.routing")].array.reshape(-1, 8)[-1]
    first, second = np.flatnonzero(row)
    for seed in range(5):
        q = experts_question(live(views, cfg, "ff.routing"), random.Random(seed))
        assert q.options[q.answer] == f"experts {first} and {second}"
        assert len(set(q.options)) == len(q.options) == 4
        assert all(o.startswith("expert") for o in q.options)
    named = ", ".join(f"expert {e} ({row[e]:.3g})" for e in np.flatnonzero(row))
    assert f"every other expert's weight to 0 ({named})" in q.explanation
    mistake = cfg.family.words.mistake[node_for_hook("trf_blocks.0.ff", order_of(cfg)).kind]
    assert "does not change the KV cache" in mistake.format(**numbers(cfg))
