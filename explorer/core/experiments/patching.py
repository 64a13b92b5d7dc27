"""Activation patching (causal tracing): for a clean and a corrupted prompt of the same
length and an answer token against a wrong one, run the corrupted prompt with one node's
output replaced by its clean value — every node of every block, at the last position or
at each position — and measure how much of the logit difference comes back:

    restored = (LD_patched − LD_corrupt) / (LD_clean − LD_corrupt),
    LD = logit(answer) − logit(wrong) at the last position,

1 where the patch brings the clean answer back entirely, 0 where it changes nothing
(Meng et al. 2022; Wang et al. 2022). When the pair has no logit difference to restore
the metric is undefined: every cell is 0 and ``note`` says why. Qt-free."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
import torch

from ..base.cancel import Cancelled
from .interventions import Intervention, Resolved, activations, applied
from ..gpt.block_model import BlockModel
from ..gpt.nodes import Kind, order_of, block_hook_name, block_nodes
from ..gpt.tokenizer import gpt2_tokenizer, tokenizer_of


NOISE_GAP = 0.1  # a clean-corrupted gap (in logits) below this makes the shares noise


@dataclass(frozen=True)
class Sweep:
    keys: tuple[str, ...]  # block node keys (rows)
    layers: int
    positions: tuple[int, ...]  # the positions patched (each its own column set)
    restored: np.ndarray  # (nodes, layers, positions)
    clean_diff: float
    corrupt_diff: float
    answer: str
    wrong: str
    clean: str
    corrupt: str
    note: str = ""
    corrupt_pieces: tuple[str, ...] = ()  # the corrupted prompt's tokens as the model reads them

    def best(self) -> tuple[str, int, int, float]:
        """The node, layer and position whose patch restores the most."""
        i, layer, p = np.unravel_index(int(np.argmax(self.restored)), self.restored.shape)
        return self.keys[i], int(layer), self.positions[p], float(self.restored[i, layer, p])

    def write_csv(self, path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["node", "layer", "position", "restored"])
            for i, key in enumerate(self.keys):
                for layer in range(self.layers):
                    for j, p in enumerate(self.positions):
                        w.writerow([block_hook_name(layer, key), layer, p,
                                    f"{self.restored[i, layer, j]:.6g}"])


def single_token(text: str, what: str, tokenizer=None) -> int:
    tok = tokenizer or gpt2_tokenizer()
    ids = tok.encode(text, allow_special=False)
    if len(ids) != 1:
        raise ValueError(f"the {what} must be one token; {text!r} is {len(ids)}: "
                         f"{[tok.token_piece(i) for i in ids]} (mind the leading space: ' Mary')")
    return ids[0]


def patch_keys(norm_position: str) -> tuple[str, ...]:
    """The block nodes patched: every one but the attention pattern."""
    return tuple(n.key for n in block_nodes(norm_position) if n.kind != Kind.PATTERN)


def logit_difference(model: BlockModel, ids: list[int], answer: int, wrong: int) -> float:
    device = next(model.parameters()).device
    with torch.inference_mode():
        last = model(torch.tensor([ids], device=device), last_only=True)[0, -1].float()
    return float(last[answer] - last[wrong])


def patch_sweep(model: BlockModel, clean: str, corrupt: str, answer: str, wrong: str,
                positions: str = "last", should_stop=None, progress=None) -> Sweep:
    """Patch every block node of the corrupted run with its clean value; see the module."""
    tok = tokenizer_of(model)
    clean_ids, corrupt_ids = tok.encode(clean), tok.encode(corrupt)
    if not clean_ids or not corrupt_ids:
        raise ValueError("both prompts need text")
    if len(clean_ids) != len(corrupt_ids):
        raise ValueError(f"the clean prompt has {len(clean_ids)} tokens and the corrupted one "
                         f"{len(corrupt_ids)}: patching needs the same length, token for token")
    if len(clean_ids) > model.cfg.context_length:
        raise ValueError(f"the prompts have {len(clean_ids)} tokens; the context is "
                         f"{model.cfg.context_length}")
    if positions not in ("last", "all"):
        raise ValueError(f"positions must be last or all, got {positions!r}")
    a, w = single_token(answer, "answer", tok), single_token(wrong, "wrong token", tok)
    if a == w:
        raise ValueError("the answer and the wrong token are the same token")
    cfg = model.cfg
    keys = patch_keys(order_of(cfg))
    spots = tuple(range(len(clean_ids))) if positions == "all" else (len(clean_ids) - 1,)
    clean_diff = logit_difference(model, clean_ids, a, w)
    corrupt_diff = logit_difference(model, corrupt_ids, a, w)
    gap = clean_diff - corrupt_diff
    note, nothing = "", abs(gap) < 1e-6 * max(1.0, abs(clean_diff))
    if nothing:
        note = (f"the two prompts give the same logit difference ({clean_diff:.4g}): there is "
                "nothing to restore, so every cell is 0")
    elif abs(gap) < NOISE_GAP:
        note = (f"the clean and corrupted logit differences are only {abs(gap):.3g} apart (under "
                f"{NOISE_GAP:g}): each share divides by that gap, so the shares are noise")
    restored = np.zeros((len(keys), cfg.n_layers, len(spots)))
    total, done = restored.size, 0
    names = [block_hook_name(layer, key) for layer in range(cfg.n_layers) for key in keys]
    sources = activations(model, clean_ids, names)  # the clean run, once for every node
    for layer in range(cfg.n_layers):
        for i, key in enumerate(keys):
            name = block_hook_name(layer, key)
            for j, p in enumerate(spots):
                if should_stop is not None and should_stop():
                    raise Cancelled("stopped")
                if not nothing:
                    spec = [Resolved(Intervention("patch", name, prompt=clean, positions=(p,)),
                                     sources[name])]
                    with applied(model, spec):
                        diff = logit_difference(model, corrupt_ids, a, w)
                    restored[i, layer, j] = (diff - corrupt_diff) / gap
                done += 1
                if progress is not None:
                    progress(done, total)
    return Sweep(keys, cfg.n_layers, spots, restored, clean_diff, corrupt_diff, answer, wrong,
                 clean, corrupt, note, tuple(tok.token_piece(i) for i in corrupt_ids))
