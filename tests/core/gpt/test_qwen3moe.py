"""Qwen3-MoE against ``transformers``' own Qwen3MoeForCausalLM: random small configs
written with ``save_pretrained``, opened as a user would (a folder with its
tokenizer.json): the router's logits, each token's weights on its experts, the
feed-forward's output and every other node equal to theirs within 1e-5 in float32, the
logits, greedy tokens and KV-cached steps; the book's ``MoEFeedForward`` (transcribed
below from llms_from_scratch 1.0.19's qwen3.py) against ours; the book's Qwen3 ``.pth``
with experts and its config dict."""

import json

import pytest
import torch

from explorer.core.gpt.moe import MoEFeedForward, route
from explorer.core.weights.checkpoints import load_checkpoint
from tests.hf_reference import (compare_nodes, compare_steps_and_greedy, jitter_norms,
                                 opened_as_a_user_would)

transformers = pytest.importorskip("transformers")

TOL = 1e-5
QWEN3 = dict(intermediate_size=48, moe_intermediate_size=24, head_dim=16, rms_norm_eps=1e-6,
             decoder_sparse_step=1, mlp_only_layers=[])  # every layer a mixture
CASES = {  # (transformers' class, its config's fields)
    "eight-experts-top2-renormalised": ("Qwen3Moe", dict(
        QWEN3, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True)),
    "four-experts-top3-plain": ("Qwen3Moe", dict(
        QWEN3, num_experts=4, num_experts_per_tok=3, norm_topk_prob=False)),
    # OLMoE: q/k norms over the whole projection, the experts' width intermediate_size
    "olmoe-eight-experts-top2": ("Olmoe", dict(intermediate_size=24, num_experts=8,
                                               num_experts_per_tok=2, norm_topk_prob=False,
                                               eos_token_id=0, pad_token_id=1)),
}


def hf_model(case: str, seed: int = 0):
    kind, extra = CASES[case]
    torch.manual_seed(seed)
    config = getattr(transformers, f"{kind}Config")(
        vocab_size=320, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, max_position_embeddings=64, attn_implementation="eager", **extra)
    model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    with torch.no_grad():  # a router that does not start at 0: every expert scored apart
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0, 0.5)
    return jitter_norms(model)


@pytest.fixture(params=list(CASES))
def pair(request, tmp_path):
    return (*opened_as_a_user_would(hf_model(request.param), tmp_path), request.param)


def test_every_node_equals_transformers(pair):
    theirs, ours, case = pair
    cfg = ours.config
    kind, want = CASES[case]
    assert cfg.family.name == {"Qwen3Moe": "qwen3moe", "Olmoe": "olmoe"}[kind]
    assert cfg.qk_norm and cfg.hidden_dim == 24
    assert (cfg.n_experts, cfg.experts_per_token, cfg.norm_topk_prob) == (
        want["num_experts"], want["num_experts_per_tok"], want["norm_topk_prob"])
    torch.manual_seed(1)
    ids = torch.randint(0, 320, (1, 12))
    names = compare_nodes(ours, theirs, ids, TOL)
    assert [n for n in names if n.startswith("trf_blocks.0.ff")] == [
        "trf_blocks.0.ff.gate", "trf_blocks.0.ff.routing", "trf_blocks.0.ff"]
    weights = _routing(ours, ids)  # each token: its k experts' weights, 0 for the rest
    assert ((weights != 0).sum(-1) == cfg.experts_per_token).all()
    assert torch.allclose(weights.sum(-1), torch.ones(1, 12)) == cfg.norm_topk_prob


def _routing(loaded, ids):
    from explorer.core.run.capture import Capture
    with torch.no_grad(), Capture(loaded.model, ["trf_blocks.0.ff.routing"], tensors=True) as cap:
        loaded.model(ids)
    return torch.from_numpy(cap.views()["trf_blocks.0.ff.routing"].array)


