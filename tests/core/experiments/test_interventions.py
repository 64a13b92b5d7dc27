"""Interventions: each against a hand-built reference, identical in the prompt pass and
in KV-cached decoding, hooks gone after every run, bad files refused whole."""

import json

import pytest
import torch
import torch.nn.functional as F

from explorer.core.base.cancel import Cancelled
from explorer.core.run.capture import StopCheck
from explorer.core.gpt.config import preset
from explorer.core.run.generation import GenerationSettings, generate
from explorer.core.experiments.interventions import (Intervention, applied, from_dict, load_file,
                                                     resolve, save_file)
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names
from explorer.core.run.passes import run_prompt
from explorer.core.gpt.tokenizer import encode

IDS = encode("Every effort moves you forward")


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny", n_layers=3), seed=8)


def logits(model, specs, ids=IDS):
    resolved = resolve(model, specs, ids)
    with torch.inference_mode(), applied(model, resolved):
        return model(torch.tensor([ids]))[0]


def no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def manual(model, ids, att_out=None, gelu=None, add1_shortcut=True):
    """The model's forward written out, with places to change one thing."""
    x = model.drop_emb(model.tok_emb(torch.tensor([ids])) + model.pos_emb(torch.arange(len(ids))))
    for i, block in enumerate(model.trf_blocks):
        a = block.att(block.norm1(x))
        if att_out is not None and i == 1:
            a = att_out(block, block.norm1(x), a)
        x = (x if add1_shortcut or i != 1 else 0) + a
        h = block.ff.layers[0](block.norm2(x))
        h = gelu(h) if gelu is not None and i == 1 else block.ff.layers[1](h)
        x = x + block.ff.layers[2](h)
    return model.out_head(model.final_norm(x))[0]


def test_zero_and_scale_equal_hand_built_models(model):
    with torch.inference_mode():
        zeroed = manual(model, IDS, att_out=lambda b, x, a: torch.zeros_like(a))
        doubled = manual(model, IDS, att_out=lambda b, x, a: 2 * a)
        torch.testing.assert_close(logits(model, [Intervention("zero", "trf_blocks.1.att")]), zeroed)
        # drop1 outputs att's tensor in eval: zeroing it is the same change
        torch.testing.assert_close(logits(model, [Intervention("zero", "trf_blocks.1.drop1")]), zeroed)
        torch.testing.assert_close(logits(model, [Intervention("scale", "trf_blocks.1.att", k=2.0)]),
                                   doubled)
        relu = manual(model, IDS, gelu=F.relu)
        torch.testing.assert_close(logits(model, [Intervention("activation", "trf_blocks.1.ff.layers.1",
                                                               function="relu")]), relu)
        no_short = manual(model, IDS, add1_shortcut=False)
        torch.testing.assert_close(logits(model, [Intervention("no-shortcut", "trf_blocks.1.add1")]), no_short)
    assert no_hooks(model)


