"""Where the norm sits: each of the six placements, on GPT-2's block and on the Llama /
Qwen block, computes its formula — checked against a forward written out here from the
formula alone, with the model's own modules — and its node table says what the model
does: every add is its branch plus the shortcut the table names, every node is a hook
point, the KV cache gives the same logits."""

from __future__ import annotations

import pytest
import torch

from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import GPTConfig, preset
from explorer.core.gpt.family import NormPosition
from explorer.core.gpt.nodes import (BLOCK_INPUT, all_hook_names, block_hook_name, block_input,
                                     order_of, residual_branches, shortcut_sources)
from explorer.core.gpt.norms import DyT
from explorer.core.run.passes import EVERYTHING, run_prompt

P = NormPosition
PRESETS = ("tiny", "llama-tiny", "qwen3-tiny")
IDS = [464, 1049, 11, 290, 262, 3290]


def _embedded(model, ids: torch.Tensor) -> torch.Tensor:
    x = model.tok_emb(ids)
    if hasattr(model, "pos_emb"):  # GPT-2's learned positions
        x = x + model.pos_emb(torch.arange(ids.shape[1]))
    return x


def by_formula(model, ids: torch.Tensor, position: NormPosition) -> torch.Tensor:
    """The logits as each placement's formula says, one sublayer f at a time."""
    x = _embedded(model, ids)
    for b in model.trf_blocks:
        def att(h):
            return b.att(h)
        if position in (P.PRE, P.DYT):  # x + f(norm(x))
            x = x + att(b.norm1(x))
            x = x + b.ff(b.norm2(x))
        elif position == P.POST:  # norm(x + f(x))
            x = b.norm1(x + att(x))
            x = b.norm2(x + b.ff(x))
        elif position == P.BRANCH:  # x + norm(f(x))
            x = x + b.norm1(att(x))
            x = x + b.norm2(b.ff(x))
        elif position == P.PERI:  # x + norm_out(f(norm_in(x)))
            x = x + b.post_norm1(att(b.norm1(x)))
            x = x + b.post_norm2(b.ff(b.norm2(x)))
        else:  # x + att(norm(x)) + ff(norm(x))
            n = b.norm1(x)
            x = x + att(n) + b.ff(n)
    return model.out_head(model.final_norm(x))


@pytest.mark.parametrize("position", list(P))
@pytest.mark.parametrize("name", PRESETS)
def test_each_placement_computes_its_formula(name, position):
    model = build_model(preset(name, norm_position=position), seed=3)
    ids = torch.tensor([IDS])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), by_formula(model, ids, position),
                                   atol=1e-5, rtol=1e-5)
        cache = model.new_cache()
        model(ids[:, :-1], cache=cache)
        torch.testing.assert_close(model(ids[:, -1:], cache=cache)[0, -1], model(ids)[0, -1],
                                   atol=1e-5, rtol=1e-5)
    names = set(dict(model.named_modules()))
    assert not [n for n in all_hook_names(model.cfg, inside=True) if n not in names]
    norms = [m for m in model.modules() if isinstance(m, DyT)]
    # DyT: a norm's places (and the final norm's) taken, none elsewhere
    assert len(norms) == (2 * model.cfg.n_layers + 1 if position == P.DYT else 0)


def test_dyt_is_its_formula_value_by_value():
    dyt = DyT(8)
    with torch.no_grad():
        dyt.alpha.fill_(0.7)
        dyt.scale.uniform_(0.5, 1.5)
        dyt.shift.normal_()
    x = torch.randn(2, 3, 8) * 4
    expected = dyt.scale * torch.tanh(0.7 * x) + dyt.shift
    torch.testing.assert_close(dyt(x), expected)
    assert float(DyT(4).alpha.detach()) == 0.5  # the paper's α₀, as initialised


@pytest.mark.parametrize("position", list(P))
@pytest.mark.parametrize("name", ("tiny", "llama-tiny"))
def test_the_tables_wiring_is_the_models(name, position):
    """Every add captured is the branch the table names plus the shortcut it names."""
    cfg = preset(name, norm_position=position)
    model = build_model(cfg, seed=5)
    views = run_prompt(model, IDS, keep=EVERYTHING).views
    order = order_of(cfg)
    for layer in range(cfg.n_layers):
        for add, branch in residual_branches(order).items():
            source = shortcut_sources(order)[add]
            short = block_input(layer, order) if source == BLOCK_INPUT else block_hook_name(layer, source)
            total = views[block_hook_name(layer, branch)].array + views[short].array
            torch.testing.assert_close(torch.tensor(views[block_hook_name(layer, add)].array),
                                       torch.tensor(total), atol=1e-5, rtol=1e-5)


def test_a_placement_each_family_lacks_is_refused_and_the_words_say_where_the_norm_is():
    from explorer.core.gpt.nodes import node_for_hook
    with pytest.raises(ValueError, match="norm_position must be one of 'pre', 'post', 'branch', 'peri', 'parallel', 'dyt' for a GPT-2 block"):
        GPTConfig(norm_position="sandwich")
    order = order_of(preset("tiny", norm_position="branch"))
    assert "inside its branch" in node_for_hook("trf_blocks.0.norm1", order).description
    assert "on the block's input itself" in node_for_hook("trf_blocks.0.att", order).description
    peri = order_of(preset("llama-tiny", norm_position="peri"))
    assert "post_attention_layernorm" in node_for_hook("trf_blocks.1.post_norm1", peri).description
    parallel = order_of(preset("tiny", norm_position="parallel"))
    from explorer.core.gpt.nodes import input_node
    assert input_node("trf_blocks.1.ff.layers.0", parallel) == "trf_blocks.1.norm1"
    assert node_for_hook("final_norm", order_of(preset("tiny", norm_position="dyt"))).label == \
        "Final DyT"
    assert [p.title for p in P] == ["Pre-LN", "Post-LN", "Branch norm", "Peri-LN", "Parallel",
                                    "DyT"]