def test_each_experts_steps_are_transformers_own_on_the_tokens_it_routes_there(pair):
    """Every expert's fc1, fc2, SiLU, product and fc3, captured as nodes (``ff.fc1.3``),
    equal transformers' expert computed with its own fused weights on the tokens its
    router sends there, in prompt order; an expert no token chose has no node."""
    from explorer.core.run.capture import Capture
    theirs, ours, _ = pair
    cfg = ours.config
    torch.manual_seed(2)
    ids = torch.randint(0, 320, (1, 9))
    layer = theirs.model.layers[1]
    seen = {}
    layer.post_attention_layernorm.register_forward_hook(lambda m, i, o: seen.__setitem__("x", o))
    with torch.no_grad():
        router = theirs(ids, output_router_logits=True).router_logits[1]
        with Capture(ours.model, tensors=True, experts=1) as cap:
            ours.model(ids)
    chosen = router.float().softmax(-1).topk(cfg.experts_per_token, -1).indices  # (T, k)
    x = seen["x"][0]
    experts = layer.mlp.experts
    ran = []
    for e in range(cfg.n_experts):
        tokens = (chosen == e).any(-1).nonzero().flatten()
        name = f"trf_blocks.1.ff.fc1.{e}"
        if len(tokens) == 0:
            assert name not in cap
            continue
        ran.append(e)
        gate, up = torch.nn.functional.linear(x[tokens], experts.gate_up_proj[e]).chunk(2, -1)
        act = torch.nn.functional.silu(gate)
        want = {"fc1": gate, "fc2": up, "silu": act, "product": act * up,
                "fc3": torch.nn.functional.linear(act * up, experts.down_proj[e])}
        for step, value in want.items():
            got = cap[f"trf_blocks.1.ff.{step}.{e}"].tensor
            assert got.shape == (1, len(tokens), value.shape[-1])
            torch.testing.assert_close(got[0], value, atol=TOL, rtol=TOL)
    assert 0 < len(ran) <= cfg.n_experts
    assert not any(".fc1." in n for n in cap.records if n.startswith("trf_blocks.0."))


def test_greedy_tokens_and_kv_cached_steps_equal_transformers(pair):
    theirs, ours, _ = pair
    compare_steps_and_greedy(ours, theirs, TOL, pad=0)


class BookMoEFeedForward(torch.nn.Module):
    """llms_from_scratch 1.0.19, qwen3.py, ``MoEFeedForward`` (dtype arguments left out):
    top-k of the router's scores, softmax over the k, each token's experts' SwiGLU
    outputs weighted and summed."""

    def __init__(self, cfg):
        super().__init__()
        self.num_experts_per_tok = cfg["num_experts_per_tok"]
        self.num_experts = cfg["num_experts"]
        self.emb_dim = cfg["emb_dim"]
        self.gate = torch.nn.Linear(cfg["emb_dim"], cfg["num_experts"], bias=False)
        self.fc1 = torch.nn.ModuleList([torch.nn.Linear(cfg["emb_dim"], cfg["moe_intermediate_size"], bias=False)
                                        for _ in range(cfg["num_experts"])])
        self.fc2 = torch.nn.ModuleList([torch.nn.Linear(cfg["emb_dim"], cfg["moe_intermediate_size"], bias=False)
                                        for _ in range(cfg["num_experts"])])
        self.fc3 = torch.nn.ModuleList([torch.nn.Linear(cfg["moe_intermediate_size"], cfg["emb_dim"], bias=False)
                                        for _ in range(cfg["num_experts"])])

    def forward(self, x):
        scores = self.gate(x)
        topk_scores, topk_indices = torch.topk(scores, self.num_experts_per_tok, dim=-1)
        topk_probs = torch.softmax(topk_scores, dim=-1)
        batch, seq_len, _ = x.shape
        x_flat = x.reshape(batch * seq_len, -1)
        out_flat = torch.zeros(batch * seq_len, self.emb_dim, device=x.device, dtype=x.dtype)
        topk_indices_flat = topk_indices.reshape(-1, self.num_experts_per_tok)
        topk_probs_flat = topk_probs.reshape(-1, self.num_experts_per_tok)
        for expert_id_tensor in torch.unique(topk_indices_flat):
            expert_id = int(expert_id_tensor.item())
            mask = topk_indices_flat == expert_id
            if not mask.any():
                continue
            token_mask = mask.any(dim=-1)
            selected_idx = token_mask.nonzero(as_tuple=False).squeeze(-1)
            if selected_idx.numel() == 0:
                continue
            expert_input = x_flat.index_select(0, selected_idx)
            hidden = torch.nn.functional.silu(self.fc1[expert_id](expert_input)) * self.fc2[expert_id](expert_input)
            expert_out = self.fc3[expert_id](hidden)
            mask_selected = mask[selected_idx]
            slot_indices = mask_selected.int().argmax(dim=-1, keepdim=True)
            selected_probs = torch.gather(topk_probs_flat.index_select(0, selected_idx), dim=-1,
                                          index=slot_indices).squeeze(-1)
            out_flat.index_add_(0, selected_idx, expert_out * selected_probs.unsqueeze(-1))
        return out_flat.reshape(batch, seq_len, self.emb_dim)


