"""The largest entries of one long row on a CPU (a step's logits or probabilities over
the vocabulary): ``torch.topk`` and ``torch.argmax`` give the answer, these give it
sooner where the row is long.

The row is read as rows of ``ROW`` values: each row's maximum first (one vectorised
pass), then only the rows whose maximum reaches the k-th largest of those maxima can
hold one of the k largest values, and ``torch.topk`` looks at those alone (and the few
values past the last whole row): at Gemma 3's 262,144 a tenth of ``torch.topk``'s time
(``benchmarks/bench_largest.py``, docs/PERFORMANCE.md). The same values, and the same ids where values differ; ``arg_max`` is ``argmax``
exactly (the first of equal maxima, the first NaN where there is one).
"""

from __future__ import annotations

import torch

ROW = 512  # values a row
LONG = 1 << 15  # fewer values than this go to torch.topk / torch.argmax as they are


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """``x`` (1-D) as (rows, ROW) and the count of values past them; None where torch's
    own functions are as quick (short, or not on a CPU)."""
    if x.dim() != 1 or x.numel() < LONG or x.device.type != "cpu" or not x.is_contiguous():
        return None
    whole = x.numel() // ROW * ROW
    return x[:whole].view(-1, ROW), x.numel() - whole


def top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.topk(x, k)`` of a 1-D tensor as (values, ids), largest first."""
    split = _rows(x)
    if split is None or not 0 < k <= ROW:
        top = torch.topk(x, k)
        return top.values, top.indices
    rows, rest = split
    highest = rows.amax(-1)
    if bool(torch.isnan(highest).any()):  # NaN counts as the largest: torch's own order
        top = torch.topk(x, k)
        return top.values, top.indices
    reach = torch.topk(highest, min(k, len(highest))).values[-1]
    chosen = (highest >= reach).nonzero().squeeze(1)
    ids = (chosen[:, None] * ROW + torch.arange(ROW)).reshape(-1)
    values = rows[chosen].reshape(-1)
    if rest:
        ids = torch.cat([ids, torch.arange(x.numel() - rest, x.numel())])
        values = torch.cat([values, x[-rest:]])
    top = torch.topk(values, k)
    return top.values, ids[top.indices]


def arg_max(x: torch.Tensor) -> int:
    """``int(torch.argmax(x))`` of a 1-D tensor."""
    split = _rows(x)
    if split is None:
        return int(torch.argmax(x))
    rows, rest = split
    row = int(rows.amax(-1).argmax())
    best = row * ROW + int(rows[row].argmax())
    if rest:
        last = x.numel() - rest + int(x[-rest:].argmax())
        a, b = x[best], x[last]
        if not bool(torch.isnan(a)) and (bool(torch.isnan(b)) or bool(b > a)):
            best = last
    return best


def most_likely(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, tuple[int, ...],
                                                        tuple[float, ...]]:
    """A row of logits' probabilities (float32) and its ``k`` most likely ids with
    their probabilities, the most likely first."""
    probs = torch.softmax(logits.float(), dim=-1)
    values, ids = top_k(probs, min(k, probs.numel()))
    return probs, tuple(ids.tolist()), tuple(values.tolist())
