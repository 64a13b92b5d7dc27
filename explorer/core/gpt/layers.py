"""The seeds' building blocks, with the book's names: LayerNorm, GELU, FeedForward,
MultiHeadAttention, plus HookPoint (an identity module that gives a name to a tensor
that no module returns, such as a residual add).

These modules compute; they do not capture (see capture.py) and do not load weights
(see checkpoints.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import kv as static_kv
from .dropout import Dropout
from .kv import KVCache, LayerKV  # noqa: F401 (their home for the blocks)
from .patterns import PATTERN_ROWS, causal_matmul, causal_softmax

if TYPE_CHECKING:
    from .config import GPTConfig


class HookPoint(nn.Module):
    """Identity module: a named place where forward hooks can see a tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class LayerNorm(nn.Module):
    """The book's LayerNorm: biased variance, eps 1e-5, learnable ``scale`` and ``shift``.

    Same maths as ``(x - mean) / sqrt(var(unbiased=False) + eps) * scale + shift``;
    computed by ``F.layer_norm``, which fuses those steps.
    """

    def __init__(self, emb_dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.scale.shape, self.scale, self.shift, self.eps)

    def book_forward(self, x):
        # the book's forward, line for line
        # (the Code view shows it; forward computes it)
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class GELU(nn.Module):
    """GELU, tanh approximation, as in GPT-2 and the book:
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")

    def book_forward(self, x):
        # the book's forward, line for line
        # (the Code view shows it; forward computes it)
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) *
            (x + 0.044715 * torch.pow(x, 3))
        ))


def gelu_tanh_formula(x: torch.Tensor) -> torch.Tensor:
    """The book's GELU written out term by term (reference for tests and plots)."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class FeedForward(nn.Module):
    """Position-wise MLP: Linear emb->4*emb, GELU, Linear 4*emb->emb."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg.emb_dim, cfg.hidden_dim),
            GELU(),
            nn.Linear(cfg.hidden_dim, cfg.emb_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


def lay_out_weight(w: torch.Tensor, column: bool) -> None:
    """A 2-D parameter's values column-major in memory (``column``) or dense row-major,
    in place: the same Parameter object, so an optimizer holding it keeps it."""
    with torch.inference_mode(False), torch.no_grad():
        if column and w.stride() != (1, w.shape[0]):
            w.data = w.detach().t().contiguous().t()  # (out, in), strides (1, out)
        elif not column and not w.is_contiguous():
            w.data = w.detach().contiguous()


def lay_out_linear(linear: nn.Linear, decoding: bool) -> None:
    """Lay a Linear's weight out for what the model does next, values unchanged: for
    decoding on a CPU in float32, a matrix with at least as many outputs as inputs
    column-major (the matrix-vector kernels read it up to 1.6x faster that way; a wider
    input reads fastest row-major); otherwise row-major, as training's optimizer expects."""
    w = linear.weight
    lay_out_weight(w, decoding and w.device.type == "cpu" and w.dtype == torch.float32
                   and w.shape[0] >= w.shape[1])


def _parts_of_one(parts: tuple[torch.Tensor, ...], shape: tuple[int, ...]) -> torch.Tensor | None:
    """The tensor of ``shape`` that ``parts`` (of one shape and strides) are consecutive
    slices of along the first dimension, in order; None when they are not."""
    first = parts[0]
    step = first.shape[0] * first.stride(0) * first.element_size()  # bytes from one to the next
    storage = first.untyped_storage().data_ptr()
    for before, part in zip(parts, parts[1:]):
        if (part.stride() != first.stride() or part.dtype != first.dtype
                or part.data_ptr() - before.data_ptr() != step
                or part.untyped_storage().data_ptr() != storage):
            return None
    return first.as_strided(shape, first.stride())


