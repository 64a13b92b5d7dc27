"""Qwen3-MoE's block (the book's Qwen3 with ``num_experts``; Hugging Face's
``Qwen3MoeForCausalLM``), as one family record: the Llama / Qwen block's classes
(core/gpt/llama.py: RMSNorm, grouped-query attention with RoPE and per-head q/k norms)
with a mixture of experts in the feed-forward's place (core/gpt/moe.py). Its nodes there:
the router's logits (``ff.gate``), each token's weights on the experts it is routed to
(``ff.routing``), each expert's SwiGLU steps for the tokens routed to it (``ff.fc1.3`` …
``ff.fc3.3``: expert 3's, captured when asked) and the weighted sum of those experts'
outputs (``ff``). The files it is read from: weights/moe_keys.py."""

from __future__ import annotations

from dataclasses import replace

from .. import placements
from ..family import Classes, Counting, Files, Kind, NormPosition, Role
from ..mutations import SHORTCUTS
from ..node_types import HistRange, Node
from ..counts import ParameterCounts, Row
from . import llama

PRE = NormPosition.PRE
MAX_EXPERTS = 1 << 12  # beyond it: a damaged file

ROUTER = Node("ff.gate", "Router (gate)", "gate = Linear emb_dim → n_experts, no bias: one "
              "score (logit) per expert for each token.", Kind.LINEAR, "experts", parent="ff")
ROUTING = Node("ff.routing", "Top-k weights", "Each token's weight on each expert: softmax of "
               "the router's logits over every expert, the k largest kept (renormalised to "
               "sum to 1 where the model does), 0 for every expert the token is not routed to.",
               Kind.ROUTING, "experts", parent="ff", inputs=("ff.gate",))
MIXTURE = Node("ff", "Mixture of experts", "Σ over each token's k experts of its weight × "
               "that expert's SwiGLU, fc3[e](silu(fc1[e](x)) ⊙ fc2[e](x)); an expert runs only "
               "on the tokens routed to it.", Kind.FFN, "emb", hist_range=HistRange(-20.0, 20.0, 100))

_PRE_LLAMA = llama.LLAMA.orders[PRE]
_AT = [n.key for n in _PRE_LLAMA].index("add2")
_ORDERS = {PRE: tuple(n for n in _PRE_LLAMA[:_AT] if n.parent != "ff" and n.key != "ff")
           + (ROUTER, ROUTING, MIXTURE) + _PRE_LLAMA[_AT:]}


def _classes() -> Classes:
    """The Llama / Qwen block's classes with the mixture of experts as its feed-forward."""
    from ..moe import MoEFeedForward
    dense = llama.LLAMA.model.classes()
    return replace(dense, feed_forward=MoEFeedForward,
                   block_forwards={PRE: dense.block_forwards[PRE]})


def _problems(cfg) -> list[str]:
    problems = llama.config_problems(cfg)
    n, k = cfg.n_experts, cfg.experts_per_token
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_EXPERTS:
        problems.append(f"n_experts must be a whole number from 1 to {MAX_EXPERTS:,}, got {n!r}")
    elif not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n:
        problems.append(f"experts_per_token must be a whole number from 1 to n_experts ({n}), "
                        f"got {k!r}")
    if not isinstance(cfg.norm_topk_prob, bool):
        problems.append(f"norm_topk_prob must be true or false, got {cfg.norm_topk_prob!r}")
    return problems


def _count(cfg) -> ParameterCounts:
    """The Llama / Qwen block's count with every expert's three matrices and the router
    where the SwiGLU was."""
    dense = llama.LLAMA.counting.count(cfg)
    L, c, n = cfg.n_layers, cfg.emb_dim, cfg.n_experts
    return replace(dense, feed_forward=L * (n * 3 * c * cfg.hidden_dim + c * n),
                   names=dense.names[:2] + (f"feed-forward (ff.gate, {n} experts' fc1/fc2/fc3)",)
                   + dense.names[3:])


