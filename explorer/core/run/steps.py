"""Per-token capture for generation: ``StepRecorder`` hooks keep the last position's
output of every node during a decoding step, and ``StepCapture`` holds them with their
statistics (computed a width group at a time, when first asked for)."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from ..gpt.hooks import HookSet
from .capture import NodeView
from ..gpt.model import GPTModel
from ..gpt.nodes import LOGITS, eval_source, is_pattern, node_for_hook, select_hook_names
from .stats import NodeStats, RowStats, row_stats, tensor_stats


class StepCapture:
    """Every node's vector at one position, recorded during generation, and their
    statistics. The vectors are CPU copies of exactly what the model computed; the
    statistics of a width group are computed from them once, when first asked for, so
    recording costs the decode loop almost nothing (the logits' statistics are computed
    at once and their 50,257-value vector is not kept unless asked)."""

    def __init__(self, position: int, where: dict[str, tuple[int, int]],
                 vectors: list[np.ndarray | None], computed: dict[str, NodeStats],
                 hist: list[tuple[torch.Tensor, torch.Tensor, int]], topk: int,
                 norm_position: str = "pre") -> None:
        self.position = position
        self.norm_position = norm_position
        self.names = tuple(where)
        self._where = where
        self._vectors = vectors
        self._computed = computed  # statistics computed while recording (the logits)
        self._stats: list[RowStats | None] = [None] * len(vectors)
        self._hist = hist
        self._topk = topk

    def vector(self, name: str) -> np.ndarray | None:
        group, row = self._where[name]
        vectors = self._vectors[group]
        return None if vectors is None else vectors[row]

    def stats(self, name: str) -> NodeStats:
        if name in self._computed:
            return self._computed[name]
        group, row = self._where[name]
        if self._stats[group] is None:
            lo, hi, bins = self._hist[group]
            self._stats[group] = row_stats(torch.from_numpy(self._vectors[group]),
                                           lo.cpu(), hi.cpu(), bins, self._topk)
        return self._stats[group].node_stats(row, node_for_hook(name).hist)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def views(self, dtype: str = "float32", device: str = "cpu") -> dict[str, NodeView]:
        """Numpy views of every node at this position (statistics computed here)."""
        out = {}
        for name in self.names:
            vec = self.vector(name)
            array = None if vec is None else vec.reshape(1, 1, -1)
            width = vec.shape[-1] if vec is not None else self.stats(name).count
            shape = (1, 1, width) if node_for_hook(name).batched else (1, width)
            out[name] = NodeView(name, node_for_hook(name, self.norm_position), shape, dtype, device,
                                 self.stats(name), array)
        return out


class StepRecorder(HookSet):
    """Hooks that keep the last position's output of each node; ``snapshot()`` turns the
    latest forward pass into a ``StepCapture`` (one stack and one copy per width).
    In eval mode, nodes that output another node's tensor (``Node.same_in_eval``) are
    not hooked: their vector is the other node's."""

    def __init__(self, model: GPTModel, nodes: str | Iterable[str] | None = None,
                 keep_logits: bool = False, topk: int = 5) -> None:
        super().__init__(model)
        names = select_hook_names(model.cfg, None if nodes is None else
                                  (nodes if isinstance(nodes, str) else list(nodes)))
        self.names = tuple(n for n in names if not is_pattern(n))
        self.keep_logits = keep_logits
        self.topk = topk
        groups: dict[tuple[str, int], list[str]] = {}
        for name in self.names:
            node = node_for_hook(name)
            groups.setdefault((node.width, node.hist.bins), []).append(name)
        self._groups = list(groups.values())
        self._where = {n: (g, r) for g, names_ in enumerate(self._groups) for r, n in enumerate(names_)}
        self._hist = [(torch.tensor([node_for_hook(n).hist.lo for n in g]),
                       torch.tensor([node_for_hook(n).hist.hi for n in g]),
                       node_for_hook(g[0]).hist.bins) for g in self._groups]
        self._latest: dict[str, torch.Tensor] = {}
        self._source: dict[str, str] = {}

    def _hooks(self) -> dict[str, object]:
        latest = self._latest
        self._source = {n: (n if self.model.training else eval_source(n)) for n in self.names}

        def hook_for(name: str):
            def hook(module, inputs, output) -> None:
                latest[name] = output.detach().select(-2, -1)  # the last position: (..., C)
            return hook

        return {name: hook_for(name) for name in sorted(set(self._source.values()))}

    def _forget(self) -> None:
        self._latest.clear()

    def snapshot(self, position: int) -> StepCapture:
        latest, source = self._latest, self._source
        vectors: list[np.ndarray | None] = []
        computed: dict[str, NodeStats] = {}
        for names in self._groups:
            X = torch.stack([latest[source[n]].reshape(-1) for n in names]).float()  # (R, C)
            if names == [LOGITS]:  # statistics now; keep 50,257 values only if asked
                computed[LOGITS] = tensor_stats(X, node_for_hook(LOGITS).hist, self.topk)
                vectors.append(X.cpu().numpy() if self.keep_logits else None)
            else:
                vectors.append(X.cpu().numpy())
        latest.clear()
        return StepCapture(position, self._where, vectors, computed, self._hist, self.topk,
                           self.model.cfg.norm_position)
