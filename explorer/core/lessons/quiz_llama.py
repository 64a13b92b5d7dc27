"""Learn's questions about what the Llama / Qwen block changed (the book's bonus
chapters): RMSNorm, RoPE, the SwiGLU gate and grouped-query attention. As quiz.py's,
every answer and every feedback number comes from the shown pass's tensors — RoPE's
angles are read off the rotated values themselves — and the options are alike in form:
four of one grid, or numbers around the answer. Qt-free."""

from __future__ import annotations

import math
import random

import numpy as np

from ..gpt.nodes import (KEYS, KEYS_ROPE, QUERIES_ROPE, SECOND_NORM, VALUES, Kind, block_hook_name,
                         input_node, node_for_hook, role, Role)
from .facts import SHAPES, VALUES as VALUE_FACTS
from .question import Live, Question, choices, live_layer, numbers_around, spread
from .rope_shift import turn

BUCKETS = ["under 25%", "25–50%", "50–75%", "over 75%"]
NEAR = 0.1  # a gate "near zero": |SiLU(fc1·x)| at most this


def _rows(view) -> np.ndarray | None:
    """A node's values as (vectors, last axis), or None when its tensor was not kept."""
    return None if view is None or view.array is None else view.array.reshape(-1, view.shape[-1])


def _grid(question: str, right: str, wrong: dict[str, str], explanation: str,
          rng: random.Random, hides: frozenset, gives: tuple = ()) -> Question:
    options, answer, reasons = choices(right, list(wrong), rng, wrong)
    return Question(question, options, answer, explanation, reasons, hides, gives)


# ------------------------------------------------------------------ RMSNorm
def rms_mean_question(live: Live, rng: random.Random) -> Question:
    """What RMSNorm does with the mean: the four of one grid (mean left in or taken out
    × divided by the root mean square or by the standard deviation)."""
    right = "leaves the mean in, divides by its root mean square"
    out, std = "LayerNorm takes the mean out; RMSNorm never does", \
        "the standard deviation is LayerNorm's; RMSNorm divides by √(mean(x²) + eps)"
    wrong = {"takes the mean out, divides by its root mean square": out,
             "leaves the mean in, divides by its standard deviation": std,
             "takes the mean out, divides by its standard deviation": f"{out}; and {std}"}
    x, y = _rows(live.input()), _rows(live.view)
    numbers = ""
    if x is not None and y is not None:
        last, after = x[-1].astype(np.float64), y[-1]
        rms = math.sqrt(float(np.mean(last ** 2)))
        numbers = (f" Here the last vector had mean {last.mean():.3g} and root mean square "
                   f"{rms:.3g}; x / √(mean(x²) + eps) keeps a mean of {last.mean() / rms:.3g} "
                   f"(not 0), and after the weight the output's mean is {after.mean():.3g}.")
    return _grid(f"What does {live.node.label} ({live.name}) do to each vector?", right, wrong,
                 "It leaves the mean in and divides by √(mean(x²) + eps), then multiplies by "
                 f"a learned weight; there is no shift.{numbers}", rng, frozenset({VALUE_FACTS}),
                 gives=("no mean subtracted", "subtracts no mean", "√(mean(x²) + eps)"))


def rms_size_question(live: Live, rng: random.Random) -> Question:
    """The root mean square of x / √(mean(x²) + eps), before the weight: about 1."""
    x = _rows(live.input())
    c = live.shape[-1]
    rms_in = math.sqrt(float(np.mean(x[-1].astype(np.float64) ** 2))) if x is not None else 2.0
    eps = live.norm_eps
    normed = rms_in / math.sqrt(rms_in ** 2 + eps)
    said = (f"{normed:.6f} for the last vector: a little under, because of eps" if normed > 0.9
            else f"but {normed:.3g} for the last vector here: its root mean square, {rms_in:.3g}, is "
                 f"near √eps ({math.sqrt(eps):.3g}), and eps, added under the root, holds it below 1")
    root = math.sqrt(c)
    candidates = {  # each side of 1, so the answer's rank says nothing
        "0": (0.0, "that would be a mean taken out and nothing left; RMSNorm divides, it "
                   "does not subtract"),
        f"{1 / root:.3g}": (1 / root, f"1/√{c}: x divided by its length ‖x‖, not by its root "
                                      "mean square"),
        f"{1 / c:.3g}": (1 / c, f"1/{c}: x divided by its sum of squares' length times √{c}; "
                                "the mean of the squares is what is rooted"),
        f"{root:.3g}": (root, f"√{c}: the length of a vector of {c} ones, not the root mean "
                              "square of its values"),
        f"{c}": (float(c), f"{c}: the sum of the squares of a vector whose root mean square "
                           "is 1, not the root mean square itself"),
        f"{rms_in:.3g}": (rms_in, "that is the input's root mean square, before the division")}
    offered = spread(1.0, {t: v for t, v in candidates.items() if t != "1"}, rng)
    return _grid(f"Before its weight, what is the root mean square of each vector "
                 f"{live.node.label} ({live.name}) makes?", "1", offered,
                 f"About 1 ({said}): x is divided by its own root mean square ({rms_in:.3g} "
                 "here); the learned weight then sets each feature's size.", rng,
                 frozenset({VALUE_FACTS}))


