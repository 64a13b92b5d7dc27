"""The Llama / Qwen block with the book's bonus-chapter names (GPT to Llama 2 / 3.2,
Qwen3): RMSNorm, rotary position embeddings (rope.py: Llama 3's frequency scaling), a SwiGLU
feed-forward (fc1, fc2, fc3), grouped-query attention (W_query, W_key, W_value,
out_proj; Qwen3's q_norm and k_norm; Qwen2.5's query/key/value biases), no dropout.

Every node of families/llama.py is a module or a hook point, so forward hooks see it by its
path; ``LlamaModel.forward`` has ``GPTModel.forward``'s signature, so capture, passes and
generation run it unchanged. The book's steps run when a hook watches the scores or the
pattern; otherwise the same numbers come from the fused kernel (a test checks both
against ``transformers``). The model owns no capture logic and no loading logic."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ..base.cancel import check
from . import kv as static_kv
from .layers import HookPoint, KVCache, LayerKV, lay_out_linear, lay_out_weight
from .patterns import PATTERN_ROWS, allowed_keys, causal_matmul, causal_softmax
from .family import NormPosition, QKSpan
from .rope import Rotary, apply_rope, rope_angles, rope_inverse_frequencies  # noqa: F401
from .gated import FeedForward  # noqa: F401 (the Code view's)
from .norms import DyT, OffsetRMSNorm, RMSNorm

if TYPE_CHECKING:
    from .config import GPTConfig


class GroupedQueryAttention(nn.Module):
    """Causal self-attention whose key and value heads are shared by groups of query
    heads (``n_kv_groups`` of them; as many as the query heads is plain multi-head). In a
    sliding layer (``window``) each query sees only the last ``window`` keys, its own
    included; the scores are divided by √head_dim, or by √attn_scalar where the config
    has one (Gemma's query_pre_attn_scalar)."""

    def __init__(self, cfg: GPTConfig, rope: "Rotary | None" = None,
                 window: int | None = None) -> None:
        super().__init__()
        self.rope = rope or Rotary(cfg)  # the model's one table of angles, shared
        self.window = window
        self.num_heads, self.num_kv_groups = cfg.n_heads, cfg.kv_heads
        self.group_size = cfg.n_heads // cfg.kv_heads
        self.head_dim = cfg.head_dim
        self.d_out = cfg.n_heads * cfg.head_dim
        self.context_length = cfg.context_length
        self.scale = None if cfg.attn_scalar is None else cfg.attn_scalar ** -0.5
        self.W_query = nn.Linear(cfg.emb_dim, self.d_out, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(cfg.emb_dim, self.num_kv_groups * self.head_dim, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(cfg.emb_dim, self.num_kv_groups * self.head_dim, bias=cfg.qkv_bias)
        self.out_proj = nn.Linear(self.d_out, cfg.emb_dim, bias=False)
        # a norm per head (Qwen3, Gemma 3), or over the whole projection (OLMo 2 and 3)
        self.whole_qk = cfg.family.model.variant.qk_span == QKSpan.PROJECTION
        if cfg.qk_norm:
            q_dim, k_dim = ((self.d_out, self.num_kv_groups * self.head_dim) if self.whole_qk
                            else (self.head_dim, self.head_dim))
            self.q_norm = norm_of(cfg, q_dim, rms=True)
            self.k_norm = norm_of(cfg, k_dim, rms=True)
        else:
            self.q_norm = self.k_norm = None
        # hook points for the book's intermediates (families/llama.py's ATTENTION_INSIDE)
        self.queries, self.keys, self.values = HookPoint(), HookPoint(), HookPoint()
        self.queries_rope, self.keys_rope = HookPoint(), HookPoint()
        self.keys_repeated, self.values_repeated = HookPoint(), HookPoint()
        self.attn_scores, self.masked_scores = HookPoint(), HookPoint()
        self.attn_weights = HookPoint()
        self.context, self.context_vec = HookPoint(), HookPoint()

    _watched = staticmethod(static_kv.watched)

    def forward(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        """As MultiHeadAttention's: x (B, T, C) at positions pos..pos+T-1, continuing the
        KV cache ``kv`` when given."""
        b, num_tokens, _ = x.shape  # (B, T, C)
        cos, sin = self.rope.at(pos, kv.k.shape[2], x.device) if static_kv.static(pos) \
            else self.rope(pos, pos + num_tokens, x.device)  # (T, head_dim) each
        queries = self.W_query(x)  # (b, T, n_heads * head_dim)
        keys = self.W_key(x)  # (b, T, n_kv_groups * head_dim)
        values = self.W_value(x)
        if self.q_norm is not None and self.whole_qk:  # OLMo: the whole projection
            queries = self.q_norm(queries)
            keys = self.k_norm(keys)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        queries, keys, values = self.queries(queries), self.keys(keys), self.values(values)
        if self.q_norm is not None and not self.whole_qk:  # Qwen3, Gemma: each head
            queries = self.q_norm(queries)
            keys = self.k_norm(keys)
        keys = self.keys_rope(apply_rope(keys, cos, sin))  # (b, n_kv_groups, T, head_dim)
        queries = self.queries_rope(apply_rope(queries, cos, sin))  # (b, n_heads, T, head_dim)
        if kv is not None:
            keys, values = self._cached(kv, keys, values, pos)  # (b, n_kv, pos + T, hd)
        t_k = keys.shape[2]
        scored = self._watched(self.attn_scores, self.masked_scores)
        pattern = scored or self._watched(self.attn_weights)
        repeated = pattern or self._watched(self.keys_repeated, self.values_repeated, self.context)
        if repeated:
            keys = self.keys_repeated(keys.repeat_interleave(self.group_size, dim=1))
            values = self.values_repeated(values.repeat_interleave(self.group_size, dim=1))
        if static_kv.static(pos):  # every position of a static cache, the later ones masked
            context = static_kv.attention(
                queries, keys, values, static_kv.allowed_at(pos, t_k, self.window), self.scale,
                self.attn_scores, self.masked_scores, self.attn_weights,
                gqa=self.group_size > 1 and not repeated)
        elif repeated:
            if scored:
                context = self._scored(queries, keys) @ values  # (b, n_heads, T, head_dim)
            elif pattern:
                context = causal_matmul(self.attn_weights(causal_softmax(
                    queries, keys, self.scale, self.window)), values)
            else:
                context = self._fused(queries, keys, values, num_tokens, t_k, gqa=False)
        else:
            context = self._fused(queries, keys, values, num_tokens, t_k, gqa=self.group_size > 1)
        context = self.context(context)
        context_vec = context.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(self.context_vec(context_vec))

    def _fused(self, q, k, v, t: int, t_k: int, gqa: bool) -> torch.Tensor:
        """The fused kernel: the same numbers as the book's steps, without the pattern."""
        extra = {"enable_gqa": True} if gqa else {}
        if self.scale is not None:
            extra["scale"] = self.scale
        if self.window is not None and t_k > self.window:  # some keys out of the window
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=allowed_keys(t, t_k, q.device, self.window), **extra)
        if t == 1:
            return F.scaled_dot_product_attention(q, k, v, **extra)
        if t == t_k:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_keys(t, t_k, q.device),
                                              **extra)

    def _scored(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """The book's steps, whole: scores, the mask (the causal one, with the window in a
        sliding layer), softmax of scores / √head_dim (or × the config's scale)."""
        t, t_k = queries.shape[2], keys.shape[2]
        attn_scores = self.attn_scores(queries @ keys.transpose(2, 3))  # (b, H, T, T_k)
        mask = ~allowed_keys(t, t_k, queries.device, self.window)
        attn_scores = self.masked_scores(attn_scores.masked_fill(mask, -torch.inf))
        if self.scale is not None:
            return self.attn_weights(torch.softmax(attn_scores * self.scale, dim=-1))
        return self.attn_weights(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1))

    def _cached(self, kv: LayerKV, k: torch.Tensor, v: torch.Tensor, pos: int):
        """The rotated keys and the values written at ``pos``, the cache holding
        ``n_kv_groups`` heads (what grouped-query attention saves) and growing as the
        sequence does; all of them so far."""
        if static_kv.static(pos):
            return static_kv.write(kv, k, v, pos)
        b, h, t, hd = k.shape
        need = pos + t
        if kv.k is None or kv.k.shape[0] != b or kv.k.shape[2] < need:
            size = min(self.context_length, max(need, 256, 2 * (0 if kv.k is None else kv.k.shape[2])))
            grown_k, grown_v = k.new_empty((b, h, size, hd)), v.new_empty((b, h, size, hd))
            if kv.k is not None and kv.k.shape[0] == b and pos:
                grown_k[:, :, :pos] = kv.k[:, :, :pos]
                grown_v[:, :, :pos] = kv.v[:, :, :pos]
            kv.k, kv.v = grown_k, grown_v
        kv.k[:, :, pos:need] = k
        kv.v[:, :, pos:need] = v
        return kv.k[:, :, :need], kv.v[:, :, :need]


# Each norm position's forward, written out (the Code view shows the one that runs); a
# block without norms runs Pre-LN's lines with DyT where its RMSNorms were.
FORWARDS = {NormPosition.PRE: "forward_pre", NormPosition.POST: "forward_post",
            NormPosition.BRANCH: "forward_branch", NormPosition.PERI: "forward_peri",
            NormPosition.PARALLEL: "forward_parallel", NormPosition.DYT: "forward_pre"}


def norm_of(cfg: GPTConfig, dim: int, rms: bool = False) -> nn.Module:
    """The block's norm: RMSNorm (its gain ``offset + scale`` where the family stores it
    around 0, as Gemma does), or DyT in a block without norms (``rms``: an RMSNorm
    whatever the placement, as the query/key norms are)."""
    if cfg.norm_position == NormPosition.DYT and not rms:
        return DyT(dim)
    if cfg.family.model.variant.gain_offset:
        return OffsetRMSNorm(dim, eps=cfg.norm_eps)
    return RMSNorm(dim, eps=cfg.norm_eps)


class TransformerBlock(nn.Module):
    """x + att(norm1(x)), then x + ff(norm2(x)) (Pre-LN, the bonus chapters' block), or
    the norms where the config's norm position puts them (as GPTModel's block does);
    ``add1`` and ``add2`` name the adds."""

    def __init__(self, cfg: GPTConfig, rope: "Rotary | None" = None, layer: int = 0) -> None:
        super().__init__()
        self.placement = FORWARDS[cfg.norm_position]  # the forward that runs
        self.att = GroupedQueryAttention(cfg, rope, cfg.window(layer))
        self.ff = cfg.family.model.classes().feed_forward(cfg)  # SwiGLU, GeGLU, experts
        self.norm1 = norm_of(cfg, cfg.emb_dim)
        if cfg.norm_position != NormPosition.PARALLEL:  # one norm feeds both sublayers
            self.norm2 = norm_of(cfg, cfg.emb_dim)
        if cfg.norm_position == NormPosition.PERI:  # and one after each sublayer
            self.post_norm1 = norm_of(cfg, cfg.emb_dim)
            self.post_norm2 = norm_of(cfg, cfg.emb_dim)
        self.add1 = HookPoint()
        self.add2 = HookPoint()

    def forward(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        return getattr(self, self.placement)(x, kv, pos)

    # The book's lines, one operation per line (the Code view points at them).
    def forward_pre(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        x = self.att(x, kv, pos)
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_post(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.att(x, kv, pos)
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        x = self.norm1(x)
        shortcut = x
        x = self.ff(x)
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        x = self.norm2(x)
        return x

    def forward_branch(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.att(x, kv, pos)
        x = self.norm1(x)  # OLMo's post_attention_layernorm: inside the branch
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.ff(x)
        x = self.norm2(x)  # OLMo's post_feedforward_layernorm
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_peri(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        x = self.att(x, kv, pos)
        x = self.post_norm1(x)  # Gemma's post_attention_layernorm
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.post_norm2(x)  # Gemma's post_feedforward_layernorm
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_parallel(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        normed = x  # what both sublayers read
        x = self.att(x, kv, pos)
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.ff(normed)  # the norm's output, not the first add's
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x


class LlamaModel(nn.Module):
    """Token embedding, N blocks, final RMSNorm, output head (tied or its own)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.rope = Rotary(cfg)  # not a module: the angles are no weights
        # the sliding layers' own angles where their θ differs (Gemma 3's local 10,000)
        local = Rotary(cfg, cfg.rope_base_of(cfg.sliding_layers[0])) if (
            cfg.sliding_layers and cfg.rope_base_of(cfg.sliding_layers[0]) != cfg.rope_base) else self.rope
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.emb_dim)
        # Gemma multiplies the token embeddings by √emb_dim, in the weights' dtype
        self.embed_scale = cfg.emb_dim ** 0.5 if cfg.family.model.variant.embedding_scale else None
        if self.embed_scale is not None:
            self.emb_scaled = HookPoint()
        self.trf_blocks = nn.ModuleList([
            TransformerBlock(cfg, local if layer in cfg.sliding_layers else self.rope, layer)
            for layer in range(cfg.n_layers)])
        self.final_norm = norm_of(cfg, cfg.emb_dim)
        self.out_head = nn.Linear(cfg.emb_dim, cfg.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """As GPTModel's: the head shares the token embedding when the config says so,
        and the weights are laid out for the model's mode (``lay_out``)."""
        if self.cfg.tie_weights:
            self.out_head.weight = self.tok_emb.weight
        self.lay_out()

    def lay_out(self) -> None:
        """As GPTModel's: in eval mode on a CPU in float32 the head and every matrix with at
        least as many outputs as inputs column-major, which the matrix-vector kernels of a
        decoding step read fastest; in training mode every parameter row-major and dense."""
        head = self.out_head.weight
        if head.device.type == "meta":
            return
        decoding = not self.training
        lay_out_weight(head, decoding and head.device.type == "cpu" and head.dtype == torch.float32)
        for block in self.trf_blocks:  # attention's, the feed-forward's (every expert's)
            for linear in block.modules():
                if isinstance(linear, nn.Linear):
                    lay_out_linear(linear, decoding)

    def train(self, mode: bool = True) -> "LlamaModel":
        """``nn.Module.train``, and the weights laid out for the mode (``lay_out``)."""
        super().train(mode)
        self.lay_out()
        return self

    def forward(self, in_idx: torch.Tensor, cache: KVCache | None = None,
                last_only: bool = False, head: bool = True) -> torch.Tensor:
        """As ``GPTModel.forward``: logits (B, T, vocab) for ids (B, T), continuing the
        cached sequence with ``cache``; ``last_only`` the last position's; ``head=False``
        the final norm's output."""
        _, t = in_idx.shape  # (B, T)
        pos = cache.start() if cache is not None else 0  # a static cache's: a tensor
        length = cache.length if cache is not None else 0
        if length + t > self.cfg.context_length:
            raise ValueError(f"sequence of {length + t} tokens exceeds the context length "
                             f"{self.cfg.context_length}")
        x = self.tok_emb(in_idx)  # (B, T, C)
        if self.embed_scale is not None:
            x = self.emb_scaled(x * torch.tensor(self.embed_scale, dtype=x.dtype))
        for i, block in enumerate(self.trf_blocks):
            x = block(x, cache.layers[i] if cache is not None else None, pos)
        x = self.final_norm(x)
        if last_only:
            x = x[:, -1:, :]
        if cache is not None:
            cache.advance(t)
        if not head:
            return x
        return self.out_head(x)  # (B, T, vocab)

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg.n_layers)


def init_llama_weights(model: LlamaModel, seed: int = 0, should_stop=None) -> LlamaModel:
    """A seeded initialisation as Hugging Face's for these models: N(0, 0.02) for every
    matrix and the embedding, zero biases, norms' scales 1. ``should_stop`` is asked
    before each parameter."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            check(should_stop)
            if name.endswith("scale"):  # a gain of 1 (Gemma's stored 0: 1 + w)
                owner = model.get_submodule(name.rpartition(".")[0])
                param.fill_(1.0 - getattr(owner, "offset", 0.0))
            elif name.endswith("alpha"):  # DyT's
                param.fill_(DyT.ALPHA)
            elif name.endswith(("bias", "shift")):
                param.zero_()
            elif param.device.type == "cpu" and param.dtype == torch.float32:
                param.normal_(0.0, 0.02, generator=gen)
            else:
                param.copy_(torch.empty(param.shape).normal_(0.0, 0.02, generator=gen))
    return model


__all__ = ["RMSNorm", "FeedForward", "GroupedQueryAttention", "TransformerBlock", "LlamaModel",
           "KVCache", "apply_rope", "rope_angles", "rope_inverse_frequencies",
           "init_llama_weights", "PATTERN_ROWS"]
