"""Why this token: direct logit attribution, head roles and the layer table, checked
against the model's own logits and against a model whose heads and neurons are built
by hand."""

import numpy as np
import pytest
import torch

from explorer.core.attribution.direct import Branch
from explorer.core.attribution.direct import attribute
from explorer.core.attribution.head_roles import head_roles
from explorer.core.attribution.layer_table import layer_rows
from explorer.core.attribution.reading import read_position
from explorer.core.base.cancel import Cancelled
from explorer.core.gpt.config import GPTConfig, preset
from explorer.core.gpt.build import build_model

PROMPT = [464, 3290, 286, 262, 1295, 11, 484, 373, 5597, 284, 1560, 502, 13, 887, 314]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "gpt2-small"])
def test_the_parts_add_up_to_the_logit_at_every_position(name):
    model = build_model(preset(name), seed=3)
    with torch.no_grad():
        every = model(torch.tensor([PROMPT]))[0]  # (T, vocab): the model's own logits
    for position in range(len(PROMPT)):
        reading = read_position(model, PROMPT, position)
        logits = every[position]
        target = int(logits.argmax())
        a = attribute(model, reading, target)
        assert a.exact and a.logit == pytest.approx(float(logits[target]), abs=1e-5)
        assert a.total == pytest.approx(a.logit, abs=1e-4)
        b = attribute(model, reading, target, versus=13)  # the difference to '.'
        assert b.total == pytest.approx(float(logits[target] - logits[13]), abs=1e-4)
        parts = {p.label: p.value for p in a.parts}
        for layer in range(model.cfg.n_layers):
            att = [p.value for p in a.parts if p.layer == layer and p.kind == Branch.ATTENTION][0]
            ff = [p.value for p in a.parts if p.layer == layer and p.kind == Branch.FEED_FORWARD][0]
            assert a.heads[layer].sum() + a.attention_bias[layer] == pytest.approx(att, abs=1e-6)
            assert a.neurons[layer].sum() + a.ff_bias[layer] == pytest.approx(ff, abs=1e-6)
        assert len(parts) == 3 + 2 * model.cfg.n_layers


@pytest.mark.parametrize("name", ["llama-tiny", "qwen3-tiny"])
def test_a_llama_blocks_parts_add_up_exactly_with_rmsnorm(name):
    """RMSNorm takes no mean out and adds no shift: the final norm's scale held fixed,
    the token embedding, every attention (its heads) and every SwiGLU (its neurons: the
    gated product times fc3's columns) add up to the logit, with no shift part."""
    cfg = preset(name)
    model = build_model(cfg, seed=3)
    with torch.no_grad():  # norms away from 1, so a forgotten scale would show
        for n, p in model.named_parameters():
            if n.endswith("scale"):
                p.mul_(1 + 0.5 * torch.rand_like(p))
        every = model(torch.tensor([PROMPT]))[0]
    for position in (0, 6, len(PROMPT) - 1):
        reading = read_position(model, PROMPT, position)
        assert not reading.position_embedding.any()  # RoPE adds nothing to the stream
        logits = every[position]
        target = int(logits.argmax())
        a = attribute(model, reading, target, versus=13)
        assert a.exact and a.logit == pytest.approx(float(logits[target] - logits[13]), abs=1e-5)
        assert a.total == pytest.approx(a.logit, abs=1e-5)
        kinds = [p.kind for p in a.parts]
        assert "shift" not in kinds and kinds.count("embedding") == 1
        for layer in range(cfg.n_layers):
            att = [p.value for p in a.parts if p.layer == layer and p.kind == Branch.ATTENTION][0]
            ff = [p.value for p in a.parts if p.layer == layer and p.kind == Branch.FEED_FORWARD][0]
            assert a.heads[layer].sum() == pytest.approx(att, abs=1e-6)
            assert a.neurons[layer].shape == (cfg.hidden_dim,)
            assert a.neurons[layer].sum() == pytest.approx(ff, abs=1e-6)
            assert a.attention_bias[layer] == 0 and a.ff_bias[layer] == 0
        assert reading.blocks[0].keys.shape == (cfg.n_heads, position + 1, cfg.head_dim)


def test_post_ln_gives_lens_changes_and_says_they_are_not_contributions():
    model = build_model(preset("tiny", norm_position="post"), seed=3)
    reading = read_position(model, PROMPT, 9)
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT]))[0, 9]
    a = attribute(model, reading, 42)
    assert not a.exact and a.heads is None and a.neurons is None and a.top_heads() == []
    assert "not contributions" in a.note and "Post-LN" in a.note
    assert a.total == pytest.approx(float(logits[42]), abs=1e-4)  # the changes telescope
    assert [p.kind for p in a.parts[1:3]] == ["attention", "feed-forward"]


# ---------------------------------------------------------------- a model built by hand

