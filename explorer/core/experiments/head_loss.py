"""The output head and the cross-entropy together, a few rows at a time: the same loss
as ``F.cross_entropy(out_head(x).flatten(0, 1), y)`` without the (B·T, vocab) logits.

A training step of a small GPT spends most of its time on the vocabulary side: the
logits (8 × 128 × 50,257 floats, 206 MB), their log-softmax, the zeroed gradient the
loss's backward writes and the casts around them, each a pass over 206 MB. Here each
chunk of rows has its logits computed, turned into the loss and into its gradient
(softmax minus the one-hot target) while it is still in the cache, and the gradients of
the hidden states and of the head's weight are finished in the forward pass; the
backward pass only scales them by the incoming gradient. In bfloat16 the products run
in bfloat16 as autocast runs them (the logits rounded to bfloat16, the loss in float32).
"""

from __future__ import annotations

import threading

import torch

CHUNK_ROWS = 128  # a chunk's logits: 128 × 50,257 floats, 26 MB
WHOLE_ROWS = 8  # float32's logits are one product; their softmax passes go 8 rows at a time


_kept = threading.local()


def _buffer(name: str, shape: tuple[int, ...], dtype: torch.dtype,
            device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """The buffer ``name`` of the previous call when it fits, else a new one: a new
    tensor of tens of MB is fresh memory from the system, whose first writes fault in
    every page (~80 ms a step for mini's 206 MB of logits in float32)."""
    kept = getattr(_kept, "buffers", None)
    if kept is None:
        _kept.buffers = kept = {}
    buf = kept.get(name)
    if buf is None or buf.shape != shape or buf.dtype != dtype or buf.device != device:
        kept[name] = buf = None  # the old one freed before the new one is made
        kept[name] = buf = torch.empty(shape, dtype=dtype, device=device)
    return buf


def release() -> None:
    """The kept buffers freed (a run has ended)."""
    _kept.buffers = None


class _HeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, bfloat16: bool, chunk: int, need_grad: bool):
        n = hidden.shape[0]
        dtype = torch.bfloat16 if bfloat16 else hidden.dtype
        vocab = weight.shape[0]
        device = hidden.device  # the buffers live where the model does
        w = weight if weight.dtype == dtype else \
            _buffer("weight", weight.shape, dtype, device).copy_(weight)
        h_all = hidden.to(dtype)
        whole = dtype == torch.float32
        # the logits' gradients, for one product with the hidden states at the end; in
        # float32 the logits are made there whole (one product is faster than a chunk's)
        g_all = _buffer("logits", (n, vocab), dtype, device) if need_grad or whole else None
        if not whole:  # a chunk's logits in bfloat16, then in float32
            low = _buffer("chunk", (min(chunk, n), vocab), dtype, device)
            high = _buffer("chunk32", (min(chunk, n), vocab), torch.float32, device)
        if whole:
            torch.mm(h_all, w.t(), out=g_all)
        total = torch.zeros((), dtype=torch.float64, device=device)
        scale = torch.empty(n, dtype=torch.float32, device=device)  # 1 / (each row's sum · n)
        if whole:  # the logits made whole: the passes over them 8 rows (1.6 MB) at a time,
            chunk = min(chunk, WHOLE_ROWS)  # which stay in a core's cache between passes
        rows = torch.arange(chunk, device=device)
        for start in range(0, n, chunk):
            h = h_all[start:start + chunk]
            y = targets[start:start + chunk]
            r = rows[:len(y)]
            if whole:
                logits = g_all[start:start + chunk]  # (rows, vocab)
            else:
                logits = high[:len(y)].copy_(torch.mm(h, w.t(), out=low[:len(y)]))
            top = logits.amax(dim=1, keepdim=True)
            picked = logits[r, y] - top[:, 0]
            e = logits.sub_(top).exp_()  # one exp of each logit
            sums = e.sum(dim=1)
            total += (sums.log() - picked).sum(dtype=torch.float64)  # log-sum-exp − target
            if not need_grad:
                continue
            # d(mean loss)/d(logits) = (softmax − one-hot) / n: the exponentials kept as
            # they are, each row's 1 / (sum · n) and the one-hot applied to the products'
            # rows below (a pass over the logits fewer)
            scale[start:start + chunk] = 1.0 / (sums.float() * n)
            if not whole:
                g_all[start:start + chunk] = e
        if need_grad:
            grad_h = (g_all @ w).float().mul_(scale[:, None]).sub_(weight[targets].float() / n)
            scaled = (hidden.float() * scale[:, None]).to(dtype)  # one rounding in bfloat16
            grad_w = (g_all.t() @ scaled if dtype == weight.dtype else  # (vocab, C)
                      torch.mm(g_all.t(), scaled, out=_buffer("grad", weight.shape, dtype,
                                                              device)).to(weight.dtype))
            grad_w.index_add_(0, targets, hidden.to(grad_w.dtype), alpha=-1.0 / n)
            ctx.save_for_backward(grad_h.to(hidden.dtype), grad_w)
        return (total / n).to(hidden.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        if grad_out.device.type == "cpu" and bool(grad_out == 1):  # a loss's own backward
            return grad_h, grad_w, None, None, None, None
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None


def head_loss(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
              bfloat16: bool = False, chunk: int = CHUNK_ROWS) -> torch.Tensor:
    """Mean cross-entropy of ``hidden`` (..., C) through the head ``weight`` (vocab, C)
    against ``targets`` (...): a scalar with gradients for both."""
    # (inside the Function's forward gradients are always off: asked here)
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    with torch.autocast(hidden.device.type, enabled=False):
        return _HeadLoss.apply(hidden.reshape(-1, hidden.shape[-1]), weight,
                               targets.reshape(-1), bfloat16, chunk, need_grad)


def loss_of(model, x: torch.Tensor, y: torch.Tensor, bfloat16: bool = False) -> torch.Tensor:
    """A model's mean cross-entropy of the next tokens ``y`` after ``x`` (B, T):
    ``F.cross_entropy(model(x).flatten(0, 1), y.flatten())``, its head applied with the
    loss. With ``bfloat16`` the matrix products run in bfloat16 (autocast); the residual
    stream, the norms and the loss stay float32."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bfloat16):
        hidden = model(x, head=False)  # (B, T, C)
    return head_loss(hidden, model.out_head.weight, y, bfloat16)