def _rows(cfg, counts: ParameterCounts) -> tuple[Row, ...]:
    rows = llama.LLAMA.counting.rows(cfg, counts)
    per_expert = 3 * cfg.emb_dim * cfg.hidden_dim
    return tuple(Row(f"feed-forward (ff.gate, {cfg.n_experts} experts of {per_expert:,}; "
                     f"{cfg.experts_per_token} run per token)", r.count, r.per_block)
                 if r.count == counts.feed_forward else r for r in rows)


def active_parameters(cfg) -> int:
    """The parameters one token's forward uses: every expert it is not routed to left out."""
    idle = cfg.n_layers * (cfg.n_experts - cfg.experts_per_token) * 3 * cfg.emb_dim * cfg.hidden_dim
    return _count(cfg).total - idle


WORDS = replace(
    llama.WORDS,
    what={**llama.WORDS.what,
          Kind.FFN: "A mixture of {experts} experts: the router scores every expert for each "
                    "token, the token goes to its {k} best, and its output is their SwiGLU "
                    "outputs weighted by the router and summed. Each expert widens to {hidden} "
                    "values inside; only the routed ones run.",
          Kind.ROUTING: "Each token's weight on each of the {experts} experts: the router's "
                        "softmax, only the {k} largest kept, every other expert 0 (it does not "
                        "run for that token)."},
    mistake={**llama.WORDS.mistake,
             Kind.FFN: "A mixture of experts does not change the KV cache: the cache keeps "
                       "attention's keys and values; the experts are the feed-forward, run "
                       "afresh for each token, {k} of the {experts} experts each time."},
    feed_forward="ff(x) = Σₑ wₑ · fc3[e](silu(fc1[e](x)) ⊙ fc2[e](x)) over the token's k experts",
    name=lambda cfg: "Qwen3-MoE",
    size_note=lambda cfg: (f" · {cfg.n_experts} experts, {cfg.experts_per_token} a token: "
                           f"{active_parameters(cfg) / 1e6:.1f}M active"),
    ways={**llama.WORDS.ways,
          "feed-forward": lambda cfg: (f"mixture of {cfg.n_experts} SwiGLU experts, "
                                       f"{cfg.experts_per_token} a token, each {cfg.emb_dim:,} → "
                                       f"{cfg.hidden_dim:,} → {cfg.emb_dim:,}")},
)

_ROLES = {**{r: k for r, k in llama.LLAMA.roles.items()
             if r not in (Role.ACTIVATION_INPUT, Role.ACTIVATION_OUTPUT, Role.ACTIVATION,
                          Role.LAST_LINEAR, Role.UP)},
          Role.ROUTER: ROUTER.key, Role.ROUTING: ROUTING.key}

QWEN3MOE = replace(
    llama.LLAMA, name="qwen3moe", title="Qwen3-MoE", orders=_ORDERS,
    shortcuts=placements.shortcuts(_ORDERS), branches=placements.branches(_ORDERS),
    residuals=placements.residuals(_ORDERS), after_by_position={}, roles=_ROLES,
    model=replace(llama.LLAMA.model, classes=_classes),
    counting=Counting(_count, _rows, ff_matrices=3, ff_biases=False),
    files=Files(model_types=("qwen3_moe",), key_maps="explorer.core.weights.moe_keys",
                own_tokenizer=True, hf_name=lambda kind: "Qwen3-MoE"),
    words=WORDS,
    config_fields=llama.CONFIG_FIELDS | {"n_experts", "experts_per_token", "norm_topk_prob"},
    config_problems=_problems, mutations=SHORTCUTS,
    presets={name: dict(drop_rate=0.0, qkv_bias=False, qk_norm=True, norm_eps=1e-6,
                        rope_base=1e6, tie_weights=False, norm_topk_prob=True) | fields
             for name, fields in {
        # random weights in Qwen3-MoE's shape; read with GPT-2's tokenizer
        "qwen3moe-tiny": dict(context_length=64, emb_dim=32, n_heads=4, n_kv_groups=2,
                              head_size=16, n_layers=2, ff_dim=32, n_experts=8,
                              experts_per_token=2),
    }.items()},
    beside=("qwen3-tiny", "tiny"),
    block_title=lambda p: "Qwen3-MoE",
    experts=llama.PARTS.ff_layers,  # each expert is the Llama / Qwen block's SwiGLU
)