V, T, D = 32, 32, 192  # tokens, positions; the stream: token, -token, position, -position,
TOK, NTOK, POS, NPOS, PREV, NPREV = 0, 32, 64, 96, 128, 160  # previous token, -previous
NEURON, WRITTEN = 5, 9  # block 2's neuron 5 writes token 9's unembedding


def hand_built():
    """Block 1, head 1 attends to the previous token and writes its identity; block 2,
    head 1 attends to the token after an earlier copy of the current one (induction) and
    copies it; the other heads and neurons are zero but block 2's neuron 5, which writes
    token 9's unembedding. Every stream vector has mean 0 and the same norm, so each
    LayerNorm only scales by sqrt(32)."""
    cfg = GPTConfig(vocab_size=V, context_length=T, emb_dim=D, n_heads=2, n_layers=2,
                    drop_rate=0.0, tie_weights=False)
    model = build_model(cfg, seed=0)
    sharp = 6.0
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for n in (model.final_norm, *[m for b in model.trf_blocks for m in (b.norm1, b.norm2)]):
            n.scale.fill_(1.0)
        i = torch.arange(V)
        model.out_head.weight[i, TOK + i] = 1.0
        model.tok_emb.weight[i, TOK + i], model.tok_emb.weight[i, NTOK + i] = 1.0, -1.0
        model.pos_emb.weight[i, POS + i], model.pos_emb.weight[i, NPOS + i] = 1.0, -1.0
        first, second = model.trf_blocks[0].att, model.trf_blocks[1].att
        first.W_query.weight[i, POS + i] = sharp  # head 1 (rows 0..95): query = position p
        first.W_key.weight[i[:-1] + 1, POS + i[:-1]] = sharp  # key = position k + 1
        first.W_value.weight[i, TOK + i] = 1.0  # value: the token
        first.out_proj.weight[PREV + i, i] = 1 / 32 ** 0.5  # written as the previous token
        first.out_proj.weight[NPREV + i, i] = -1 / 32 ** 0.5
        second.W_query.weight[i, TOK + i] = sharp  # query: the current token
        second.W_key.weight[i, PREV + i] = sharp  # key: the token before the key
        second.W_value.weight[i, TOK + i] = 1.0
        second.out_proj.weight[TOK + i, i] = 1.0  # copies the attended token
        ff = model.trf_blocks[1].ff.layers
        ff[0].bias[NEURON] = 3.0  # always on: GELU(3) ~ 3
        ff[2].weight[:, NEURON] = 0.5 * model.out_head.weight[WRITTEN]
    return model.eval()


def test_hand_built_previous_token_and_induction_heads_are_named():
    model = hand_built()
    prompt = [3, 17, 8, 25, 11, 30, 6, 21, 14, 9, 27, 4]
    roles = head_roles(model, prompt, induction=True, length=12, sequences=3)
    prev, induction = roles.scores["previous-token"], roles.scores["induction"]
    assert prev[0, 0] > 0.9 and prev[0, 0] > 3 * np.delete(prev.ravel(), 0).max()
    assert induction[1, 0] > 0.8 and induction[1, 0] > 3 * np.delete(induction.ravel(), 2).max()
    assert roles.role(0, 0) == "previous-token" and roles.role(1, 0) == "induction"
    assert roles.role(0, 1) == "" and roles.best("induction")[:2] == (1, 0)
    assert roles.copying[1, 0] > 1.0 and abs(roles.copying[0, 1]) < 0.05
    assert len(roles.battery_ids) == 24 and roles.battery_ids[:12] == roles.battery_ids[12:]


def test_the_neuron_that_writes_a_token_is_its_top_neuron():
    model = hand_built()
    reading = read_position(model, [3, 17, 8, 25], 3)
    a = attribute(model, reading, WRITTEN)
    assert a.top_neurons(1)[0][:2] == (1, NEURON) and a.top_neurons(1)[0][2] > 1.0
    assert abs(a.top_neurons(2)[1][2]) < 1e-9  # every other neuron is silent
    assert attribute(model, reading, 12).top_neurons(1)[0][2] < 0  # others lose to it


def test_the_layer_table_reads_the_same_pass():
    model = build_model(preset("tiny"), seed=3)
    reading = read_position(model, PROMPT, 14)
    a = attribute(model, reading, 42)
    rows = layer_rows(model, reading, a)
    assert [r.block for r in rows] == [0, 1]
    assert rows[-1].lens_top_id == int(np.argmax(reading.logits))
    assert rows[-1].residual_after_ff == pytest.approx(np.linalg.norm(reading.final_input))
    assert sum(r.contribution for r in rows) == pytest.approx(a.block_totals().sum())
    assert all(0 <= r.entropy <= np.log(15) + 1e-9 for r in rows)