def test_the_books_moe_feed_forward_is_ours_renormalised_and_differs_unrenormalised():
    """The book's top-k then softmax over the k is softmax then top-k renormalised: its
    module, loaded with ours's weights under the same names, gives our output; without
    the renormalisation the weights (and the output) are smaller by the k's share."""
    from explorer.core.gpt.config import preset
    cfg = preset("qwen3moe-tiny")
    torch.manual_seed(0)
    ours = MoEFeedForward(cfg)
    with torch.no_grad():
        ours.gate.weight.normal_(0, 0.5)
    book = BookMoEFeedForward({"num_experts": cfg.n_experts, "num_experts_per_tok": 2,
                               "emb_dim": cfg.emb_dim, "moe_intermediate_size": cfg.hidden_dim})
    book.load_state_dict(ours.state_dict(), strict=False)  # routing is a hook point, no weights
    assert set(book.state_dict()) == set(ours.state_dict())
    x = torch.randn(2, 7, cfg.emb_dim)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), book(x), atol=1e-6, rtol=1e-5)
        logits = ours.gate(x)
        kept = route(logits, 2, renormalise=False)
        share = torch.softmax(logits, -1).topk(2, -1).values.sum(-1, keepdim=True)
        torch.testing.assert_close(kept, route(logits, 2, renormalise=True) * share)
        assert (kept.sum(-1) < 1 - 1e-3).all()


def test_an_expert_runs_only_on_the_tokens_routed_to_it():
    """Each expert's fc1 sees exactly the tokens whose weights name it; an expert no
    token chose does not run."""
    from explorer.core.gpt.config import preset
    cfg = preset("qwen3moe-tiny", n_experts=8, experts_per_token=1)
    torch.manual_seed(3)
    ff = MoEFeedForward(cfg).eval()
    seen = {}
    for e, fc1 in enumerate(ff.fc1):
        fc1.register_forward_hook(lambda m, i, o, e=e: seen.__setitem__(e, i[0].shape[0]))
    x = torch.randn(1, 5, cfg.emb_dim)
    with torch.no_grad():
        chosen = ff.gate(x).argmax(-1)[0].tolist()
        ff(x)
    assert seen == {e: chosen.count(e) for e in set(chosen)}