def test_head_knock_out_equals_slicing_the_heads_outputs(model):
    cfg = model.cfg
    hd = cfg.head_dim

    def without_heads(block, x, a):
        att = block.att
        b, t, _ = x.shape
        q = att.W_query(x).view(b, t, cfg.n_heads, hd).transpose(1, 2)
        k = att.W_key(x).view(b, t, cfg.n_heads, hd).transpose(1, 2)
        v = att.W_value(x).view(b, t, cfg.n_heads, hd).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)  # (B, T, H, hd)
        w = att.out_proj.weight  # (C, C): head h is columns h*hd..(h+1)*hd
        heads = [ctx[:, :, h] @ w[:, h * hd:(h + 1) * hd].T for h in range(cfg.n_heads)]
        return sum(heads[h] for h in range(cfg.n_heads) if h not in (0, 2)) + att.out_proj.bias

    with torch.inference_mode():
        expected = manual(model, IDS, att_out=without_heads)
        got = logits(model, [Intervention("heads", "trf_blocks.1.att", heads=(0, 2))])
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_mean_steer_and_patch(model):
    with torch.inference_mode():
        clean = model(torch.tensor([IDS]))[0]
        zero_steer = Intervention("steer", "trf_blocks.0.add2", k=0.0, prompt="Love", prompt_b="Hate")
        assert torch.equal(logits(model, [zero_steer]), clean)  # k = 0 changes nothing
        steer = Intervention("steer", "trf_blocks.0.add2", k=3.0, prompt="Love", prompt_b="Hate")
        assert not torch.allclose(logits(model, [steer]), clean)
        # patching the clean run's own activation into the clean run: bit-identical
        for node in all_hook_names(model.cfg, include_pattern=False):  # every node
            same = Intervention("patch", node, prompt="Every effort moves you forward")
            assert torch.equal(logits(model, [same]), clean), node
        mean = resolve(model, [Intervention("mean", "trf_blocks.1.att")], IDS)[0]
        captured = run_prompt(model, IDS).views["trf_blocks.1.att"].array
        torch.testing.assert_close(mean.tensor, torch.from_numpy(captured.reshape(-1, 32).mean(0)))
        after = run_prompt(model, IDS).views  # mean-ablated: every position holds the mean
        with applied(model, [mean]):
            after = run_prompt(model, IDS).views
        torch.testing.assert_close(torch.from_numpy(after["trf_blocks.1.att"].array[0, 2]), mean.tensor)
        torch.testing.assert_close(torch.from_numpy(after["trf_blocks.1.drop1"].array[0, 0]), mean.tensor)
    assert no_hooks(model)


def test_interventions_apply_alike_with_the_kv_cache_and_recomputing(model):
    specs = [Intervention("steer", "trf_blocks.1.add1", k=8.0, prompt="Love", prompt_b="Hate"),
             Intervention("zero", "trf_blocks.0.ff", positions=(1, 6, 7)),
             Intervention("heads", "trf_blocks.2.att", heads=(1,)),
             Intervention("patch", "trf_blocks.0.add2", prompt="I had always thought Jack Gisburn",
                          positions=(0, 5))]
    resolved = resolve(model, specs, IDS)
    settings = GenerationSettings(max_new_tokens=8, stop_at_eot=False)
    with applied(model, resolved):
        cached = generate(model, IDS, settings)
        whole = generate(model, IDS, GenerationSettings(max_new_tokens=8, stop_at_eot=False,
                                                        recompute=True))
    assert cached.new_ids == whole.new_ids
    for a, b in zip(cached.steps, whole.steps):
        assert a.top_ids == b.top_ids and abs(a.prob - b.prob) < 1e-4
    plain = generate(model, IDS, settings).new_ids
    assert plain != cached.new_ids  # the interventions did change the continuation
    assert no_hooks(model)


def test_hooks_never_leak_also_on_errors_and_stops(model):
    resolved = resolve(model, [Intervention("scale", "trf_blocks.0.att", k=0.5),
                               Intervention("no-shortcut", "trf_blocks.1.add2")], IDS)
    for i in range(200):
        try:
            with torch.inference_mode(), applied(model, resolved), \
                    StopCheck(model, lambda: i % 2 == 0):
                model(torch.tensor([IDS]))
        except Cancelled:
            pass
    with pytest.raises(ValueError), applied(model, resolved):
        model(torch.tensor([[1] * 100]))  # beyond the context: the forward raises
    assert no_hooks(model)