def scored_softmax(q: torch.Tensor, k: torch.Tensor, scores_point: HookPoint,
                   masked_point: HookPoint) -> torch.Tensor:
    """The book's attention steps, whole, (B, H, T, T_k) for the last T of T_k positions
    querying: the scores q kᵀ through ``scores_point``, the causal mask through
    ``masked_point``, then softmax of the masked scores / √head_dim. The book's numbers,
    made faster: the product of dense copies of q and k (a head's rows of a projection's
    output lie 3 × C apart, which halves the batched product's speed), and the mask put
    in by ``where`` (twice ``masked_fill``'s speed with a broadcast mask, the same values,
    NaN and infinities included)."""
    t, t_k = q.shape[2], k.shape[2]
    scores = scores_point(q.contiguous() @ k.contiguous().transpose(2, 3))  # (B, H, T, T_k)
    mask = torch.ones(t, t_k, dtype=torch.bool, device=q.device).triu(t_k - t + 1)
    scores = masked_point(torch.where(mask, -torch.inf, scores))
    return torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention with the book's names.

    ``attn_weights`` is a hook point for the softmax weights (B, H, T, T). They are
    materialised only when a hook is attached there; otherwise the fused
    ``scaled_dot_product_attention`` kernel runs, which gives the same result.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 num_heads: int, qkv_bias: bool = False) -> None:
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = Dropout(dropout)
        # hook points for the book's intermediates (families/gpt2.py's ATTENTION_INSIDE)
        self.keys, self.queries, self.values = HookPoint(), HookPoint(), HookPoint()
        self.attn_scores, self.masked_scores = HookPoint(), HookPoint()
        self.attn_weights = HookPoint()
        self.context, self.context_vec = HookPoint(), HookPoint()

    # The query, key and value projections as one matrix -----------------------------
    def lay_out(self, decoding: bool) -> None:
        """For decoding (eval mode): W_query's, W_key's and W_value's weights (and biases)
        become three consecutive parts of one (3 * d_out, d_in) matrix, so that a step
        reads them in one matrix-vector product (``_fused_qkv``); each module keeps its own
        parameter, with the same values. For training: three matrices of their own again
        (the fused AdamW kernel needs a parameter's memory dense)."""
        linears = (self.W_query, self.W_key, self.W_value)
        fused = self._fused_views() is not None
        with torch.inference_mode(False), torch.no_grad():
            if decoding and not fused:
                weight = torch.cat([m.weight.detach() for m in linears])  # (3 * d_out, d_in)
                if weight.device.type == "cpu" and weight.dtype == torch.float32:
                    weight = weight.t().contiguous().t()  # column-major: read fastest
                parts = [(m.weight, weight[i * self.d_out:(i + 1) * self.d_out])
                         for i, m in enumerate(linears)]
                if self.W_query.bias is not None:
                    bias = torch.cat([m.bias.detach() for m in linears])
                    parts += [(m.bias, bias[i * self.d_out:(i + 1) * self.d_out])
                              for i, m in enumerate(linears)]
                for param, part in parts:
                    param.data = part
            elif not decoding and fused:
                for m in linears:
                    for param in (m.weight, m.bias):
                        if param is not None:
                            param.data = param.detach().clone(memory_format=torch.contiguous_format)
        lay_out_linear(self.out_proj, decoding)
        self.__dict__.pop("_fused", None)  # found again for the new layout, the old freed

    def _fused_views(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The one (3 * d_out, d_in) weight and (3 * d_out,) bias that W_query's, W_key's
        and W_value's parameters are parts of, in that order; None when they are not.
        Kept while the parameters' memory stays where it was (a decoding step asks it
        twelve times; finding it costs ~20 µs, looking at the addresses ~3 µs)."""
        linears = (self.W_query, self.W_key, self.W_value)
        params = tuple(m.weight for m in linears) + tuple(m.bias for m in linears)
        where = tuple(None if p is None else (p.data_ptr(), p.stride(), p.dtype) for p in params)
        kept = self.__dict__.get("_fused")  # the views hold their memory: no address reused
        if kept is not None and kept[0] == where:
            return kept[1]
        # detached views, made outside inference mode: an inference-mode or no-grad view
        # of a parameter refuses to be read once the parameter changes in place (a load)
        with torch.inference_mode(False):
            params = tuple(None if p is None else p.detach() for p in params)
            weight = _parts_of_one(params[:3], (3 * self.d_out, self.W_query.in_features))
            biases = params[3:]
            missing = sum(b is None for b in biases)  # not .count(None): == is elementwise
            found = None
            if weight is not None and missing == 3:
                found = weight, None
            elif weight is not None and missing == 0:
                bias = _parts_of_one(biases, (3 * self.d_out,))
                found = None if bias is None else (weight, bias)
        self.__dict__["_fused"] = (where, found)
        return found

    def _apply(self, fn, *args, **kwargs):
        self.__dict__.pop("_fused", None)  # the parameters move: the views would hold the old
        return super()._apply(fn, *args, **kwargs)

    def _fused_qkv(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The fused projection for this forward: when laid out for it, no gradient is
        wanted (the parts are parameters of their own to autograd) and no hook watches
        W_query, W_key or W_value (a hook sees its module's own output)."""
        if torch.is_grad_enabled() and self.W_query.weight.requires_grad:
            return None
        if nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks:
            return None
        for m in (self.W_query, self.W_key, self.W_value):
            if m._forward_hooks or m._forward_pre_hooks:
                return None
        return self._fused_views()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The book registers its causal mask as a persistent buffer; we build the mask on
        # the fly, so a book state dict's "<prefix>mask" is accepted and ignored.
        state_dict.pop(prefix + "mask", None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    _watched = staticmethod(static_kv.watched)

    def _wants_pattern(self) -> bool:
        return self._watched(self.attn_weights, self.attn_scores, self.masked_scores)

    def forward(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        """The book's steps (``book_forward``) for a prompt of up to PATTERN_ROWS tokens
        whose pattern or scores are watched; otherwise the same numbers from
        ``fast_forward``: with the KV cache, a pattern computed a chunk of rows at a time,
        or the fused kernel (a test checks that they agree)."""
        if kv is None and x.shape[1] <= PATTERN_ROWS and self._wants_pattern():
            return self.book_forward(x)
        return self.fast_forward(x, kv, pos)

    def book_forward(self, x: torch.Tensor) -> torch.Tensor:
        """MultiHeadAttention.forward as the book writes it, each intermediate through its
        hook point; the mask is made here instead of kept as a buffer, and filled out of
        place, so that the unmasked scores stay what they were."""
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        # split the last dimension into heads: (b, num_tokens, num_heads, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        keys = keys.transpose(1, 2)  # (b, num_heads, num_tokens, head_dim)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        keys, queries, values = self.keys(keys), self.queries(queries), self.values(values)
        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        attn_scores = self.attn_scores(attn_scores)
        mask_bool = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=x.device).triu(1)
        # the book fills in place (masked_fill_); a new tensor keeps the captured scores whole
        attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)  # no token sees a later one
        attn_scores = self.masked_scores(attn_scores)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        attn_weights = self.attn_weights(attn_weights)
        context = self.context(attn_weights @ values)  # (b, num_heads, num_tokens, head_dim)
        context_vec = context.transpose(1, 2)  # the book: (attn_weights @ values).transpose(1, 2)
        context_vec = self.context_vec(context_vec.contiguous().view(b, num_tokens, self.d_out))
        context_vec = self.out_proj(context_vec)
        return context_vec

    def fast_forward(self, x: torch.Tensor, kv: LayerKV | None = None, pos: int = 0) -> torch.Tensor:
        """The same attention for long prompts and generation: new keys and values go
        into the KV cache at ``pos``; watched scores are computed whole, a watched pattern
        a chunk of query rows at a time (causal_softmax); otherwise the fused kernel runs."""
        b, t, _ = x.shape  # (B, T, C)
        h, hd = self.num_heads, self.head_dim
        fused = self._fused_qkv()
        if fused is None:
            k = self.W_key(x).view(b, t, h, hd).transpose(1, 2)  # (B, H, T, hd)
            q = self.W_query(x).view(b, t, h, hd).transpose(1, 2)
            v = self.W_value(x).view(b, t, h, hd).transpose(1, 2)
        else:  # one product for the three: (B, T, 3, H, hd) -> three (B, H, T, hd)
            q, k, v = F.linear(x, *fused).view(b, t, 3, h, hd).permute(2, 0, 3, 1, 4).unbind(0)
        k, q, v = self.keys(k), self.queries(q), self.values(v)
        if kv is not None:
            k, v = self._cached(kv, k, v, pos)  # (B, H, pos+T, hd)
        t_k = k.shape[2]
        drop_p = self.dropout.p if self.training else 0.0
        if static_kv.static(pos):  # every position of a static cache, the later ones masked
            ctx = static_kv.attention(q, k, v, static_kv.allowed_at(pos, t_k), None, self.attn_scores,
                                      self.masked_scores, self.attn_weights)
        elif self._watched(self.attn_scores, self.masked_scores):
            weights = scored_softmax(q, k, self.attn_scores, self.masked_scores)
            ctx = causal_matmul(self.attn_weights(self.dropout(weights)), v)  # (B, H, T, hd)
        elif drop_p and q.device.type == "cpu" and not self._wants_pattern():
            # training on a CPU: the fused kernel's dropout draws its mask with
            # bernoulli_, twice the time of the model's Dropout
            scores = (q * hd ** -0.5) @ k.transpose(2, 3)
            scores = scores.masked_fill(torch.ones(t, t_k, dtype=torch.bool, device=q.device)
                                        .triu_(1 + t_k - t), float("-inf"))
            ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v  # (B, H, T, hd)
        elif self._wants_pattern():
            weights = self.dropout(causal_softmax(q, k))  # (B, H, T, T_k)
            weights = self.attn_weights(weights)
            ctx = causal_matmul(weights, v)  # (B, H, T, hd)
        elif t == 1:
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=drop_p)
        elif t == t_k:
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=drop_p, is_causal=True)
        else:  # a chunk of several new tokens after cached ones
            allowed = torch.ones(t, t_k, dtype=torch.bool, device=x.device).tril(t_k - t)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=drop_p)
        ctx = self.context(ctx).transpose(1, 2).reshape(b, t, self.d_out)  # (B, T, C)
        return self.out_proj(self.context_vec(ctx))

    def _cached(self, kv: LayerKV, k: torch.Tensor, v: torch.Tensor, pos: int):
        """Write the new keys and values at ``pos``; all of them so far, (B, H, pos+T, hd)."""
        if static_kv.static(pos):
            return static_kv.write(kv, k, v, pos)
        b, h, t, hd = k.shape
        if kv.k is None or kv.k.shape[0] != b or kv.k.shape[2] < pos + t:  # (a static cache's copy)
            old = kv.k, kv.v
            kv.k = k.new_empty((b, h, self.context_length, hd))
            kv.v = v.new_empty((b, h, self.context_length, hd))
            if old[0] is not None and old[0].shape[0] == b and pos:
                kv.k[:, :, :pos], kv.v[:, :, :pos] = old[0][:, :, :pos], old[1][:, :, :pos]
        kv.k[:, :, pos:pos + t] = k
        kv.v[:, :, pos:pos + t] = v
        return kv.k[:, :, :pos + t], kv.v[:, :, :pos + t]
