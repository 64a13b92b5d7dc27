"""GPT-2 as the book's chapter 4 writes it: TransformerBlock and GPTModel with the book's
module names, Pre-LN or Post-LN, and GPT-2's seeded initialisation.

Every node of the block graph is a module, so forward hooks see it by its path:
``trf_blocks.3.norm1``, ``trf_blocks.3.att``, ``trf_blocks.3.drop1`` ... (families/
gpt2.py). The model owns no capture logic and no loading logic; build.py makes a model
of any family.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..base.cancel import check
from .dropout import Dropout
from .family import NormPosition
from . import kv as static_kv
from .layers import (FeedForward, HookPoint, KVCache, LayerKV, LayerNorm, MultiHeadAttention,
                     lay_out_linear, lay_out_weight)
from .norms import DyT

if TYPE_CHECKING:
    from .config import GPTConfig


# Each norm position's forward, written out (the Code view shows the one that runs); a
# block without norms runs Pre-LN's lines with DyT where its norms were.
FORWARDS = {NormPosition.PRE: "forward_pre_ln", NormPosition.POST: "forward_post_ln",
            NormPosition.BRANCH: "forward_branch", NormPosition.PERI: "forward_peri",
            NormPosition.PARALLEL: "forward_parallel", NormPosition.DYT: "forward_pre_ln"}


def norm_of(cfg: GPTConfig, dim: int) -> nn.Module:
    """The block's norm: the book's LayerNorm, or DyT in a block without norms."""
    return DyT(dim) if cfg.norm_position == NormPosition.DYT else LayerNorm(dim)


class TransformerBlock(nn.Module):
    """One block, its norms where the config's norm position puts them. Pre-LN (GPT-2):
    x + drop(att(norm1(x))), then x + drop(ff(norm2(x))). Post-LN (2017 Transformer):
    norm1(x + drop(att(x))), then norm2(x + drop(ff(x))). In the branch (OLMo): x +
    drop(norm1(att(x))). Peri-LN (Gemma): x + drop(post_norm1(att(norm1(x)))). Parallel
    (GPT-J): x + drop(att(norm1(x))) + drop(ff(norm1(x))), one norm. DyT: Pre-LN's lines
    with DyT for each norm.

    ``drop_shortcut`` is the book's single dropout module, used twice; the hook points
    ``drop1``/``drop2`` name its two uses and ``add1``/``add2`` the residual adds.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.placement = FORWARDS[cfg.norm_position]  # the forward that runs
        self.att = MultiHeadAttention(
            d_in=cfg.emb_dim, d_out=cfg.emb_dim, context_length=cfg.context_length,
            dropout=cfg.drop_rate, num_heads=cfg.n_heads, qkv_bias=cfg.qkv_bias,
        )
        self.ff = FeedForward(cfg)
        self.norm1 = norm_of(cfg, cfg.emb_dim)
        if cfg.norm_position != NormPosition.PARALLEL:  # one norm feeds both sublayers
            self.norm2 = norm_of(cfg, cfg.emb_dim)
        if cfg.norm_position == NormPosition.PERI:  # and one after each sublayer
            self.post_norm1 = norm_of(cfg, cfg.emb_dim)
            self.post_norm2 = norm_of(cfg, cfg.emb_dim)
        self.drop_shortcut = Dropout(cfg.drop_rate)
        self.drop1 = HookPoint()
        self.add1 = HookPoint()
        self.drop2 = HookPoint()
        self.add2 = HookPoint()

    def forward(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        return getattr(self, self.placement)(x, kv, pos)

    # The book's lines, one operation per line, so that the Code view can point at the
    # line that produced each node (core/lessons/listing.py reads this source); a hook
    # point on a line of its own names what the book's line computed and changes nothing.
    def forward_pre_ln(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        x = self.att(x, kv, pos)
        x = self.drop_shortcut(x)
        x = self.drop1(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = self.drop2(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_post_ln(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.att(x, kv, pos)
        x = self.drop_shortcut(x)
        x = self.drop1(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        x = self.norm1(x)
        shortcut = x
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = self.drop2(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        x = self.norm2(x)
        return x

    def forward_branch(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.att(x, kv, pos)
        x = self.norm1(x)  # the norm inside the branch, after the sublayer
        x = self.drop_shortcut(x)
        x = self.drop1(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.ff(x)
        x = self.norm2(x)
        x = self.drop_shortcut(x)
        x = self.drop2(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_peri(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        x = self.att(x, kv, pos)
        x = self.post_norm1(x)  # a norm on both sides of the sublayer
        x = self.drop_shortcut(x)
        x = self.drop1(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.post_norm2(x)
        x = self.drop_shortcut(x)
        x = self.drop2(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x

    def forward_parallel(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        normed = x  # what both sublayers read
        x = self.att(x, kv, pos)
        x = self.drop_shortcut(x)
        x = self.drop1(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add1(x)  # hook point: the sum
        shortcut = x
        x = self.ff(normed)  # the norm's output, not the first add's
        x = self.drop_shortcut(x)
        x = self.drop2(x)  # hook point: this use of drop_shortcut
        x = x + shortcut
        x = self.add2(x)  # hook point: the sum
        return x


def _embedding(num: int, dim: int) -> nn.Embedding:
    """nn.Embedding with its usual N(0, 1) initialisation, except on the meta device,
    where there is nothing to initialise (and normal_ there costs a 2-second import)."""
    weight = torch.empty(num, dim)
    if weight.device.type != "meta":
        nn.init.normal_(weight)
    return nn.Embedding(num, dim, _weight=weight)


class GPTModel(nn.Module):
    """GPT-2 architecture: embeddings, N transformer blocks, final norm, output head."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = _embedding(cfg.vocab_size, cfg.emb_dim)
        self.pos_emb = _embedding(cfg.context_length, cfg.emb_dim)
        self.emb_add = HookPoint()  # token + position embedding
        self.drop_emb = Dropout(cfg.drop_rate)
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        self.final_norm = norm_of(cfg, cfg.emb_dim)
        self.out_head = nn.Linear(cfg.emb_dim, cfg.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the output head with the token embedding when the config says so, and
        lay the weights out as ``lay_out`` does."""
        if self.cfg.tie_weights:
            self.out_head.weight = self.tok_emb.weight
        self.lay_out()

    def lay_out(self) -> None:
        """The weights in the memory layout for what the model's mode does, the values
        unchanged. In eval mode for decoding: the head column-major, which the CPU
        matrix-vector kernels read fastest (the largest matrix of a step; the embedding
        lookup reads the same tensor), the query, key and value projections one matrix,
        wide matrices column-major on a CPU (``MultiHeadAttention.lay_out``,
        ``lay_out_linear``). In training mode every parameter row-major and dense, as
        the gradients come and as the fused optimizer needs them."""
        head = self.out_head.weight
        if head.device.type == "meta":
            return
        decoding = not self.training
        lay_out_weight(head, decoding)
        for block in self.trf_blocks:
            block.att.lay_out(decoding)
            lay_out_linear(block.ff.layers[0], decoding)

    def train(self, mode: bool = True) -> "GPTModel":
        """``nn.Module.train``, and the weights laid out for the mode (``lay_out``)."""
        super().train(mode)
        self.lay_out()
        return self

    def forward(self, in_idx: torch.Tensor, cache: KVCache | None = None,
                last_only: bool = False, head: bool = True) -> torch.Tensor:
        """Logits (B, T, vocab) for token ids (B, T); with ``cache``, the ids continue the
        cached sequence and the cache is extended; ``last_only`` computes logits for the
        last position only (B, 1, vocab); ``head=False`` returns the final norm's output
        (B, T, C) instead (training applies the head with its loss: core.experiments.head_loss)."""
        _, t = in_idx.shape  # (B, T)
        pos = cache.start() if cache is not None else 0  # a static cache's: a tensor
        length = cache.length if cache is not None else 0
        if length + t > self.cfg.context_length:
            raise ValueError(
                f"sequence of {length + t} tokens exceeds the context length "
                f"{self.cfg.context_length}"
            )
        positions = pos if static_kv.static(pos) else torch.arange(pos, pos + t, device=in_idx.device)
        x = self.emb_add(self.tok_emb(in_idx) + self.pos_emb(positions))  # (B, T, C)
        x = self.drop_emb(x)
        for i, block in enumerate(self.trf_blocks):
            x = block(x, cache.layers[i] if cache is not None else None, pos)
        x = self.final_norm(x)
        if last_only:
            x = x[:, -1:, :]
        if cache is not None:
            cache.advance(t)
        if not head:
            return x
        logits = self.out_head(x)  # (B, T, vocab)
        return logits

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg.n_layers)


def init_weights(model: GPTModel, seed: int = 0, should_stop=None) -> GPTModel:
    """GPT-2's initialisation, seeded: N(0, 0.02) for weights and embeddings, zero biases,
    residual projections (out_proj, ff.layers.2) scaled by 1/sqrt(2 * n_layers).
    ``should_stop`` is asked before each parameter (gpt2-xl's largest takes ~0.5 s)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    resid_std = 0.02 / math.sqrt(2 * model.cfg.n_layers)
    with torch.no_grad():
        for name, param in model.named_parameters():
            check(should_stop)
            if name.endswith(("scale",)):
                param.fill_(1.0)
            elif name.endswith("alpha"):  # DyT's
                param.fill_(DyT.ALPHA)
            elif name.endswith(("shift", "bias")):
                param.zero_()
            else:
                std = resid_std if name.endswith(("out_proj.weight", "ff.layers.2.weight")) else 0.02
                if param.device.type == "cpu" and param.dtype == torch.float32:
                    param.normal_(0.0, std, generator=gen)
                else:  # same values on every device: draw on the CPU, then copy
                    param.copy_(torch.empty(param.shape).normal_(0.0, std, generator=gen))
    return model
