"""RoPE's point, shown on the model: a query–key score depends on how far apart the two
tokens are, not on where they stand. The same block input is run through the model's
own attention with its tokens moved on by a shift (``forward(x, pos=shift)``), and the
score of the last token's query against an earlier token's key is read from the
attention's own scores; beside it the same score worked in float64 from the head's
query and key before the rotation, rotated by (position + shift) · θᵢ. Moving both
tokens by the same shift leaves the score as it was. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gpt.nodes import ATTENTION, FIRST_NORM, SCORES, Role, block_hook_name, order_of, role
from ..run.capture import Capture

SHIFTS = (0, 1, 7, 100, 1000)


@dataclass(frozen=True)
class RopeShift:
    block: int
    head: int
    query: int  # the positions in the prompt of the two tokens
    key: int
    shifts: tuple[int, ...]
    live: tuple[float, ...]  # the model's own score (float32) with both tokens moved on
    worked: tuple[float, ...]  # the same in float64, rotated by hand
    theta: np.ndarray  # θᵢ of the head's first pairs
    pair: tuple[tuple[float, float], tuple[float, float]]  # the query's first pair, before
    # and after its rotation by query · θ₀ (no shift)

    def spread(self, scores: tuple[float, ...]) -> float:
        """The largest difference between two of the shifted scores."""
        return float(max(scores) - min(scores))


def turn(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """The book's apply_rope on one head's vector, in float64: value i of the first half
    paired with i + head_dim/2, the pair turned by ``angles[i]`` (position · θᵢ)."""
    half = x.size // 2
    x1, x2 = x[:half], x[half:]
    return np.concatenate([x1 * np.cos(angles) - x2 * np.sin(angles),
                           x2 * np.cos(angles) + x1 * np.sin(angles)])


def _rotate(x: np.ndarray, position: float, inv_freq: np.ndarray) -> np.ndarray:
    return turn(x, position * inv_freq)


def rope_shift(model: torch.nn.Module, ids: list[int], block: int = 0, head: int = 0,
               shifts: tuple[int, ...] = SHIFTS) -> RopeShift:
    """The last token's query against the first token's key in ``block``'s head
    ``head``, with the prompt moved on by each of ``shifts``."""
    cfg = model.cfg
    if role(order_of(cfg), Role.KEYS_ROPE) is None:
        raise ValueError(f"a {cfg.family.title} block has no RoPE: it adds a learned position "
                         "embedding instead, and its scores change with where tokens stand")
    if len(ids) < 2:
        raise ValueError("the prompt needs two tokens at least: a query and an earlier key")
    if max(shifts) + len(ids) > cfg.context_length:
        raise ValueError(f"a shift of {max(shifts)} moves the prompt past the model's "
                         f"{cfg.context_length:,} positions")
    norm = block_hook_name(block, FIRST_NORM)
    device = next(model.parameters()).device
    with torch.no_grad(), Capture(model, nodes=[norm], tensors=True) as cap:
        model(torch.tensor([ids], device=device))
    x = cap[norm].tensor.to(device=device, dtype=next(model.parameters()).dtype)
    att = model.get_submodule(block_hook_name(block, ATTENTION))
    q_at, k_at = len(ids) - 1, 0
    scores, live = block_hook_name(block, SCORES), []
    with torch.no_grad():
        for shift in shifts:  # the attention alone, its tokens moved on by the shift
            with Capture(model, nodes=[scores], tensors=True, inside=block) as cap:
                att(x, pos=shift)
            live.append(float(cap[scores].tensor[0, head, q_at, k_at]))
    q, k = _heads_before_rotation(att, x, head, q_at, k_at)
    inv_freq = att.rope.inv_freq.double().numpy()
    worked = tuple(float(_rotate(q, q_at + s, inv_freq) @ _rotate(k, k_at + s, inv_freq))
                   for s in shifts)
    turned = _rotate(q, q_at, inv_freq)
    half = q.size // 2
    return RopeShift(block, head, q_at, k_at, tuple(shifts), tuple(live), worked,
                     inv_freq[:4].copy(), ((float(q[0]), float(q[half])),
                                           (float(turned[0]), float(turned[half]))))


def _heads_before_rotation(att, x: torch.Tensor, head: int, q_at: int, k_at: int):
    """The head's query at ``q_at`` and its key/value group's key at ``k_at``, as the
    attention makes them before RoPE (after Qwen3's q_norm and k_norm), in float64."""
    with torch.no_grad():
        b, t, _ = x.shape
        queries = att.W_query(x).view(b, t, att.num_heads, att.head_dim).transpose(1, 2)
        keys = att.W_key(x).view(b, t, att.num_kv_groups, att.head_dim).transpose(1, 2)
        if att.q_norm is not None:
            queries, keys = att.q_norm(queries), att.k_norm(keys)
    group = head // (att.num_heads // att.num_kv_groups)
    return (queries[0, head, q_at].double().cpu().numpy(),
            keys[0, group, k_at].double().cpu().numpy())
