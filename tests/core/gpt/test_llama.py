"""The Llama / Qwen block against ``transformers``' own LlamaForCausalLM,
Qwen2ForCausalLM and Qwen3ForCausalLM: random small configs written with
``save_pretrained``, opened as a user would (a folder), every node of ours equal to the
matching submodule output or attention step of theirs within 1e-5 in float32 — the prompt
pass, KV-cached steps, a padded batch, tied and untied heads, with and without Llama 3's
rotary scaling, and the logits."""

import importlib
import inspect

import pytest
import torch

from explorer.core.gpt.nodes import all_hook_names, block_hook_name, order_of
from explorer.core.run.capture import Capture
from explorer.core.weights.checkpoints import load_checkpoint
from tests.llama_folder import write_tokenizer

transformers = pytest.importorskip("transformers")

TOL = 1e-5
SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
# (transformers class, config, what it tries)
CASES = {
    "llama-gqa-untied": ("Llama", dict(num_key_value_heads=2, tie_word_embeddings=False)),
    "llama-rope-scaling-tied": ("Llama", dict(num_key_value_heads=2, tie_word_embeddings=True,
                                              rope_scaling=SCALING, rope_theta=500000.0)),
    "llama-mha": ("Llama", dict(num_key_value_heads=4, tie_word_embeddings=False)),
    "qwen2-qkv-bias": ("Qwen2", dict(num_key_value_heads=2, tie_word_embeddings=True,
                                     rope_theta=1e6)),
    "qwen3-qk-norm-head-dim": ("Qwen3", dict(num_key_value_heads=2, head_dim=16,
                                             tie_word_embeddings=False, rope_theta=1e6)),
}


def hf_model(case: str, seed: int = 0):
    kind, extra = CASES[case]
    torch.manual_seed(seed)
    config = getattr(transformers, f"{kind}Config")(
        vocab_size=320, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6,
        attn_implementation="eager", **extra)
    model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    with torch.no_grad():  # norms and biases away from 1 and 0, so a wrong map shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    return model


@pytest.fixture(params=list(CASES))
def pair(request, tmp_path):
    """(transformers' model, ours loaded from its save_pretrained folder, the case)."""
    theirs = hf_model(request.param)
    theirs.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)  # a folder as people get it: weights, config, tokenizer
    return theirs, load_checkpoint(tmp_path), request.param


