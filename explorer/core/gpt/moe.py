"""A mixture of experts' feed-forward, with the book's names (its Qwen3 bonus code's
``MoEFeedForward``): a router (``gate``, a Linear emb_dim → n_experts, no bias) scores
every expert for every token; each token goes to the k experts it scores highest, and
its output is the weighted sum of those k experts' SwiGLU outputs (expert e's matrices
``fc1[e]``, ``fc2[e]``, ``fc3[e]``). Each expert runs on the tokens routed to it only.

The weights: softmax over every expert, then the k largest, renormalised to sum to 1
when ``norm_topk_prob`` (``transformers``' Qwen3-MoE and OLMoE; the book's top-k then
softmax over the k is the renormalised case). ``routing`` names them as one tensor, a
weight per token and expert, 0 for the experts a token was not routed to: the experts
that run are read from it, so an intervention there moves tokens between experts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from .layers import HookPoint

if TYPE_CHECKING:
    from .config import GPTConfig

AUX_LOSS_COEF = 0.01  # the balancing loss's weight in training (OLMoE's; Qwen3-MoE's 0.001)


def route(logits: torch.Tensor, k: int, renormalise: bool) -> torch.Tensor:
    """Each row's weight on each expert: softmax over all (in float32), the ``k`` largest
    kept (renormalised to sum to 1 when ``renormalise``), 0 elsewhere; in the logits'
    dtype."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    top, chosen = torch.topk(probs, k, dim=-1)
    if renormalise:
        top = top / top.sum(dim=-1, keepdim=True)
    return torch.zeros_like(logits).scatter(-1, chosen, top.to(logits.dtype))


class MoEFeedForward(nn.Module):
    """gate → the k experts of each token → their SwiGLU outputs, weighted and summed."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.num_experts, self.num_experts_per_tok = cfg.n_experts, cfg.experts_per_token
        self.renormalise = cfg.norm_topk_prob
        c, hidden, n = cfg.emb_dim, cfg.hidden_dim, cfg.n_experts
        self.gate = nn.Linear(c, n, bias=False)
        self.fc1 = nn.ModuleList(nn.Linear(c, hidden, bias=False) for _ in range(n))
        self.fc2 = nn.ModuleList(nn.Linear(c, hidden, bias=False) for _ in range(n))
        self.fc3 = nn.ModuleList(nn.Linear(hidden, c, bias=False) for _ in range(n))
        self.routing = HookPoint()
        # each expert's SiLU and gated product, where hooks can see them (``ff.silu.3``)
        self.silu = nn.ModuleList(HookPoint() for _ in range(n))
        self.product = nn.ModuleList(HookPoint() for _ in range(n))
        self.last_logits: torch.Tensor | None = None  # training: the balancing loss reads them

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        scores = self.gate(x)  # (B, T, n_experts): the router's logits
        self.last_logits = scores.reshape(b * t, -1) if self.training else None
        weights = self.routing(route(scores, self.num_experts_per_tok, self.renormalise))
        x_flat, w_flat = x.reshape(b * t, c), weights.reshape(b * t, -1)
        out = torch.zeros_like(x_flat)
        for e in (w_flat != 0).any(dim=0).nonzero().flatten().tolist():  # experts that run
            tokens = (w_flat[:, e] != 0).nonzero().flatten()
            inp = x_flat.index_select(0, tokens)[None]  # (1, routed tokens, emb_dim)
            gate = self.silu[e](torch.nn.functional.silu(self.fc1[e](inp)))
            hidden = self.product[e](gate * self.fc2[e](inp))
            expert = self.fc3[e](hidden)[0] * w_flat[tokens, e, None]  # autocast: maybe bfloat16
            out.index_add_(0, tokens, expert.to(out.dtype))
        return out.reshape(b, t, c)


def balance_loss(model: nn.Module) -> torch.Tensor | None:
    """The auxiliary load-balancing loss of a mixture's last training forward (Switch
    Transformer's, as ``transformers``' ``load_balancing_loss_func`` computes it for
    Qwen3-MoE and OLMoE): every block's router logits together, n_experts · Σₑ (share
    of token slots routed to e) · (mean router probability of e); k when balanced. None
    for a model without experts or after an evaluation forward."""
    mixtures = [m for m in model.modules() if isinstance(m, MoEFeedForward)]
    logits = [m.last_logits for m in mixtures if m.last_logits is not None]
    if not logits:
        return None
    n, k = mixtures[0].num_experts, mixtures[0].num_experts_per_tok
    probs = torch.softmax(torch.cat(logits).float(), dim=-1)
    chosen = torch.topk(probs, k, dim=-1).indices
    slots = torch.nn.functional.one_hot(chosen, n).float().mean(dim=0)  # (k, n_experts)
    return n * torch.sum(slots * probs.mean(dim=0))
