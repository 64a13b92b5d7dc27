"""The weights' memory layout for decoding (eval mode) and for training: the query, key
and value projections one matrix that a step reads in one product, wide matrices
column-major on a CPU in float32 — the same values, the same outputs, the same hooks —
and dense row-major parameters again for training's fused optimizer; the Llama block's
matrices laid out the same way."""

import copy

import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.playground.run_file import weights_sha256
from explorer.core.run.generation import GenerationSettings, generate


def _model(qkv_bias=False, **kw):
    return build_model(preset("tiny", qkv_bias=qkv_bias, **kw), seed=3)


def _separate(model):
    """The same weights, each parameter a dense row-major tensor of its own."""
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p in twin.parameters():
            p.data = p.detach().clone(memory_format=torch.contiguous_format)
    for block in twin.trf_blocks:
        if not (twin.cfg.family.name == "llama"):
            assert block.att._fused_views() is None
    return twin


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_eval_mode_reads_the_three_projections_as_one_column_major_matrix(qkv_bias):
    model = _model(qkv_bias)
    att = model.trf_blocks[1].att
    weight, bias = att._fused_views()
    c = model.cfg.emb_dim
    assert weight.shape == (3 * c, c) and weight.stride() == (1, 3 * c)  # column-major
    torch.testing.assert_close(weight, torch.cat([att.W_query.weight, att.W_key.weight,
                                                  att.W_value.weight]), rtol=0, atol=0)
    if qkv_bias:
        torch.testing.assert_close(bias, torch.cat([att.W_query.bias, att.W_key.bias,
                                                    att.W_value.bias]), rtol=0, atol=0)
    else:
        assert bias is None
    ff_in, ff_out = model.trf_blocks[0].ff.layers[0].weight, model.trf_blocks[0].ff.layers[2].weight
    assert ff_in.stride() == (1, 4 * c)  # 4C outputs of C inputs: column-major
    assert ff_out.is_contiguous()  # C outputs of 4C inputs: row-major reads fastest
    assert att.out_proj.weight.stride() == (1, c)
    head = model.out_head.weight
    assert head is model.tok_emb.weight and head.stride() == (1, model.cfg.vocab_size)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_decoding_gives_the_same_logits_and_tokens_as_separate_matrices(qkv_bias):
    model = _model(qkv_bias)
    with torch.no_grad():  # biases of zero would hide a bias in the wrong place
        for block in model.trf_blocks:
            for m in (block.att.W_query, block.att.W_key, block.att.W_value):
                if m.bias is not None:
                    m.bias.normal_(0, 0.5)
    twin = _separate(model)
    ids = torch.randint(0, model.cfg.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), twin(ids), atol=1e-5, rtol=1e-5)
        cache_a, cache_b = model.new_cache(), twin.new_cache()
        model(ids[:, :30], cache=cache_a)
        twin(ids[:, :30], cache=cache_b)
        for t in range(30, 40):  # one token at a time through the KV cache
            a = model(ids[:, t:t + 1], cache=cache_a)
            b = twin(ids[:, t:t + 1], cache=cache_b)
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    settings = GenerationSettings(max_new_tokens=12, stop_at_eot=False)
    assert generate(model, [5, 6, 7], settings).new_ids == generate(twin, [5, 6, 7], settings).new_ids


def test_a_hook_on_a_projection_sees_its_own_output():
    model = _model(qkv_bias=True)
    att = model.trf_blocks[0].att
    seen = {}
    hook = att.W_key.register_forward_hook(lambda m, i, o: seen.__setitem__("k", (i[0], o)))
    try:
        with torch.inference_mode():
            model(torch.tensor([[1, 2, 3, 4]]))
    finally:
        hook.remove()
    x, out = seen["k"]
    assert out.shape == (1, 4, model.cfg.emb_dim)
    with torch.no_grad():
        expected = x @ att.W_key.weight.T + att.W_key.bias
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_training_mode_gives_dense_parameters_that_fused_adamw_updates_as_the_plain_one():
    model = _model(qkv_bias=True)
    params = {n: p for n, p in model.named_parameters()}
    sha = weights_sha256(model)
    model.train()
    assert {n: p for n, p in model.named_parameters()} == params  # the same Parameter objects
    assert weights_sha256(model) == sha  # the same values
    for block in model.trf_blocks:
        assert block.att._fused_views() is None
    for name, p in model.named_parameters():
        assert p.is_contiguous(), name  # the tied head too: its gradients come row-major
    reference = copy.deepcopy(model)
    ids = torch.randint(0, model.cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True),
                  torch.optim.AdamW(reference.parameters(), lr=1e-2, foreach=False)]
    for m, opt in zip((model, reference), optimizers):
        torch.manual_seed(0)  # the same dropout masks
        m(ids).logsumexp(-1).mean().backward()
        opt.step()
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)
    model.eval()  # and back: one matrix again, the trained values in it
    weight, _ = model.trf_blocks[0].att._fused_views()
    torch.testing.assert_close(weight[:model.cfg.emb_dim], reference.trf_blocks[0].att.W_query.weight,
                               atol=1e-6, rtol=1e-5)