def hf_nodes(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every node's tensor as transformers computes it: submodule outputs (and inputs)
    by forward hooks, the rotated queries and keys, the shared keys and values and the
    scores from the functions its attention calls, the weights from its eager attention."""
    kind = model.config.model_type
    module = importlib.import_module(f"transformers.models.{kind}.modeling_{kind}")
    seen: dict[str, torch.Tensor] = {}
    layer = {"i": 0}
    handles = []

    def out(name, fn=lambda o: o):
        return lambda m, i, o: seen.__setitem__(name, fn(o[0] if isinstance(o, tuple) else o))

    def inp(name, fn=lambda x: x):
        return lambda m, i: seen.__setitem__(name, fn(i[0]))

    head_dim = getattr(model.config, "head_dim", None) or \
        model.config.hidden_size // model.config.num_attention_heads

    def heads(t):  # (b, T, H, hd) or (b, T, H·hd) -> (b, H, T, hd)
        b, n = t.shape[:2]
        return t.reshape(b, n, -1, head_dim).transpose(1, 2)

    base = model.model
    handles.append(base.embed_tokens.register_forward_hook(out("tok_emb")))
    handles.append(base.norm.register_forward_hook(out("final_norm")))
    for i, lay in enumerate(base.layers):
        at, mlp = lay.self_attn, lay.mlp
        n = lambda key, i=i: block_hook_name(i, key)  # noqa: E731
        hooks = [(lay.input_layernorm, out(n("norm1"))), (at.q_proj, out(n("att.W_query"))),
                 (at.k_proj, out(n("att.W_key"))), (at.v_proj, out(n("att.W_value"))),
                 (at.q_proj, out(n("att.queries"), heads)), (at.k_proj, out(n("att.keys"), heads)),
                 (at.v_proj, out(n("att.values"), heads)), (at.o_proj, out(n("att.out_proj"))),
                 (at, out(n("att"))), (lay.post_attention_layernorm, out(n("norm2"))),
                 (mlp.gate_proj, out(n("ff.fc1"))), (mlp.up_proj, out(n("ff.fc2"))),
                 (mlp.act_fn, out(n("ff.silu"))), (mlp.down_proj, out(n("ff.fc3"))),
                 (mlp, out(n("ff"))), (lay, out(n("add2")))]
        if hasattr(at, "q_norm"):
            hooks += [(at.q_norm, out(n("att.q_norm"), lambda t: t.transpose(1, 2))),
                      (at.k_norm, out(n("att.k_norm"), lambda t: t.transpose(1, 2)))]
        handles += [m.register_forward_hook(h) for m, h in hooks]
        handles += [at.o_proj.register_forward_pre_hook(inp(n("att.context_vec"))),
                    at.o_proj.register_forward_pre_hook(inp(n("att.context"), heads)),
                    mlp.down_proj.register_forward_pre_hook(inp(n("ff.product"))),
                    lay.post_attention_layernorm.register_forward_pre_hook(inp(n("add1"))),
                    at.register_forward_pre_hook(lambda m, a, k, i=i: layer.__setitem__("i", i),
                                                 with_kwargs=True)]
    rope, repeat = module.apply_rotary_pos_emb, module.repeat_kv

    def rotated(q, k, cos, sin, *args, **kwargs):
        q2, k2 = rope(q, k, cos, sin, *args, **kwargs)
        seen[block_hook_name(layer["i"], "att.queries_rope")] = q2
        seen[block_hook_name(layer["i"], "att.keys_rope")] = k2
        return q2, k2

    def repeated(states, n_rep):
        shared = repeat(states, n_rep)
        name = "att.values_repeated" if block_hook_name(layer["i"], "att.keys_repeated") in seen \
            else "att.keys_repeated"
        seen[block_hook_name(layer["i"], name)] = shared
        return shared

    module.apply_rotary_pos_emb, module.repeat_kv = rotated, repeated
    try:
        with torch.no_grad():
            result = model(ids, output_attentions=True)
    finally:
        module.apply_rotary_pos_emb, module.repeat_kv = rope, repeat
        for h in handles:
            h.remove()
    for i, weights in enumerate(result.attentions):
        q = seen[block_hook_name(i, "att.queries_rope")]
        k = seen[block_hook_name(i, "att.keys_repeated")]
        scores = q @ k.transpose(2, 3)  # the product their eager attention scales
        t = scores.shape[-1]
        seen[block_hook_name(i, "att.attn_scores")] = scores
        seen[block_hook_name(i, "att.masked_scores")] = scores.masked_fill(
            torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        seen[block_hook_name(i, "att.attn_weights")] = weights
    seen["out_head"] = result.logits
    return seen


def test_every_node_equals_transformers(pair):
    theirs, ours, case = pair
    cfg = ours.config
    assert cfg.family.name == "llama" and cfg.n_heads == 4 and cfg.kv_heads == theirs.config.num_key_value_heads
    assert cfg.tie_weights == theirs.config.tie_word_embeddings
    assert (cfg.rope_scaling is not None) == ("scaling" in case)
    torch.manual_seed(1)
    ids = torch.randint(0, 320, (1, 12))
    want = hf_nodes(theirs, ids)
    names = all_hook_names(cfg, inside=True)
    assert len(names) == 1 + 2 * (27 + 2 * cfg.qk_norm) + 2
    assert set(names) == set(want)  # every node of ours has its transformers tensor
    with torch.inference_mode(), Capture(ours.model, names, tensors=True, inside=True) as cap:
        logits = ours.model(ids)
    got = cap.views()
    assert (logits - theirs(ids).logits).abs().max() <= TOL
    for name in names:
        have, ref = got[name].array, want[name].detach().numpy()
        assert have.shape == ref.shape, (name, have.shape, ref.shape)
        finite = torch.isfinite(torch.from_numpy(ref))
        assert (torch.isfinite(torch.from_numpy(have)) == finite).all(), name
        gap = (torch.from_numpy(have)[finite] - torch.from_numpy(ref)[finite]).abs().max()
        assert gap <= TOL, (name, float(gap))


def test_kv_cached_steps_equal_transformers_cache(pair):
    theirs, ours, _ = pair
    torch.manual_seed(2)
    ids = torch.randint(0, 320, (1, 9))
    cache = ours.model.new_cache()
    with torch.no_grad():
        first = ours.model(ids[:, :6], cache=cache)
        out = theirs(ids[:, :6], use_cache=True)
        assert (first - out.logits).abs().max() <= TOL
        # transformers 5 names its cache argument and output ``cache``; earlier ones
        # ``past_key_values``
        word = ("cache" if "cache" in inspect.signature(type(theirs).forward).parameters
                else "past_key_values")
        past = getattr(out, word)
        for t in range(6, 9):  # one token at a time, from both caches
            step = ours.model(ids[:, t:t + 1], cache=cache)
            out = theirs(ids[:, t:t + 1], use_cache=True, **{word: past})
            past = getattr(out, word)
            assert (step - out.logits).abs().max() <= TOL
        assert cache.length == 9
        # the cache holds the key/value heads only (what grouped-query attention saves)
        assert cache.layers[0].k.shape[1] == ours.config.kv_heads
        whole = ours.model(ids)
    assert (whole[:, -1] - step[:, -1]).abs().max() <= TOL


def test_a_padded_batch_equals_each_prompt_alone(pair):
    """Two prompts of different lengths padded into one forward pass: every real token's
    logits are those of transformers with its attention mask."""
    from explorer.core.run.batch import make_batch
    theirs, ours, _ = pair
    batch = make_batch(["Every effort moves you", "Hello"], ours.config.context_length)
    ids = torch.tensor(batch.ids) % 320  # GPT-2's ids, into this small vocabulary
    mask = torch.zeros_like(ids)
    for row, n in enumerate(batch.lengths):
        mask[row, :n] = 1
    with torch.no_grad():
        got = ours.model(ids)
        want = theirs(ids, attention_mask=mask).logits
    for row, n in enumerate(batch.lengths):
        assert (got[row, :n] - want[row, :n]).abs().max() <= TOL


def test_an_order_of_the_family_names_its_own_block(pair):
    _, ours, _ = pair
    order = order_of(ours.config)
    assert order.family.name == "llama" and order.position == "pre"


@pytest.mark.parametrize("name, scaling", [("llama-tiny", None), ("qwen3-tiny", None),
                                           ("llama-tiny", (8.0, 1.0, 4.0, 16))])
def test_our_model_equals_a_transcription_of_the_books(name, scaling):
    """The book's Llama3Model (and Qwen3's q/k norms), typed out in tests/book_llama.py,
    with our weights: the same logits and block outputs; and its state dict, saved as
    the book's .pth with its config dict beside it, loads as a user's would."""
    from explorer.core.gpt.config import RopeScaling, preset
    from explorer.core.gpt.build import build_model
    from tests import book_llama
    cfg = preset(name, norm_eps=1e-6, rope_base=500000.0, tie_weights=False)
    if scaling:
        cfg = cfg.replace(rope_scaling=RopeScaling(*scaling[:3], scaling[3]))
    ours = build_model(cfg, seed=3)
    with torch.no_grad():
        for p_name, p in ours.named_parameters():
            if p_name.endswith("scale"):
                p.add_(torch.randn_like(p) * 0.2)
    book = book_llama.Llama3Model(book_llama.book_config(cfg)).eval()
    book.load_state_dict(book_llama.book_state_dict(ours.state_dict()), strict=True)
    ids = torch.randint(0, cfg.vocab_size, (2, 20))
    with torch.no_grad():
        assert (ours(ids) - book(ids)).abs().max() <= TOL
    if scaling:  # the scaling is there to be seen: without it the numbers differ
        plain = build_model(cfg.replace(rope_scaling=None), seed=3)
        plain.load_state_dict(ours.state_dict())
        with torch.no_grad():
            assert (plain(ids) - ours(ids)).abs().max() > 100 * TOL


def test_the_books_pth_and_its_config_dict_load(tmp_path):
    import json

    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from tests import book_llama
    cfg = preset("qwen3-tiny", tie_weights=False)
    ours = build_model(cfg, seed=4)
    torch.save(book_llama.book_state_dict(ours.state_dict()), tmp_path / "model.pth")
    book = book_llama.book_config(cfg)
    (tmp_path / "config.json").write_text(json.dumps(book))
    loaded = load_checkpoint(tmp_path / "model.pth")
    assert loaded.config.family.name == "llama" and loaded.config.qk_norm
    assert loaded.config.head_dim == 16 and loaded.config.kv_heads == 2
    ids = torch.randint(0, cfg.vocab_size, (1, 10))
    with torch.no_grad():
        assert (loaded.model(ids) - ours(ids)).abs().max() <= TOL


@pytest.mark.parametrize("qk_norm", [True, False])
def test_a_books_qwen3_gets_its_classes_eps_and_llama3_its_own(tmp_path, qk_norm):
    """The book's Qwen3 normalises with eps 1e-6 in every RMSNorm, q/k norms or none (its
    config dict names qk_norm); its Llama 3.2 with 1e-5 (its dict has rope_freq, no
    qk_norm); an eps the dict states wins."""
    import json

    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from tests import book_llama
    cfg = preset("qwen3-tiny", tie_weights=False, qk_norm=qk_norm)
    torch.save(book_llama.book_state_dict(build_model(cfg, seed=1).state_dict()), tmp_path / "m.pth")
    book = {k: v for k, v in book_llama.book_config(cfg).items() if k != "eps"}
    (tmp_path / "config.json").write_text(json.dumps(book))
    assert load_checkpoint(tmp_path / "m.pth").config.norm_eps == 1e-6
    llama = {k: v for k, v in book.items() if k != "qk_norm"}
    (tmp_path / "config.json").write_text(json.dumps(llama))
    if not qk_norm:  # a Llama 3 dict (no qk_norm): the Llama class's 1e-5
        assert load_checkpoint(tmp_path / "m.pth").config.norm_eps == 1e-5
    (tmp_path / "config.json").write_text(json.dumps(dict(book, rms_norm_eps=3e-6)))
    assert load_checkpoint(tmp_path / "m.pth").config.norm_eps == 3e-6


def test_gradients_flow_after_a_pass_in_inference_mode():
    """The angles a pass in inference mode makes are plain tensors: a later pass with
    gradients (the gradient view, training) uses them."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    model = build_model(preset("llama-tiny"), seed=1)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.inference_mode():
        model(ids)
    model(ids)[0, -1].logsumexp(-1).backward()
    grad = model.trf_blocks[0].att.W_query.weight.grad
    assert grad is not None and grad.abs().sum() > 0