def test_the_books_qwen3_moe_pth_and_its_config_dict_load(tmp_path):
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    cfg = preset("qwen3moe-tiny")
    ours = build_model(cfg, seed=4)
    torch.save(ours.state_dict(), tmp_path / "model.pth")  # the book's names are ours
    book = {"vocab_size": cfg.vocab_size, "context_length": 64, "emb_dim": 32, "n_heads": 4,
            "n_layers": 2, "hidden_dim": 48, "head_dim": 16, "qk_norm": True, "n_kv_groups": 2,
            "rope_base": 1e6, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(book))
    loaded = load_checkpoint(tmp_path / "model.pth")
    got = loaded.config
    assert got.family.name == "qwen3moe" and (got.n_experts, got.experts_per_token) == (8, 2)
    assert got.norm_topk_prob and got.hidden_dim == 32 and got.norm_eps == 1e-6
    ids = torch.tensor([[5, 9, 2, 7]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids), ours.eval()(ids))
    (tmp_path / "config.json").write_text(json.dumps(dict(book, num_experts=6)))
    with pytest.raises(ValueError, match="config.json says 6 experts but the router scores 8"):
        load_checkpoint(tmp_path / "model.pth")


def test_info_counts_every_expert_and_says_how_many_a_token_uses(capsys):
    """The total is every parameter the model holds; active per token leaves out the
    experts a token is not routed to, counted here from the weights."""
    from explorer.cli import main
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    cfg = preset("qwen3moe-tiny")
    model = build_model(cfg, seed=0)
    total = sum(p.numel() for p in model.parameters())
    expert = sum(p.numel() for m in (model.trf_blocks[0].ff.fc1[0], model.trf_blocks[0].ff.fc2[0],
                                     model.trf_blocks[0].ff.fc3[0]) for p in m.parameters())
    active = total - cfg.n_layers * (8 - 2) * expert
    assert main(["info", "--preset", "qwen3moe-tiny"]) == 0
    out = capsys.readouterr().out
    assert f"Active per token: {active:,} of {total:,}." in out
    assert f"  {'total':45s} {total:>15,}" in out
    assert "  experts_per_token 2\n" in out and "  n_experts         8\n" in out


def test_the_routing_map_and_its_balancing_loss_are_transformers_own(pair):
    """The map of a pass: every token's k experts, the tokens each expert got, and the
    load-balancing loss equal to transformers' load_balancing_loss_func on the same
    block's router logits."""
    from explorer.core.run.passes import Keep, run_prompt
    from explorer.core.run.routing import routing_map
    theirs, ours, _ = pair
    lbl = importlib_module(theirs).load_balancing_loss_func
    ids = torch.randint(0, 320, (1, 10), generator=torch.Generator().manual_seed(5))
    views = run_prompt(ours.model, ids[0].tolist(), Keep()).views
    cfg = ours.config
    for layer in range(cfg.n_layers):
        got = routing_map(views, cfg, layer)
        logits = torch.from_numpy(views[f"trf_blocks.{layer}.ff.gate"].array)[0]
        want = lbl((logits,), cfg.n_experts, cfg.experts_per_token)
        assert got.balance_loss == pytest.approx(float(want), rel=1e-5)
        assert int(got.tokens.sum()) == 10 * cfg.experts_per_token
        assert got.idle == [e for e in range(cfg.n_experts) if got.tokens[e] == 0]
        assert 0 <= got.entropy_bits.min() and got.entropy_bits.max() <= got.uniform_bits + 1e-9
    assert routing_map(views, cfg.replace(n_experts=None, experts_per_token=None,
                                          family="llama", norm_topk_prob=False), 0) is None


def importlib_module(model):
    import importlib
    return importlib.import_module(type(model).__module__)


