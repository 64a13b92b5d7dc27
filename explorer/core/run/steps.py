"""Per-token capture for generation: ``StepRecorder`` hooks keep the last position's
output of every node during a decoding step, and ``StepCapture`` holds them with their
statistics (computed a width group at a time, when first asked for)."""

from __future__ import annotations

import threading
from typing import Iterable

import numpy as np
import torch

from ..gpt.hooks import HookSet
from .capture import NodeView
from ..gpt.block_model import BlockModel
from ..gpt.node_types import Node
from ..gpt.nodes import order_of, LOGITS, eval_source, is_pattern, node_for_hook, select_hook_names
from .row_stats import RowStats, row_stats
from .stats import NodeStats, tensor_stats


class StepCapture:
    """Every node's vector at one position, recorded during generation, and their
    statistics. The vectors are CPU copies of exactly what the model computed; the
    statistics of a width group are computed from them once, when first asked for, so
    recording costs the decode loop almost nothing. The logits' statistics too are
    computed when first asked for, from the step's own logits (the tensor the step was
    drawn from, not a copy); their 50,257-value vector is not a ``vector`` unless asked."""

    def __init__(self, position: int, where: dict[str, tuple[int, int]],
                 vectors: list[np.ndarray | None], pending: dict[str, torch.Tensor],
                 hist: list[tuple[torch.Tensor, torch.Tensor, int]], topk: int,
                 nodes: dict[str, Node], shown: dict[str, Node]) -> None:
        self.position = position
        self.names = tuple(where)
        self._where = where
        self._vectors = vectors
        self._pending = pending  # name -> the tensor whose statistics are still to compute
        self._computed: dict[str, NodeStats] = {}
        self._lock = threading.Lock()
        self._stats: list[RowStats | None] = [None] * len(vectors)
        self._hist = hist
        self._topk = topk
        self._nodes = nodes  # name -> its Node (the recorder's table, shared by every step)
        self._shown = shown  # name -> its Node in the words of the model's norm position

    def vector(self, name: str) -> np.ndarray | None:
        group, row = self._where[name]
        vectors = self._vectors[group]
        return None if vectors is None else vectors[row]

    def stats(self, name: str) -> NodeStats:
        if name in self._pending:
            with self._lock:  # the engine's thread and the window may ask at once
                if name not in self._computed:
                    self._computed[name] = tensor_stats(self._pending[name],
                                                        self._nodes[name].hist, self._topk)
            return self._computed[name]
        group, row = self._where[name]
        if self._stats[group] is None:
            lo, hi, bins = self._hist[group]
            self._stats[group] = row_stats(torch.from_numpy(self._vectors[group]),
                                           lo.cpu(), hi.cpu(), bins, self._topk)
        return self._stats[group].node_stats(row, self._nodes[name].hist)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def views(self, dtype: str = "float32", device: str = "cpu") -> dict[str, NodeView]:
        """Numpy views of every node at this position (statistics computed here)."""
        out = {}
        for name in self.names:
            vec = self.vector(name)
            array = None if vec is None else vec.reshape(1, 1, -1)
            width = vec.shape[-1] if vec is not None else self.stats(name).count
            shape = (1, 1, width) if self._nodes[name].batched else (1, width)
            out[name] = NodeView(name, self._shown[name], shape, dtype, device,
                                 self.stats(name), array)
        return out


class StepRecorder(HookSet):
    """Hooks that keep the last position's output of each node; ``snapshot()`` turns the
    latest forward pass into a ``StepCapture`` (one stack and one copy per width).
    In eval mode, nodes that output another node's tensor (``Node.same_in_eval``) are
    not hooked: their vector is the other node's."""

    def __init__(self, model: BlockModel, nodes: str | Iterable[str] | None = None,
                 keep_logits: bool = False, topk: int = 5) -> None:
        super().__init__(model)
        names = select_hook_names(model.cfg, None if nodes is None else
                                  (nodes if isinstance(nodes, str) else list(nodes)),
                                  inside=nodes is not None)  # named: attention's steps too
        self.names = tuple(n for n in names if not is_pattern(n))
        self.keep_logits = keep_logits
        self.topk = topk
        groups: dict[tuple[str, int], list[str]] = {}
        order = self._order = order_of(model.cfg)
        for name in self.names:
            node = node_for_hook(name, order)
            groups.setdefault((node.width, node.hist.bins), []).append(name)
        self._groups = list(groups.values())
        self._where = {n: (g, r) for g, names_ in enumerate(self._groups) for r, n in enumerate(names_)}
        self._hist = [(torch.tensor([node_for_hook(n, order).hist.lo for n in g]),
                       torch.tensor([node_for_hook(n, order).hist.hi for n in g]),
                       node_for_hook(g[0], order).hist.bins) for g in self._groups]
        self._latest: dict[str, torch.Tensor] = {}
        self._source: dict[str, str] = {}
        self._nodes = {n: node_for_hook(n, order) for n in self.names}
        self._shown = self._nodes  # that family's and order's words

    def _find_sources(self) -> None:
        """Each node's source: the node whose output it is in this mode."""
        self._source = {n: (n if self.model.training else eval_source(n, self._order))
                        for n in self.names}

    def _hooks(self) -> dict[str, object]:
        latest = self._latest
        self._find_sources()

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
        pending: dict[str, torch.Tensor] = {}
        for names in self._groups:
            if names == [LOGITS]:  # statistics when asked; keep 50,257 values only if asked
                row = latest[source[LOGITS]].reshape(1, -1)
                if row.untyped_storage().nbytes() > row.numel() * row.element_size():
                    row = row.clone()  # a prompt's last row: not the whole (T, vocab) logits
                pending[LOGITS] = row
                vectors.append(row.float().cpu().numpy() if self.keep_logits else None)
                continue
            X = torch.stack([latest[source[n]].reshape(-1) for n in names]).float()  # (R, C)
            vectors.append(X.cpu().numpy())
        latest.clear()
        return StepCapture(position, self._where, vectors, pending, self._hist, self.topk,
                           self._nodes, self._shown)
