"""Head roles: what each attention head does, scored from its pattern, with the evidence.

On any prompt, from the attention weights ``A[query, key]`` of each head, as the share
above an even spread, averaged over the queries (1: the head attends only there; 0: it
spreads evenly):

- previous-token: the weight on the token just before (``A[p, p-1]``);
- first-token: the weight on the first token (an attention sink);
- current-token: the weight on the query's own token;
- local: the weight on the three tokens before (``p-3 … p-1``).

Induction, on a battery: seeded random token sequences repeated twice. In the second
copy, an induction head attends from each token to the token that followed its first
occurrence (``A[p, p - n + 1]`` for a sequence of n tokens) and, if it also copies, raises
that token's logit: the copying score is the head's direct contribution to the logit of
the token it attends to, above the vocabulary's mean, through the final norm's scale
at that position (the linearisation of core.attribution.direct).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..base.cancel import check
from ..gpt.hooks import hooks
from ..gpt.block_model import BlockModel
from ..gpt.norms import DyT
from ..gpt.nodes import FINAL_NORM, HEADS_MIX, LOGITS, PATTERN, block_hook_name
from ..run.capture import StopCheck

PATTERN_ROLES = ("previous-token", "first-token", "current-token", "local")
ROLES = PATTERN_ROLES + ("induction",)
ROLE_EVIDENCE = {  # each: the share above an even spread, 1 = only there
    "previous-token": "attention on the token just before",
    "first-token": "attention on the first token (an attention sink)",
    "current-token": "attention on the query's own token",
    "local": "attention on the three tokens before",
    "induction": "attention, in the repeated half of the battery, on the token that "
                 "followed the current token's first occurrence",
    "copying": "the head's direct contribution to the logit of the token it attends to, "
               "in the battery (logits, not a share)",
}
COPYING = "copying"  # scored by the battery beside induction
CLEAR = 0.4  # a score above this names the head's role
KEEP = 256  # the prompt's whole patterns are kept up to this many tokens (gpt2-xl at 1,024
# tokens would hold 5 GB of them; the scores need only four diagonals, read in the hook)


@dataclass
class HeadRoles:
    scores: dict[str, np.ndarray]  # role -> (layers, heads)
    patterns: np.ndarray | None  # (layers, heads, T, T): the prompt's, up to KEEP tokens
    battery_ids: tuple[int, ...] = ()  # the first battery sequence (both copies)
    battery_patterns: np.ndarray | None = None  # its patterns
    copying: np.ndarray | None = None  # (layers, heads), logits
    notes: list[str] = field(default_factory=list)

    def role(self, layer: int, head: int) -> str:
        """The role with the highest score, if it is above CLEAR; else ''."""
        best = max(self.scores, key=lambda r: self.scores[r][layer, head])
        return best if self.scores[best][layer, head] > CLEAR else ""

    def values(self, role: str) -> np.ndarray | None:
        """(layers, heads) scores of a role or of copying; None for the battery's two
        before it ran."""
        if role in ("induction", COPYING) and self.battery_patterns is None:
            return None
        return self.copying if role == COPYING else self.scores[role]

    def best(self, role: str) -> tuple[int, int, float]:
        values = self.values(role)
        if values is None:
            raise ValueError(f"{role}: run the induction battery first")
        layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
        return int(layer), int(head), float(values[layer, head])


def above_even(weights: np.ndarray, keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Mean over ``queries`` of the weight on ``keys`` keys, as a share above an even
    spread: ``(w - u) / (1 - u)`` with ``u = keys / (query + 1)``, so 1 for a head that
    attends only there and 0 for one that attends evenly (on a short prompt an even
    spread already puts half its weight on the token before)."""
    even = keys / (queries + 1.0)
    return ((weights - even) / (1.0 - even)).mean(-1)