def test_inspect_saves_the_router_logits_and_weights_under_the_names_info_lists(capsys, tmp_path):
    """``info`` names the block's nodes; ``inspect --save`` writes the router's logits and
    each token's expert weights under those names: the chosen experts are the k non-zero
    weights, the largest of the router's softmax."""
    import numpy as np
    from explorer.cli import main
    assert main(["info", "--preset", "qwen3moe-tiny"]) == 0
    assert "nodes of each block (trf_blocks.N.…, for --node and --save): norm1, " \
           "att.attn_weights, att, add1, norm2, ff.gate, ff.routing, ff, add2" in capsys.readouterr().out
    out = tmp_path / "moe.npz"
    assert main(["inspect", "Every effort moves", "--preset", "qwen3moe-tiny", "--save", str(out)]) == 0
    saved = np.load(out)
    logits, weights = saved["trf_blocks.1.ff.gate"][0], saved["trf_blocks.1.ff.routing"][0]
    assert logits.shape == weights.shape == (3, 8)
    for row_logits, row_weights in zip(logits, weights):
        assert set(np.flatnonzero(row_weights)) == set(np.argsort(-row_logits)[:2])
    capsys.readouterr()
    assert main(["info", "--preset", "qwen3moe-tiny"]) == 0
    assert "each expert's steps (E = 0…7, with inspect --experts): ff.fc1.E, ff.fc2.E, " \
           "ff.silu.E, ff.product.E, ff.fc3.E" in capsys.readouterr().out
    experts = tmp_path / "experts.npz"
    assert main(["inspect", "Every effort moves", "--preset", "qwen3moe-tiny", "--experts",
                 "--layer", "1", "--save", str(experts)]) == 0
    saved = np.load(experts)
    routed = {e: int((weights[:, e] != 0).sum()) for e in range(8)}  # tokens per expert
    for e, n in routed.items():
        names = [f"trf_blocks.1.ff.{step}.{e}" for step in ("fc1", "fc2", "silu", "product", "fc3")]
        assert all((name in saved.files) == (n > 0) for name in names), (e, n)
        if n:
            assert saved[f"trf_blocks.1.ff.fc1.{e}"].shape == (1, n, 32)
            assert saved[f"trf_blocks.1.ff.fc3.{e}"].shape == (1, n, 32)
    assert main(["inspect", "Every effort moves", "--preset", "qwen3moe-tiny",
                 "--node", f"trf_blocks.1.ff.fc3.{max(routed, key=routed.get)}"]) == 0
    assert f"trf_blocks.1.ff.fc3.{max(routed, key=routed.get)}" in capsys.readouterr().out


def test_training_adds_transformers_balancing_loss_and_keeps_no_logits_in_eval():
    """A training forward leaves every block's router logits for the balancing loss,
    which equals transformers' load_balancing_loss_func on them; an evaluation forward
    keeps none; the trainer's step backpropagates it into the routers."""
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func
    from explorer.core.experiments.training import Trainer, TrainSettings
    from explorer.core.experiments.train_text import default_text
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.moe import balance_loss
    model = build_model(preset("qwen3moe-tiny"), seed=1).train()
    ids = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(0))
    model(ids)
    logits = tuple(block.ff.last_logits for block in model.trf_blocks)
    assert all(t.shape == (18, 8) for t in logits)
    torch.testing.assert_close(balance_loss(model), load_balancing_loss_func(logits, 8, 2))
    model.eval()(ids)
    assert balance_loss(model) is None
    from explorer.core.experiments.head_loss import loss_of
    from explorer.core.gpt.moe import AUX_LOSS_COEF
    grads = []
    for with_aux in (False, True):  # the balancing term reaches the routers
        model.train().zero_grad()
        loss = loss_of(model, ids[:, :-1], ids[:, 1:])
        (loss + AUX_LOSS_COEF * balance_loss(model) if with_aux else loss).backward()
        grads.append(model.trf_blocks[0].ff.gate.weight.grad.clone())
    assert not torch.allclose(grads[0], grads[1])
    settings = TrainSettings(preset="qwen3moe-tiny", max_steps=2, batch_size=2, eval_every=2,
                             eval_batches=1, sample_tokens=1, seed=3, snapshots=0)
    trainer = Trainer(default_text()[:3000], settings)
    steps = [e for e in trainer.run() if hasattr(e, "train_loss")]
    assert trainer.state.step == 2 and steps
