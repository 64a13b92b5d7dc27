"""Every node's tensor as ``transformers`` computes it, for the families built with the
Llama / Qwen block's classes whose Hugging Face layers differ from Llama's: OLMo 2 / 3
(norms after each sublayer, inside the branch; q/k norms over the whole projection) and
Gemma 3 (four norms a block; q/k norms per head, applied after the split; the embedding
scaled) and Qwen3-MoE (a router and its experts in the feed-forward's place). Submodule outputs and inputs by forward hooks, the rotated queries and keys and
the shared keys and values from the functions their attention calls, the pattern from
their eager attention, the masks written out here (causal, and sliding in a sliding
layer)."""

from __future__ import annotations

import importlib

import torch

from explorer.core.gpt.patterns import allowed_keys
from explorer.core.gpt.nodes import block_hook_name

# our norm keys by their Hugging Face module, per model_type
NORMS = {
    "olmo2": {"post_attention_layernorm": "norm1", "post_feedforward_layernorm": "norm2"},
    "gemma3_text": {"input_layernorm": "norm1", "post_attention_layernorm": "post_norm1",
                    "pre_feedforward_layernorm": "norm2",
                    "post_feedforward_layernorm": "post_norm2"},
}
NORMS["olmo3"] = NORMS["olmo2"]
NORMS["qwen3_moe"] = NORMS["olmoe"] = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}
ACTIVATION = {"olmo2": "ff.silu", "olmo3": "ff.silu", "gemma3_text": "ff.gelu"}
MODULES = {"gemma3_text": "gemma3"}


def _feed_forward_hooks(mlp, kind, n, out) -> list:
    """The feed-forward's nodes: a SwiGLU's or GeGLU's steps, or a mixture of experts'
    router logits and each token's weights (the k chosen scattered over the experts)."""
    if not hasattr(mlp, "experts"):
        return [(mlp.gate_proj, out(n("ff.fc1"))), (mlp.up_proj, out(n("ff.fc2"))),
                (mlp.act_fn, out(n(ACTIVATION[kind]))), (mlp.down_proj, out(n("ff.fc3")))]

    def router(name_logits, name_weights):
        def hook(m, i, o):
            logits, scores, chosen = o
            out(name_logits)(m, i, logits)
            out(name_weights)(m, i, torch.zeros_like(logits).scatter(-1, chosen, scores))
        return hook
    return [(mlp.gate, router(n("ff.gate"), n("ff.routing")))]


def _layer_hooks(lay, n, kind, heads, out, inp, seen) -> list:
    at, mlp = lay.self_attn, lay.mlp
    whole = kind.startswith("olmo")  # q/k norms over the projection, before the split
    hooks = [(at.q_proj, out(n("att.W_query"))), (at.k_proj, out(n("att.W_key"))),
             (at.v_proj, out(n("att.W_value"))), (at.v_proj, out(n("att.values"), heads)),
             (at.o_proj, out(n("att.out_proj"))), (at, out(n("att"))),
             *_feed_forward_hooks(mlp, kind, n, out), (mlp, out(n("ff"))), (lay, out(n("add2")))]
    if whole:
        hooks += [(at.q_norm, out(n("att.q_norm"))), (at.k_norm, out(n("att.k_norm"))),
                  (at.q_norm, out(n("att.queries"), heads)), (at.k_norm, out(n("att.keys"), heads))]
    else:  # Gemma, Qwen3: the norms read the heads (Qwen3's (b, T, H, hd), before the transpose)
        turn = (lambda t: t.transpose(1, 2)) if kind == "qwen3_moe" else (lambda t: t)
        hooks += [(at.q_proj, out(n("att.queries"), heads)), (at.k_proj, out(n("att.keys"), heads)),
                  (at.q_norm, out(n("att.q_norm"), turn)), (at.k_norm, out(n("att.k_norm"), turn))]
    hooks += [(getattr(lay, hf), out(n(ours))) for hf, ours in NORMS[kind].items()]
    handles = [m.register_forward_hook(h) for m, h in hooks]
    # what reads the first add: the norm before the feed-forward (Gemma's; Pre-LN's, which
    # Hugging Face calls post_attention_layernorm), else the feed-forward itself (OLMo's)
    before_ff = [hf for hf, ours in NORMS[kind].items() if ours == "norm2"
                 and hf in ("pre_feedforward_layernorm", "post_attention_layernorm")]
    after_first = before_ff[0] if before_ff else "mlp"
    handles += [at.o_proj.register_forward_pre_hook(inp(n("att.context_vec"))),
                at.o_proj.register_forward_pre_hook(inp(n("att.context"), heads)),
                getattr(lay, after_first).register_forward_pre_hook(inp(n("add1")))]
    if not hasattr(mlp, "experts"):
        handles.append(mlp.down_proj.register_forward_pre_hook(inp(n("ff.product"))))
    return handles