def test_bad_interventions_and_files_say_what_is_wrong_and_apply_nothing(model, tmp_path):
    cfg = model.cfg
    bad = [({"kind": "zero", "node": "trf_blocks.9.att"}, "no such node"),
           ({"kind": "melt", "node": "trf_blocks.0.att"}, "unknown intervention"),
           ({"kind": "scale", "node": "trf_blocks.0.att", "k": "two"}, "k must be a finite number"),
           ({"kind": "scale", "node": "trf_blocks.0.att", "k": float("nan")}, "finite|NaN, which is not a number"),
           ({"kind": "heads", "node": "trf_blocks.0.att", "heads": [7]}, "heads must be numbers 0..3"),
           ({"kind": "heads", "node": "trf_blocks.0.norm1", "heads": [0]}, "at an attention node"),
           ({"kind": "no-shortcut", "node": "trf_blocks.0.att"}, "at a block's add"),
           ({"kind": "patch", "node": "trf_blocks.0.att"}, "needs the prompt"),
           ({"kind": "zero", "node": "trf_blocks.0.att", "colour": "red"}, "unknown intervention field"),
           ({"kind": "zero", "node": "trf_blocks.0.att", "positions": "all"}, "must be a list"),
           # a field the kind does not read is refused, not ignored
           ({"kind": "zero", "node": "trf_blocks.0.att", "heads": [1]}, "a zero intervention takes no heads"),
           ({"kind": "scale", "node": "trf_blocks.0.att", "k": 2, "function": "relu"},
            r"a scale intervention takes no function \(it reads k and positions\)"),
           # a strength that overflows float32 downstream: refused, not NaN output
           ({"kind": "steer", "node": "trf_blocks.0.att", "k": 1e308, "vector": [1.0] * 32},
            "k must be a finite number from −1,000,000 to 1,000,000")]
    for item, words in bad:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"interventions": [{"kind": "zero", "node": "trf_blocks.0.att"}, item]}))
        with pytest.raises(ValueError, match=words):
            load_file(path, cfg)
    wrong_shape = from_dict({"kind": "steer", "node": "trf_blocks.0.att", "vector": [1.0, 2.0]})
    with pytest.raises(ValueError, match="has 2 values; this node has 32"):
        resolve(model, [wrong_shape], IDS)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_file(tmp_path / "x.json", cfg)
    with pytest.raises(ValueError, match="not a file"):
        load_file(tmp_path, cfg)
    good = [Intervention("heads", "trf_blocks.0.att", heads=(1, 2)),
            Intervention("steer", "trf_blocks.1.add2", k=4.0, prompt="Love", prompt_b="Hate"),
            Intervention("zero", "trf_blocks.0.ff", positions=(0, 3))]
    save_file(tmp_path / "ok.json", good)
    assert load_file(tmp_path / "ok.json", cfg) == (good, True)
    save_file(tmp_path / "off.json", good, enabled=False)
    assert load_file(tmp_path / "off.json", cfg) == (good, False)
    (tmp_path / "odd.json").write_text('{"enabled": "no", "interventions": []}')
    with pytest.raises(ValueError, match='"enabled" must be true or false'):
        load_file(tmp_path / "odd.json", cfg)
    assert no_hooks(model)


def test_clean_against_changed_step_by_step(model):
    from explorer.core.experiments.whatif import compare

    none = compare(model, [], IDS, new_tokens=5)
    assert none.clean_ids == none.changed_ids and all(s.kl == 0 for s in none.steps)
    assert none.first_difference() is None
    resolved = resolve(model, [Intervention("scale", "trf_blocks.2.add2", k=-3.0)], IDS)
    diff = compare(model, resolved, IDS, new_tokens=5)
    assert len(diff.steps) == 5 and diff.clean_ids == none.clean_ids
    assert diff.first_difference() == 0 and diff.steps[0].kl > 0.01
    with torch.inference_mode():  # step 0 is the prompt's next token: the reference by hand
        p = torch.log_softmax(model(torch.tensor([IDS]))[0, -1], -1)
        with applied(model, resolved):
            q = torch.log_softmax(model(torch.tensor([IDS]))[0, -1], -1)
    assert diff.steps[0].kl == pytest.approx(float((p.exp() * (p - q)).sum()), rel=1e-4)
    top = diff.steps[0].top[0]
    assert top.delta_logp == pytest.approx(__import__("math").log(top.changed / top.clean), rel=1e-3)
    assert no_hooks(model)