def test_a_uniform_head_has_the_entropy_of_a_uniform_row():
    model = hand_built()  # the heads with zero weights attend evenly
    reading = read_position(model, [3, 17, 8, 25, 11], 4)
    from explorer.core.attribution.layer_table import attention_entropy
    block = reading.blocks[0]
    assert attention_entropy(block.query[1:], block.keys[1:]) == pytest.approx(np.log(5))


def test_stop_ends_the_induction_battery():
    model = build_model(preset("tiny"), seed=3)
    done = []
    with pytest.raises(Cancelled):
        head_roles(model, PROMPT, induction=True, sequences=4, should_stop=lambda: bool(done),
                   progress=lambda i, n: done.append(i))
    assert done == [1]


def test_a_long_prompt_keeps_the_scores_not_the_patterns():
    from explorer.core.attribution.head_roles import KEEP, pattern_scores, read_patterns

    model = build_model(preset("tiny", context_length=KEEP + 10), seed=3)
    long = (PROMPT * 40)[:KEEP + 1]
    roles = head_roles(model, long)
    assert roles.patterns is None and roles.scores["local"].shape == (2, 4)
    assert roles.values("induction") is None and roles.values("copying") is None  # no battery
    with pytest.raises(ValueError, match="run the induction battery first"):
        roles.best("copying")
    short = head_roles(model, long[:60])
    whole = read_patterns(model, torch.tensor([long[:60]]))[1]
    for role, values in pattern_scores(whole).items():  # the same from the whole patterns
        np.testing.assert_allclose(short.scores[role], values, rtol=1e-6)


def test_the_contribution_graph_finds_the_hand_built_heads_edges():
    from explorer.core.attribution.contributions import contribution_graph

    model = hand_built()
    first = [3, 17, 8, 25, 11, 30]
    graph = contribution_graph(model, first + first)
    shares = graph.heads.sum(axis=(1, 3)) + graph.attention_stream
    assert np.all(shares > 0.95) and np.all(shares <= 1 + 1e-9)  # the bias brings the rest
    for p in range(1, 12):  # block 1: head 1 reads the token before, and nothing else does
        layer0 = graph.heads[0, :, p]
        assert np.unravel_index(layer0.argmax(), layer0.shape) == (0, p - 1)
        assert layer0[0, p - 1] > 0.2 and layer0[1].max() < 1e-9
    for p in range(7, 12):  # block 2, second copy: head 1 reads the token after the first
        assert graph.heads[1, 0, p].argmax() == p - 6 + 1
    edges = graph.edges(0.2)
    assert ("head", 0, 0, 4, 5) in {e[:5] for e in edges}
    assert all(e[5] > 0.2 for e in edges)
    assert graph.ff[0].max() < 1e-9 and graph.ff[1].max() > 0.01  # block 2 has its neuron


@pytest.mark.parametrize("name", ["llama-tiny", "qwen3-tiny"])
def test_copying_scores_on_a_llama_block_go_through_rmsnorm(name):
    """Each head's direct part of the next copy's logit above the vocabulary's mean,
    through the final RMSNorm held fixed (no mean taken out); Qwen3's heads are 16 wide
    though 4 × 16 is not its width of 32. Computed here head by head with torch."""
    from explorer.core.attribution.head_roles import copying_scores
    from explorer.core.gpt.hooks import hooks

    model = build_model(preset(name), seed=2).eval()
    cfg, length, hd = model.cfg, 6, model.cfg.head_dim
    first = torch.randint(0, cfg.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))
    ids = torch.cat([first, first], 1)
    contexts, finals = {}, []
    pre = [(f"trf_blocks.{i}.att.out_proj",
            lambda m, a, i=i: contexts.__setitem__(i, a[0].detach().double().numpy()))
           for i in range(cfg.n_layers)]
    pre.append(("final_norm", lambda m, a: finals.append(a[0].detach().double())))
    with torch.no_grad(), hooks(model, pre=pre):
        model(ids)
    got = copying_scores(model, ids.numpy(), contexts, finals[0].numpy(), length)
    assert got.shape == (cfg.n_layers, cfg.n_heads) and np.isfinite(got).all()
    unembed = model.out_head.weight.detach().double()
    gamma = model.final_norm.scale.detach().double()
    x = finals[0][0]  # (T, C)
    rms = torch.sqrt((x ** 2).mean(-1) + model.final_norm.eps)
    for layer in range(cfg.n_layers):
        w_o = model.trf_blocks[layer].att.out_proj.weight.detach().double()
        for h in range(cfg.n_heads):
            total = 0.0
            for p in range(length, 2 * length - 1):
                target = int(ids[0, p - length + 1])
                out = torch.from_numpy(contexts[layer][0, p, h * hd:(h + 1) * hd]) @ w_o[:, h * hd:(h + 1) * hd].T
                direction = (unembed[target] - unembed.mean(0)) * gamma / rms[p]
                total += float(direction @ out)
            assert got[layer, h] == pytest.approx(total / (length - 1), rel=1e-9, abs=1e-12)
