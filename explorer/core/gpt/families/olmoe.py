"""OLMoE's block (Ai2's open mixture of experts; Hugging Face's ``OlmoeForCausalLM``), as
one family record: Qwen3-MoE's (families/qwen3moe.py: the Llama / Qwen block's classes,
Pre-LN, a mixture of experts as the feed-forward) with OLMo's query and key norms over
the whole projection, before it is split into heads, and its routing weights left as the
softmax gave them (``norm_topk_prob`` false). Read from weights/moe_keys.py."""

from __future__ import annotations

from dataclasses import replace

from ..family import Files, QKSpan, Variant
from . import olmo, qwen3moe

OLMOE = replace(
    qwen3moe.QWEN3MOE, name="olmoe", title="OLMoE", attention_inside=olmo.ATTENTION_INSIDE,
    attention_grids=olmo.OLMO.attention_grids,
    model=replace(qwen3moe.QWEN3MOE.model, variant=Variant(qk_span=QKSpan.PROJECTION)),
    files=Files(model_types=("olmoe",), key_maps="explorer.core.weights.moe_keys",
                own_tokenizer=True, hf_name=lambda kind: "OLMoE"),
    words=replace(qwen3moe.WORDS, name=lambda cfg: "OLMoE", ways={
        **qwen3moe.WORDS.ways,
        "normalisation": lambda cfg: (
            f"RMSNorm before each sublayer: x / √(mean(x²) + {cfg.norm_eps:g}) × scale; "
            "queries and keys normalised over the whole projection")}),
    presets={"olmoe-tiny": dict(drop_rate=0.0, qkv_bias=False, qk_norm=True, norm_eps=1e-5,
                                rope_base=10000.0, tie_weights=False, norm_topk_prob=False,
                                context_length=64, emb_dim=32, n_heads=4, n_layers=2,
                                ff_dim=32, n_experts=8, experts_per_token=2)},
    beside=("qwen3moe-tiny", "olmo2-tiny"),
    block_title=lambda p: "OLMoE",
)