def pattern_scores(patterns: np.ndarray) -> dict[str, np.ndarray]:
    """The four pattern roles' scores of (..., T, T) attention weights (one block's
    heads, or every block's): the leading axes kept."""
    t = patterns.shape[-1]
    zeros = np.zeros(patterns.shape[:-2])
    if t < 2:
        return {role: zeros for role in PATTERN_ROLES}
    q = np.arange(1, t)
    scores = {"previous-token": above_even(patterns[..., q, q - 1], 1, q),
              "first-token": above_even(patterns[..., q, 0], 1, q),
              "current-token": above_even(patterns[..., q, q], 1, q),
              "local": zeros}
    if t > 4:
        q = np.arange(4, t)
        near = sum(patterns[..., q, q - back] for back in (1, 2, 3))
        scores["local"] = above_even(near, 3, q)
    return scores


def read_patterns(model: BlockModel, ids: torch.Tensor, should_stop=None,
                  contexts: dict | None = None, final_inputs: list | None = None,
                  keep: bool = True) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Every head's pattern-role scores for a (1, T) prompt, computed block by block as
    the patterns are made, and the patterns themselves, (layers, heads, T, T), when
    ``keep``. ``contexts`` (layer -> the heads' context, (1, T, C)) and ``final_inputs``
    are filled when given."""
    n = model.cfg.n_layers
    found: dict[int, np.ndarray] = {}
    scores: dict[int, dict[str, np.ndarray]] = {}

    def read(layer: int):
        def hook(module, inputs, out):
            weights = out[0].detach().float().cpu().numpy()  # (H, T, T), no copy on CPU
            scores[layer] = pattern_scores(weights)
            if keep:
                found[layer] = weights.copy()
        return hook

    def context(layer: int):
        def hook(module, inputs):
            contexts[layer] = inputs[0].detach().double().cpu().numpy()
        return hook

    forward = [(block_hook_name(i, PATTERN), read(i)) for i in range(n)]
    pre = [(block_hook_name(i, HEADS_MIX), context(i)) for i in range(n)] if contexts is not None else []
    if final_inputs is not None:
        pre.append((FINAL_NORM, lambda module, inputs: final_inputs.append(
            inputs[0].detach().double().cpu().numpy())))
    with torch.inference_mode(), StopCheck(model, should_stop), hooks(model, forward, pre):
        model(ids.to(next(model.parameters()).device))
    stacked = {role: np.stack([scores[i][role] for i in range(n)]) for role in PATTERN_ROLES}
    return stacked, (np.stack([found[i] for i in range(n)]) if keep else None)


def battery(vocab: int, length: int, sequences: int, seed: int) -> torch.Tensor:
    """(sequences, 2 * length) ids: seeded random tokens, each sequence twice. Distinct
    tokens within a sequence when the vocabulary allows (a repeat would make the
    induction target ambiguous); drawn from the middle of a GPT-2-sized vocabulary."""
    low, high = min(100, vocab // 4), min(20000, vocab)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(sequences):
        if length <= high - low:
            first = torch.randperm(high - low, generator=gen)[:length] + low
        else:
            first = torch.randint(low, high, (length,), generator=gen)
        rows.append(torch.cat([first, first]))
    return torch.stack(rows)


def copying_scores(model: BlockModel, ids: np.ndarray, contexts: dict, final_input: np.ndarray,
                   length: int) -> np.ndarray:
    """(layers, heads): each head's direct contribution to the logit of the token an
    induction head should attend to, above the vocabulary's mean, averaged over the
    second copy's positions."""
    cfg = model.cfg
    heads, head_dim = cfg.n_heads, cfg.head_dim
    norm = model.get_submodule(FINAL_NORM)
    gamma = (norm.gain() if hasattr(norm, "gain") else norm.scale).detach().double().cpu().numpy()
    unembed = model.get_parameter(f"{LOGITS}.weight").detach()
    mean = unembed.mean(0, dtype=torch.float64).cpu().numpy()
    positions = np.arange(length, 2 * length - 1)
    targets = ids[:, positions - length + 1]  # (B, P): the tokens that followed
    rows = unembed[torch.as_tensor(targets).to(unembed.device)].double().cpu().numpy()
    x = final_input[:, positions]
    directions = (rows - mean) * gamma  # (B, P, C)
    if isinstance(norm, DyT):  # tanh value by value: its slope at each value, γ·α·(1 − tanh²)
        alpha = float(norm.alpha.detach().double().cpu()[0])
        sigma = np.ones(x.shape[:-1])
        directions *= alpha * (1 - np.tanh(alpha * x) ** 2)
    elif not cfg.family.centred_norm:  # RMSNorm: divided by the root mean square, nothing taken out
        sigma = np.sqrt((x ** 2).mean(-1) + norm.eps)  # (B, P)
    else:  # LayerNorm: the mean taken out (of the direction, as of the input), σ
        sigma = np.sqrt(x.var(-1) + norm.eps)
        directions -= directions.mean(-1, keepdims=True)
    directions /= sigma[..., None]
    out = np.zeros((cfg.n_layers, heads))
    for layer in range(cfg.n_layers):
        w_o = model.get_parameter(f"{block_hook_name(layer, HEADS_MIX)}.weight").detach()
        w_o = w_o.double().cpu().numpy().reshape(w_o.shape[0], heads, head_dim)
        ctx = contexts[layer][:, positions].reshape(*targets.shape, heads, head_dim)
        per_head = np.einsum("bphd,chd->bphc", ctx, w_o)  # each head's output
        out[layer] = np.einsum("bphc,bpc->h", per_head, directions) / targets.size
    return out


def head_roles(model: BlockModel, ids: list[int], induction: bool = False, length: int = 40,
               sequences: int = 4, seed: int = 0, should_stop=None, progress=None) -> HeadRoles:
    """The pattern roles on the prompt ``ids``; with ``induction`` also the battery
    (``progress(done, total)`` after each sequence; ``should_stop()`` between blocks)."""
    if not ids:
        raise ValueError("an empty prompt has no attention to score")
    ids = ids[:model.cfg.context_length]
    scores, prompt = read_patterns(model, torch.tensor([ids]), should_stop,
                                   keep=len(ids) <= KEEP)
    result = HeadRoles(scores, prompt)
    zeros = np.zeros((model.cfg.n_layers, model.cfg.n_heads))
    result.scores["induction"] = zeros
    if not induction:
        result.notes.append("Induction: run the battery to score it.")
        return result
    length = max(2, min(length, model.cfg.context_length // 2))
    tokens = battery(model.cfg.vocab_size, length, sequences, seed)
    positions = np.arange(length, 2 * length - 1)
    induction_sum, copying_sum = zeros.copy(), zeros.copy()
    for i in range(sequences):
        check(should_stop)
        contexts, finals = {}, []
        patterns = read_patterns(model, tokens[i:i + 1], should_stop, contexts, finals)[1]
        induction_sum += above_even(patterns[..., positions, positions - length + 1], 1,
                                    positions)
        copying_sum += copying_scores(model, tokens[i:i + 1].numpy(), contexts, finals[0], length)
        if i == 0:
            result.battery_ids = tuple(tokens[0].tolist())
            result.battery_patterns = patterns
        if progress is not None:
            progress(i + 1, sequences)
    result.scores["induction"] = induction_sum / sequences
    result.copying = copying_sum / sequences
    return result


def write_csv(roles: HeadRoles, path) -> None:
    """One row per head: its scores, the copying score when the battery ran, its role."""
    import csv

    measured = ROLES if roles.copying is not None else PATTERN_ROLES
    layers, heads = roles.scores["previous-token"].shape
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["block", "head", *measured,
                         *(["copying"] if roles.copying is not None else []), "role"])
        for layer in range(layers):
            for head in range(heads):
                copying = ([f"{roles.copying[layer, head]:.6g}"]
                           if roles.copying is not None else [])
                writer.writerow([layer, head,
                                 *(f"{roles.scores[r][layer, head]:.6g}" for r in measured),
                                 *copying, roles.role(layer, head)])