def hf_nodes(model, ids: torch.Tensor, cfg) -> dict[str, torch.Tensor]:
    """Every node's tensor of ``model`` (transformers') on ``ids``, by our names; ``cfg``
    is our config of the same model (its sliding layers and window, for the masks)."""
    kind = model.config.model_type
    module = importlib.import_module(f"transformers.models.{MODULES.get(kind, kind)}."
                                     f"modeling_{MODULES.get(kind, kind)}")
    seen: dict[str, torch.Tensor] = {}
    layer = {"i": 0}

    def out(name, fn=lambda o: o):
        return lambda m, i, o: seen.__setitem__(name, fn(o[0] if isinstance(o, tuple) else o))

    def inp(name, fn=lambda x: x):
        return lambda m, i: seen.__setitem__(name, fn(i[0]))

    head_dim = cfg.head_dim

    def heads(t):  # (b, T, H·hd) -> (b, H, T, hd)
        b, n = t.shape[:2]
        return t.reshape(b, n, -1, head_dim).transpose(1, 2)

    base = model.model
    handles = [base.embed_tokens.register_forward_hook(
        out("emb_scaled" if cfg.family.model.variant.embedding_scale else "tok_emb")),
        base.norm.register_forward_hook(out("final_norm"))]
    for i, lay in enumerate(base.layers):
        handles += _layer_hooks(lay, lambda key, i=i: block_hook_name(i, key), kind, heads,
                                out, inp, seen)
        handles.append(lay.self_attn.register_forward_pre_hook(
            lambda m, a, k, i=i: layer.__setitem__("i", i), with_kwargs=True))
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
            ~allowed_keys(t, t, scores.device, cfg.window(i)), float("-inf"))
        seen[block_hook_name(i, "att.attn_weights")] = weights
    for name, t in list(seen.items()):  # a router's (tokens, experts), as ours: (b, T, experts)
        if name.endswith(("ff.gate", "ff.routing")) and t.dim() == 2:
            seen[name] = t.reshape(*ids.shape, -1)
    if cfg.family.model.variant.embedding_scale:
        seen["tok_emb"] = base.embed_tokens.weight[ids]  # the rows looked up, before the scale
    seen["out_head"] = result.logits
    return seen


def compare_nodes(ours, theirs, ids: torch.Tensor, tol: float) -> list[str]:
    """Every node of ours (``ours``: a LoadedModel) against transformers' ``theirs`` on
    ``ids``: the names compared; fails on the first node further than ``tol`` apart."""
    from explorer.core.gpt.nodes import all_hook_names
    from explorer.core.run.capture import Capture
    cfg = ours.config
    want = hf_nodes(theirs, ids, cfg)
    names = all_hook_names(cfg, inside=True)
    assert set(names) == set(want), sorted(set(names) ^ set(want))
    with torch.inference_mode(), Capture(ours.model, names, tensors=True, inside=True) as cap:
        logits = ours.model(ids)
    assert (logits - want["out_head"]).abs().max() <= tol
    got = cap.views()
    for name in names:
        have, ref = torch.from_numpy(got[name].array), want[name].detach()
        assert have.shape == ref.shape, (name, have.shape, ref.shape)
        finite = torch.isfinite(ref)
        assert (torch.isfinite(have) == finite).all(), name
        gap = (have[finite] - ref[finite]).abs().max()
        assert gap <= tol, (name, float(gap))
    return names


def jitter_norms(model, scale: float = 0.2):
    """Every norm gain of ``model`` moved off its stored start, so that a wrong map shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * scale)
    return model


def compare_steps_and_greedy(ours, theirs, tol: float, pad: int) -> None:
    """A 6-token prompt pass and three KV-cached steps of ours (a LoadedModel) against
    transformers' ``theirs`` within ``tol``, then six greedy tokens equal to its generate's."""
    import inspect
    from explorer.core.run.generation import GenerationSettings, generate
    torch.manual_seed(2)
    ids = torch.randint(0, ours.config.vocab_size, (1, 9))
    cache = ours.model.new_cache()
    word = ("cache" if "cache" in inspect.signature(type(theirs).forward).parameters
            else "past_key_values")
    with torch.no_grad():
        step = ours.model(ids[:, :6], cache=cache)
        out = theirs(ids[:, :6], use_cache=True)
        assert (step - out.logits).abs().max() <= tol
        past = getattr(out, word)
        for t in range(6, 9):  # past a window of 4: the cache's old keys are masked
            step = ours.model(ids[:, t:t + 1], cache=cache)
            out = theirs(ids[:, t:t + 1], use_cache=True, **{word: past})
            past = getattr(out, word)
            assert (step - out.logits).abs().max() <= tol
        greedy = theirs.generate(ids[:, :5], max_new_tokens=6, do_sample=False,
                                 eos_token_id=None, pad_token_id=pad)
    mine = generate(ours.model, ids[0, :5].tolist(),
                    GenerationSettings(max_new_tokens=6, stop_at_eot=False)).new_ids
    assert mine == greedy[0, 5:].tolist()


def opened_as_a_user_would(theirs, folder) -> tuple:
    """``theirs`` saved with ``save_pretrained`` into ``folder`` beside a tokenizer.json of
    its vocabulary, then opened from there: (theirs, our LoadedModel)."""
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.llama_folder import write_tokenizer
    theirs.save_pretrained(folder)
    write_tokenizer(folder, theirs.config.vocab_size)
    return theirs, load_checkpoint(folder)
