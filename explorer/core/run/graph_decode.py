"""Decoding with every shape fixed ahead, so that a step can be recorded once and replayed
for each token: the step runs over a static KV cache (``gpt.kv.StaticCache``), its token
is read from a buffer on the device, its logits and every recorded node's vector at the
step's position are written into buffers of their own. On a CUDA GPU the step is
recorded as a CUDA graph after two warm-up runs and replayed for each later token: one
launch instead of a few hundred kernels', the per-token capture inside it. Elsewhere the
same step runs as it is, which is what the tests compare with the growing cache's decode
(the same tokens, the same vectors and statistics to float rounding).

``GPT_EXPLORER_STATIC_DECODE``: ``1`` decodes this way on every device (without graphs
where there is no CUDA), ``0`` never; by default a CUDA device does. A mixture of experts
decodes with the growing cache: which experts run is decided on the host, which a
recorded graph cannot do."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import torch
from torch import nn

from ..base.devices import free_memory_bytes
from ..gpt.block_model import BlockModel
from ..gpt.kv import KVCache, StaticCache, watched  # noqa: F401 (StaticCache: the stream's cache)
from ..gpt.nodes import LOGITS
from .steps import StepCapture, StepRecorder

SWITCH = "GPT_EXPLORER_STATIC_DECODE"
# Positions a stream's static cache holds beyond the prompt, all made at once (Qwen3-0.6B's
# 4,096: 0.94 GB in float32); past them the keys and values go on growing.
MOST = 4096


def wanted(model: BlockModel, device: torch.device) -> bool:
    """Whether a stream on ``device`` decodes with a static cache (module docstring). Not
    while hooks of anyone else's are on the model (an intervention): a recorded step
    would run them once, as they were when it was recorded."""
    chosen = os.environ.get(SWITCH, "")
    if chosen == "0" or model.cfg.n_experts or hooked(model):
        return False
    return chosen == "1" or device.type == "cuda"


def fits(cache: KVCache, size: int) -> bool:
    """Whether a static cache of ``size`` positions continuing ``cache`` takes at most half
    the memory left on its device (otherwise the run goes on with the cache growing)."""
    need = sum(2 * kv.k.shape[1] * size * kv.k.shape[3] * kv.k.element_size()
               for kv in cache.layers)
    free = free_memory_bytes(cache.layers[0].k.device)
    return free is None or need <= free // 2


def hooked(model: nn.Module) -> bool:
    """Whether any forward hook is on the model's modules, or on every module."""
    modules = nn.modules.module
    if modules._global_forward_hooks or modules._global_forward_pre_hooks:
        return True
    return watched(*model.modules())


class StaticRecorder(StepRecorder):
    """A StepRecorder whose hooks copy each node's vector at the step's position into one
    buffer on the device (a view per node), so that a recorded step writes them on every
    replay; ``snapshot`` reads them in one copy. The first run finds the buffer's size."""

    def __init__(self, model: BlockModel, cache: StaticCache, nodes=None,
                 keep_logits: bool = False, topk: int = 5) -> None:
        super().__init__(model, nodes, keep_logits=keep_logits, topk=topk)
        self.cache = cache
        self.flat: torch.Tensor | None = None  # every vector but the logits, float32
        self.rows: dict[str, torch.Tensor] = {}  # name -> its view of ``flat``
        self.logits: torch.Tensor | None = None  # (1, vocab) when recorded

    def _at_position(self, output: torch.Tensor) -> torch.Tensor:
        """The vector at the step's position: the one query's, or the cache's row at the
        position for a tensor along the keys (repeated keys and values)."""
        x = output.detach()
        if x.shape[-2] == 1:
            return x.select(-2, 0)
        return x.index_select(-2, self.cache.position).squeeze(-2)

    def _hooks(self) -> dict[str, object]:
        self._find_sources()
        targets: dict[str, list[str]] = {}
        for name, source in self._source.items():
            targets.setdefault(source, []).append(name)

        def hook_for(names: list[str]):
            def hook(module, inputs, output) -> None:
                vector = self._at_position(output)
                for name in names:
                    if name == LOGITS:
                        self._keep_logits(vector)
                    elif self.flat is None:
                        self._latest[name] = vector.reshape(-1).float().clone()
                    else:
                        self.rows[name].copy_(vector.reshape(-1))
            return hook

        return {source: hook_for(names) for source, names in targets.items()}

    def _keep_logits(self, vector: torch.Tensor) -> None:
        if self.logits is None:
            self.logits = vector.reshape(1, -1).clone()
        else:
            self.logits.copy_(vector.reshape(1, -1))

    def settle(self) -> None:
        """After the first run: one buffer for every vector it saw, each node a view."""
        if self.flat is not None:
            return
        seen = [n for names in self._groups for n in names if n != LOGITS]
        first = self._latest
        self.flat = torch.cat([first[n] for n in seen])
        at = 0
        for name in seen:
            size = first[name].numel()
            self.rows[name] = self.flat[at:at + size]
            at += size
        first.clear()

    def _forget(self) -> None:
        """The buffers stay: a recorded graph writes them after the hooks are gone."""

    def snapshot(self, position: int) -> StepCapture:
        flat = self.flat.to("cpu", copy=True).numpy()  # one copy (the buffer is the next step's)
        vectors: list[np.ndarray | None] = []
        pending: dict[str, torch.Tensor] = {}
        at = 0
        for names in self._groups:
            if names == [LOGITS]:
                pending[LOGITS] = self.logits.clone()  # the buffer is the next step's
                vectors.append(self.logits.float().cpu().numpy() if self.keep_logits else None)
                continue
            width = self.rows[names[0]].numel()
            vectors.append(flat[at:at + width * len(names)].reshape(len(names), width))
            at += width * len(names)
        return StepCapture(position, self._where, vectors, pending, self._hist, self.topk,
                           self._nodes, self._shown)