def test_gradients_in_eval_mode_reach_each_projection():
    model = _model()
    twin = _separate(model)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
    for m in (model, twin):
        m(ids)[0, -1].logsumexp(-1).backward()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=1e-5)


def test_another_dtype_is_laid_out_again_and_a_broken_layout_falls_back():
    model = _model()
    ids = torch.tensor([[7, 8, 9, 10]])
    with torch.inference_mode():
        before = model(ids)
    half = model.to(torch.bfloat16)  # each parameter converted alone: no longer one matrix
    assert half.trf_blocks[0].att._fused_views() is None
    with torch.inference_mode():
        separate = half(ids).float()
    half.tie_weights()
    weight, _ = half.trf_blocks[0].att._fused_views()
    assert weight.is_contiguous()  # bfloat16 matrix-vector products read row-major fastest
    with torch.inference_mode():
        torch.testing.assert_close(half(ids).float(), separate, atol=0, rtol=0)
    torch.testing.assert_close(separate, before, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_the_one_matrix_follows_the_parameters(qkv_bias):
    """The one matrix, found once, serves while the parameters stay where they are: new
    values loaded in place reach it; a projection given memory of its own is read on its
    own; another dtype is found again."""
    model = _model(qkv_bias).eval()
    ids = torch.tensor([[5, 9, 2, 7, 11]])
    with torch.inference_mode():
        model(ids)  # found and kept
    other = build_model(preset("tiny", qkv_bias=qkv_bias), seed=4).eval()
    model.load_state_dict(other.state_dict())
    att = model.trf_blocks[0].att
    assert att._fused_views() is not None
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), _separate(other)(ids), rtol=0, atol=1e-5)
    with torch.no_grad():
        att.W_key.weight.data = att.W_key.weight.detach() * 2  # memory of its own now
    assert att._fused_views() is None
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), _separate(model)(ids), rtol=0, atol=1e-5)
        assert (model(ids) - other(ids)).abs().max() > 1e-5  # the doubled keys count
    half = copy.deepcopy(other).to(torch.bfloat16)  # each parameter converted alone
    assert half.trf_blocks[0].att._fused_views() is None  # not the float32 matrix kept
    half.tie_weights()
    weight, _ = half.trf_blocks[0].att._fused_views()
    assert weight.dtype == torch.bfloat16
    with torch.inference_mode():
        torch.testing.assert_close(half(ids).float(), other(ids), rtol=0, atol=0.1)


def test_a_llama_block_decodes_from_column_major_matrices_and_trains_from_dense_ones():
    model = build_model(preset("llama-tiny"), seed=3)
    cfg = model.cfg
    block = model.trf_blocks[0]
    assert block.ff.fc1.weight.stride() == (1, cfg.hidden_dim)  # hidden outputs of C inputs
    assert block.ff.fc2.weight.stride() == (1, cfg.hidden_dim)
    assert block.ff.fc3.weight.is_contiguous()  # C outputs of hidden inputs: row-major
    assert block.att.W_query.weight.stride() == (1, cfg.n_heads * cfg.head_dim)
    head = model.out_head.weight
    assert head is model.tok_emb.weight and head.stride() == (1, cfg.vocab_size)
    twin = _separate(model)
    ids = torch.randint(0, cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), twin(ids), atol=1e-5, rtol=1e-5)
    settings = GenerationSettings(max_new_tokens=10, stop_at_eot=False)
    assert generate(model, [5, 6, 7], settings).new_ids == generate(twin, [5, 6, 7], settings).new_ids
    sha = weights_sha256(model)
    model.train()
    assert weights_sha256(model) == sha
    for name, p in model.named_parameters():
        assert p.is_contiguous(), name
    model.eval()
    assert block.ff.fc1.weight.stride() == (1, cfg.hidden_dim)