# ------------------------------------------------------------------ RoPE
def _pair_angles(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The angle each pair (i, i + half) was turned by, from the values themselves."""
    half = before.shape[-1] // 2
    turned = (np.arctan2(after[..., half:], after[..., :half])
              - np.arctan2(before[..., half:], before[..., :half]))
    return np.angle(np.exp(1j * turned))  # into (−π, π]


def _rotations(live: Live):
    """This RoPE node's values before and after the rotation, for batch 0 and head 0:
    (positions, head_dim) each; None when a tensor was not kept."""
    source, view = live.input(), live.view
    if source is None or source.array is None or view.array is None:
        return None
    return source.array[0, 0].astype(np.float64), view.array[0, 0].astype(np.float64)


def rope_angle_question(live: Live, rng: random.Random) -> Question:
    """By what angle the last token's first pair is turned: its position × θ₀, read off
    the tensors (θ₀ = 1: base^0)."""
    pair = _rotations(live)
    t = live.shape[-2]
    p = t - 1
    theta = _pair_angles(*pair)[1] if pair is not None and t > 1 else np.ones(2)
    t0, t1 = float(theta[0]), float(theta[1]) if theta.size > 1 else 0.5
    tn = float(theta[-1])
    right = p * t0
    candidates = {  # mistakes on each side of the answer: its rank says nothing
        f"{t0:.3g}": (t0, f"{t0:.3g} rad is θ₀ itself: the angle at position 1, not at {p}"),
        f"{(p - 1) * t0:.3g}": ((p - 1) * t0, f"{p - 1} × θ₀ is the token before it; the last "
                                              f"of {t} tokens stands at {p}"),
        f"{p * t1:.3g}": (p * t1, f"{p} × θ₁ ({t1:.3g}) turns the second pair; the first turns "
                                  f"by {p} × θ₀"),
        f"{p * tn:.3g}": (p * tn, f"{p} × θ of the last pair ({tn:.3g}), the slowest; the first "
                                  f"pair turns fastest, by {p} × θ₀"),
        f"{(p + 1) * t0:.3g}": ((p + 1) * t0, f"positions count from 0: the last of {t} tokens "
                                              f"stands at {p}, not {p + 1}"),
        f"{2 * p * t0:.3g}": (2 * p * t0, "the pair turns once by its angle; its two values "
                                          "are not each turned by it"),
        f"{math.degrees(p * t0):.3g}": (math.degrees(p * t0), f"{math.degrees(right):.3g} is "
                                        "the same angle in degrees; the question asks radians")}
    candidates = {k: v for k, v in candidates.items() if k != f"{right:.3g}"}
    wrong = spread(right, candidates, rng)
    detail = ""
    if pair is not None:
        before, after = pair[0][p], pair[1][p]
        half = before.size // 2
        detail = (f" Here the pair ({before[0]:.3g}, {before[half]:.3g}) became "
                  f"({after[0]:.3g}, {after[half]:.3g}): the same length, "
                  f"{math.hypot(before[0], before[half]):.3g}, turned.")
    return _grid(f"The last token stands at position {p}. By how many radians does "
                 f"{live.node.label} ({live.name}) turn its first pair of values?",
                 f"{right:.3g}", wrong, f"position × θ₀ = {p} × {t0:.3g} = {right:.3g} rad "
                 f"(θᵢ = base^(−2i/head_dim), so θ₀ = 1).{detail}", rng,
                 frozenset({VALUE_FACTS}))


def rope_shift_question(live: Live, rng: random.Random) -> Question:
    """The whole prompt moved on by a shift: a score of two tokens does not change; the
    demonstration worked with this block's own queries and keys and the angles read off
    them."""
    layer = live_layer(live)
    q_in = live.views.get(input_node(block_hook_name(layer, QUERIES_ROPE), live.norm_position))
    k_in = live.views.get(input_node(block_hook_name(layer, KEYS_ROPE), live.norm_position))
    q_rot, k_rot = live.near(QUERIES_ROPE), live.near(KEYS_ROPE)
    shift = rng.choice((3, 7, 50))
    right = "it stays the same as it was"
    wrong = {"it grows with the shift": "a rotation changes no length, and both vectors turn by "
                                        "the same extra angle: their dot product stays",
             "it shrinks with the shift": "the extra angle shift × θᵢ is the same for both "
                                          "tokens, so it cancels in their dot product",
             "it turns from one sign to the other": "nothing in the dot product sees the "
                                                    "shift: only how far apart the two are"}
    detail = ""
    views = (q_in, k_in, q_rot, k_rot)
    if all(v is not None and v.array is not None for v in views) and q_rot.shape[-2] > 1:
        q0, k0 = q_in.array[0, 0].astype(np.float64), k_in.array[0, 0].astype(np.float64)
        theta = _pair_angles(k0, k_rot.array[0, 0].astype(np.float64))[1]  # at position 1
        p = q0.shape[0] - 1
        scores = [turn(q0[p], (p + s) * theta) @ turn(k0[0], s * theta) for s in (0, shift)]
        detail = (f" Worked with this block's head 0: the last token's query against the first "
                  f"token's key scores {scores[0]:.6g} where they stand and {scores[1]:.6g} "
                  f"with both moved on by {shift}.")
    return _grid(f"Move the whole prompt on by {shift} positions. What happens to the score "
                 "of the last token's query against the first token's key?", right, wrong,
                 "It stays the same: RoPE turns each query and key by its own position, and "
                 "the dot product of two turned vectors depends only on the difference of the "
                 f"angles — how far apart the tokens are.{detail}", rng,
                 frozenset({VALUE_FACTS}), gives=("how far apart", "distance only"))


# ------------------------------------------------------------------ SwiGLU
def gate_share_question(live: Live, rng: random.Random) -> Question:
    y = live.view.real_rows() if live.view.array is not None else None
    share = float((np.abs(y) <= NEAR).mean()) if y is not None else 0.5
    right = BUCKETS[min(3, int(share * 4))]
    why_not = {b: f"{100 * share:.1f}% are within ±{NEAR} in this pass" for b in BUCKETS}
    return _grid(f"What share of the gate's values SiLU(fc1·x) ({live.name}) lie within "
                 f"±{NEAR} of zero in this pass?", right,
                 {b: why_not[b] for b in BUCKETS if b != right},
                 f"{100 * share:.1f}% of the {0 if y is None else y.size:,} gate values: there "
                 "fc2's value is almost shut off in the product; the rest passes, scaled.",
                 rng, frozenset({VALUE_FACTS}))


def swiglu_weights_question(live: Live, rng: random.Random) -> Question:
    """The SwiGLU's weights per block against the GELU MLP's at 4 × emb_dim."""
    layer = live_layer(live)
    c = live.width(SECOND_NORM, layer) or int(live.shape[-1])
    hidden = live.width(role(live.norm_position, Role.ACTIVATION_INPUT), layer) or 4 * c
    right = 3 * c * hidden
    mlp = 2 * c * 4 * c
    gate = role(live.norm_position, Role.ACTIVATION)  # SiLU's, or Gemma's GELU's
    glu = ("GeGLU" if node_for_hook(block_hook_name(layer, gate), live.norm_position).kind == Kind.GELU
           else "SwiGLU")
    roles = {2 * c * hidden: f"two matrices of {c} × {hidden}: GELU's MLP has two, {glu} three",
             mlp: f"GPT-2's MLP at 4 × {c}: two matrices of {c} × {4 * c}",
             3 * c * 4 * c: f"three matrices at 4 × {c} = {4 * c}; this one's width is {hidden}"}
    offered = numbers_around(right, list(roles), rng)
    why_not = {f"{v:,}": roles.get(v, f"3 × {c} × {hidden} = {right:,}, not {v:,}")
               for v in offered}
    options, answer, reasons = choices(f"{right:,}", [f"{v:,}" for v in offered], rng, why_not)
    return Question(f"How many weights do fc1, fc2 and fc3 hold together in this block's "
                    f"feed-forward ({live.name})?", options, answer,
                    f"3 × {c} × {hidden} = {right:,}: fc1 and fc2 each {c} × {hidden}, fc3 "
                    f"{hidden} × {c}, no biases. GPT-2's MLP at 4 × {c} holds {mlp:,}; three "
                    f"matrices cost the same at 8/3 × {c} ≈ {8 * c // 3}, which is why a "
                    f"{glu} is not 4 × emb_dim wide (this one is {hidden / c:.3g} ×).",
                    reasons, frozenset({SHAPES}))


# ------------------------------------------------------------------ GQA
def _heads(live: Live) -> tuple[int, int, int]:
    """(query heads, key/value heads, head_dim) of the node's block, from its shapes."""
    q, k = live.near(QUERIES_ROPE), live.near(KEYS_ROPE)
    h = int(q.shape[1]) if q is not None else 1
    kv = int(k.shape[1]) if k is not None else h
    hd = int(q.shape[-1]) if q is not None else int(live.shape[-1])
    return h, kv, hd


def group_question(live: Live, rng: random.Random) -> Question:
    h, kv, hd = _heads(live)
    g = h // kv
    candidates = {  # each side of the answer
        f"{kv / h:.3g}": (kv / h, f"{kv} / {h}: the ratio the other way round; each key/value "
                                  f"head serves {h} / {kv} query heads"),
        "1": (1.0, "one each is plain multi-head attention; here the key heads are fewer"),
        str(kv): (float(kv), "the number of key/value heads, not how many query heads each "
                             "serves"),
        str(h): (float(h), "all the query heads: that would be one key/value head for the "
                           "whole block (multi-query attention)"),
        str(h * kv): (float(h * kv), f"{h} × {kv}: the heads multiplied, where they divide"),
        str(2 * g): (2.0 * g, f"2 × {g}: the keys and values of a group come from the same "
                              "key/value head, counted once"),
        f"{g / 2:g}": (g / 2, f"{g} / 2: a key/value head holds both the keys and the values; "
                              "they are not two heads"),
        str(hd): (float(hd), f"{hd} is head_dim, the values each head reads, not a number of "
                             "heads")}
    why_not = spread(float(g), {t: v for t, v in candidates.items() if t != str(g)}, rng)
    options, answer, reasons = choices(str(g), list(why_not), rng, why_not)
    return Question(f"How many query heads read each key/value head in {live.node.label} "
                    f"({live.name})?", options, answer,
                    f"{h} query heads share {kv} key/value heads: {h} / {kv} = {g} each "
                    f"(repeat_interleave repeats each key head {g} times).", reasons,
                    frozenset({SHAPES}))


def cache_question(live: Live, rng: random.Random) -> Question:
    """The values one token adds to this block's KV cache: keys and values, kv heads of
    head_dim each — against multi-head attention's."""
    h, kv, hd = _heads(live)
    right = 2 * kv * hd
    roles = {2 * h * hd: f"a key and a value head for each of the {h} query heads: what "
                         "multi-head attention would keep",
             kv * hd: "the keys alone; the values are kept too",
             h * hd: "the queries' width; queries are not cached"}
    offered = numbers_around(right, list(roles), rng)
    why_not = {str(v): roles.get(v, f"2 × {kv} × {hd} = {right}, not {v}") for v in offered}
    options, answer, reasons = choices(str(right), [str(v) for v in offered], rng, why_not)
    which = "keys" if live.node.key == KEYS else "values" if live.node.key == VALUES else "both"
    return Question("How many values does one token add to this block's KV cache (keys and "
                    f"values together; {live.node.label} makes the {which})?", options, answer,
                    f"2 × {kv} key/value heads × {hd} = {right}; with a key and value head "
                    f"for each of the {h} query heads it would be {2 * h * hd}: grouped-query "
                    f"attention keeps {kv}/{h} of that.", reasons, frozenset({SHAPES}))


__all__ = ["rms_mean_question", "rms_size_question", "rope_angle_question",
           "rope_shift_question", "gate_share_question", "swiglu_weights_question",
           "group_question", "cache_question"]