def test_an_intervention_prompt_longer_than_the_context_is_refused_not_cut(model):
    """The tiny model reads 64 tokens: a patch from a 200-token prompt would silently be
    a patch from its last 64."""
    long = from_dict({"kind": "patch", "node": "trf_blocks.0.att", "prompt": " word" * 200})
    with pytest.raises(ValueError, match="an intervention's prompt has 200 tokens; the model "
                                         "reads at most 64"):
        resolve(model, [long], IDS)


def _moe_outputs(model, specs, ids):
    """Block 0's feed-forward input and output, its routing weights, under ``specs``."""
    from explorer.core.run.capture import Capture
    names = ["trf_blocks.0.norm2", "trf_blocks.0.ff", "trf_blocks.0.ff.routing"]
    resolved = resolve(model, specs, ids)
    with torch.inference_mode(), applied(model, resolved), \
            Capture(model, names, tensors=True, inside=True) as cap:
        model(torch.tensor([ids]))
    views = cap.views()
    return [torch.from_numpy(views[n].array)[0] for n in names]


def test_forcing_an_expert_changes_exactly_that_tokens_feed_forward_output():
    """Token 2 sent to expert 5 alone: its output is expert 5's SwiGLU of its input,
    written out here; every other token's output is the clean one."""
    model = build_model(preset("qwen3moe-tiny"), seed=2).eval()
    force = Intervention("force-expert", "trf_blocks.0.ff.routing", experts=(5,), positions=(2,))
    _, clean, _ = _moe_outputs(model, [], IDS)
    x, out, weights = _moe_outputs(model, [force], IDS)
    ff = model.trf_blocks[0].ff
    with torch.no_grad():
        want = ff.fc3[5](F.silu(ff.fc1[5](x[2])) * ff.fc2[5](x[2]))
    torch.testing.assert_close(out[2], want, atol=1e-6, rtol=1e-5)
    assert weights[2].tolist() == [0, 0, 0, 0, 0, 1, 0, 0]
    others = [p for p in range(len(IDS)) if p != 2]
    torch.testing.assert_close(out[others], clean[others])
    assert (out[2] - clean[2]).abs().max() > 1e-4 and force.describe().endswith("force expert 5 at positions [2]")
    assert from_dict(force.to_dict()) == force


def test_a_banned_expert_gets_no_token_and_each_token_still_gets_k_experts():
    model = build_model(preset("qwen3moe-tiny"), seed=2).eval()
    _, _, clean = _moe_outputs(model, [], IDS)
    busiest = int((clean != 0).sum(0).argmax())
    ban = Intervention("ban-experts", "trf_blocks.0.ff.gate", experts=(busiest,))
    _, _, weights = _moe_outputs(model, [ban], IDS)
    assert (weights[:, busiest] == 0).all() and ((weights != 0).sum(-1) == 2).all()
    moved = (clean[:, busiest] != 0).nonzero().flatten()
    assert len(moved) and not torch.equal(weights[moved], clean[moved])
    assert no_hooks(model)


@pytest.mark.parametrize("spec,message", [
    (dict(kind="force-expert", node="trf_blocks.0.ff.gate", experts=[1]), "weights (….ff.routing)"),
    (dict(kind="force-expert", node="trf_blocks.0.ff.routing", experts=[1, 2]), "force one expert"),
    (dict(kind="force-expert", node="trf_blocks.0.ff.routing", experts=[8]), "experts must be numbers 0..7"),
    (dict(kind="ban-experts", node="trf_blocks.0.ff.gate", experts=list(range(7))),
     "at most 6 of the 8 can be banned"),
    (dict(kind="zero", node="trf_blocks.0.ff.gate", experts=[1]), "a zero intervention takes no experts"),
])
def test_expert_interventions_that_cannot_apply_are_refused_in_one_line(spec, message):
    cfg = preset("qwen3moe-tiny")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        from_dict(spec).check(cfg)
    with pytest.raises(ValueError, match="a mixture of experts' router"):
        Intervention("ban-experts", "trf_blocks.0.att", experts=(1,)).check(preset("tiny"))