class StaticDecoder:
    """Steps of one token over a static cache of ``size`` positions continuing ``cache``;
    ``step(token)`` returns the logits (vocab,). With
    ``record`` the step's nodes are recorded too (``snapshot``; ``nodes`` as StepRecorder's)."""

    def __init__(self, model: BlockModel, cache: KVCache, size: int, record: bool = False,
                 graphs: bool | None = None, nodes=None) -> None:
        self.model = model
        self.cache = StaticCache(cache, size)
        device = self.cache.position.device
        self.token = torch.zeros((1, 1), dtype=torch.long, device=device)
        self.logits: torch.Tensor | None = None
        self.recorder = StaticRecorder(model, self.cache, nodes) if record else None
        self.graphs = device.type == "cuda" if graphs is None else graphs
        self.graph = None
        self.runs = 0  # steps run as they are (not replayed)
        self.why: str | None = None  # why a step could not be recorded

    @property
    def full(self) -> bool:
        return self.cache.length >= self.cache.size

    def step(self, token: int) -> torch.Tensor:
        if self.full:
            raise ValueError(f"the static cache's {self.cache.size} positions are full")
        self.token.fill_(token)  # no wait: the value travels with the launch
        if self.graph is not None:
            self.graph.replay()
            self.cache.length += 1
        elif self.graphs and self.runs:
            self._record()
        else:
            self._run()
        return self.logits.clone()  # the buffer is the next step's

    def snapshot(self, position: int) -> StepCapture:
        return self.recorder.snapshot(position)

    def _run(self) -> None:
        if self.recorder is not None:
            with self.recorder:
                out = self.model(self.token, cache=self.cache, last_only=True)[0, -1]
            self.recorder.settle()
        else:
            out = self.model(self.token, cache=self.cache, last_only=True)[0, -1]
        if self.logits is None:
            self.logits = torch.empty_like(out)
        self.logits.copy_(out)
        self.runs += 1

    def _twice(self) -> None:
        """This step run, then run again at the same position: the same token, the same
        writes, and one step's state after. A graph is recorded from kernels that ran
        before (their workspaces made)."""
        self._run()
        self.cache.length -= 1
        self.cache.position.sub_(1)
        self._run()

    def _record(self) -> None:
        """This step run twice on a side stream, then recorded as a graph and replayed
        from the next step on."""
        cache = self.cache
        length = cache.length
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self._twice()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with self.recorder or contextlib.nullcontext(), torch.cuda.graph(graph):
                self._replayed()
        except RuntimeError as exc:  # something in the step asks the host: steps run as they are
            graph, self.graphs, self.why = None, False, str(exc)
        cache.length = length + 1  # recording ran no kernel: the run above is this step's
        self.graph = graph

    def _replayed(self) -> None:
        out = self.model(self.token, cache=self.cache, last_only=True)[0, -1]
        self.logits.copy_(out)

