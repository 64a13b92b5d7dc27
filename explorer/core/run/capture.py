"""Capturing what flows through the model's nodes, with temporary forward hooks.

- ``Capture``: a context manager for one or more forward passes. Choose the nodes (all,
  one layer, hook names, or globs such as ``trf_blocks.*.add2``) and whether to keep
  full tensors (optionally float16) within a memory budget; statistics are always kept.
Generation records each step with ``StepRecorder`` (steps.py), which builds on this.

Hooks are attached on entry and all removed on exit, also when the forward raises
(``gpt/hooks.py``). Hooks never return a value, so capturing never changes the output.
Attention patterns are hooked only when asked for: hooking them makes attention
materialise its softmax weights instead of running the fused kernel.
"""

from __future__ import annotations

import fnmatch
import weakref
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch

from ..base.cancel import check
from ..base.cpu_work import on_threads
from ..gpt.hooks import HookSet
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (Node, block_module_name, eval_source, expert_step, inside_attention, is_pattern,
                         layer_of, node_for_hook, order_of, select_hook_names)
from .resident import Batches, gather
from .stats import ALL_GROUPS, Group, NodeStats, Source, ahead_stats, tensor_stats

DEFAULT_BUDGET_BYTES = 1 << 30  # 1 GiB of kept tensors


@dataclass
class NodeCapture:
    """One node's capture: where it was, its shape, its statistics, maybe its tensor."""

    name: str
    node: Node
    shape: tuple[int, ...]
    dtype: str
    device: str
    stats: NodeStats
    tensor: torch.Tensor | None = None  # detached CPU copy when kept


@dataclass(frozen=True)
class NodeView:
    """A node's capture as views need it: numpy only, no torch. ``array`` is the tensor
    (float32) when it was kept; for a generation step it is the one position's vector,
    shaped (1, 1, C)."""

    name: str
    node: Node
    shape: tuple[int, ...]
    dtype: str
    device: str
    stats: NodeStats
    array: np.ndarray | None
    valid: np.ndarray | None = None  # shape[:-1] bool, False at a batch's padding

    def real_rows(self) -> np.ndarray | None:
        """The array as (vectors, features) without padding positions."""
        if self.array is None:
            return None
        rows = self.array.reshape(-1, self.array.shape[-1])
        return rows if self.valid is None else rows[self.valid.reshape(-1)]


class Capture(HookSet):
    """``with Capture(model, ...) as cap: model(ids)``, then ``cap[name]``.

    nodes: None for every node, or a hook name / glob / list of them.
    layer: only nodes of this block.
    tensors: which nodes keep their full tensor: False (none), True (all chosen), or a
        hook name / glob / list.
    float16: keep tensors as float16 (half the memory).
    budget_bytes: kept tensors never exceed this; a tensor that would is dropped (its
        statistics stay) and listed in ``dropped``.
    attention: also capture the attention patterns (att.attn_weights): True for every
        block's, a block's index for that block's only (the other blocks then run the
        fused kernel, which makes no pattern).
    inside: also capture attention's own steps (nodes.ATTENTION_INSIDE: the projections,
        the heads, the scores, the masked scores, the context) and the patterns: True for
        every block, a block's index for that block's steps only.
    mask: a batch's (B, T) bool mask of real tokens (``batch.Batch.mask``): statistics
        leave the padding positions out (for attention patterns: the padding queries).
    later: for the nodes that keep their full float32 tensor on the CPU, compute only
        the moments in the pass and leave the details (histogram, top dimensions, token
        norms) to ``complete()`` or their first read; ``now`` names nodes (hook names or
        globs) whose details are computed in the pass all the same.
    on_read: the nodes that keep their full float32 tensor on the CPU compute no
        statistic in the pass; each group of them (``stats.GROUPS``) when first read.
    groups: the groups computed in the pass for the other nodes (default every one);
        reading a field of another group is an error that says what was computed.
    resident: on a GPU (the default where the model's weights are not on the CPU), each
        hook holds its node's output; the statistics are computed on the device a
        shape's nodes at a time with nothing read back, kept tensors stay there, and the
        pass ends with one copy of them into one pinned buffer and one of the numbers:
        one wait a pass, not one a node (``resident.py``); ``later``, ``on_read`` and
        ``ahead`` are a CPU's.
    ahead: the statistics of the nodes that keep their full float32 tensor on the CPU
        are computed on a side thread (``cpu_work.AHEAD``) while the forward goes on, the
        moments first, for a core torch leaves free (``cpu_work.spare_core()``); what it
        has not done when the ``with`` block ends is computed then, from the last node
        back: the moments (with ``later``), or everything (without, and for ``now``).
        Not with a batch's ``mask``.
    experts: also capture each expert's steps in a mixture of experts (``ff.fc1.3``:
        expert 3's fc1, for the tokens routed to it: (1, tokens, width)); an expert no
        token was routed to does not run and has no record. True for every block, a
        block's index for that block's only. Not with a batch's ``mask``.
    """

    def __init__(self, model: BlockModel, nodes: str | Iterable[str] | None = None,
                 layer: int | None = None, tensors: bool | str | Iterable[str] = False,
                 float16: bool = False, budget_bytes: int = DEFAULT_BUDGET_BYTES,
                 attention: bool | int = False, topk: int = 5,
                 mask: torch.Tensor | np.ndarray | None = None, later: bool = False,
                 now: Iterable[str] = (), inside: bool | int = False,
                 ahead: bool = False, on_read: bool = False,
                 groups: Iterable[str] = ALL_GROUPS, resident: bool | None = None,
                 experts: bool | int = False) -> None:
        super().__init__(model)
        self.resident = (next(model.parameters()).device.type != "cpu" if resident is None
                         else resident)
        self._batches = Batches(topk, int(budget_bytes))  # resident: what is left to compute
        self.ahead, self.on_read, self.groups = ahead, on_read, known_groups(groups)
        if inside is True:
            attention = True
        patterns = named_blocks(attention, inside)
        if mask is not None:
            mask = torch.as_tensor(mask, dtype=torch.bool)
            if mask.dim() != 2:
                raise ValueError(f"the mask must be (batch, tokens), not {tuple(mask.shape)}")
            if bool(mask.all()):
                mask = None  # nothing is padding: no masking cost
        self.mask = mask
        self._masks: dict[tuple, torch.Tensor] = {}  # (device, shape) -> mask for that shape
        cfg = model.cfg
        chosen = select_hook_names(cfg, None if nodes is None else
                                   (nodes if isinstance(nodes, str) else list(nodes)),
                                   layer=layer, include_pattern=attention is not False,
                                   inside=inside is not False, experts=experts is not False)
        chosen = _experts_of(chosen, cfg, experts, self.mask)
        if inside is not True and inside is not False:  # one block's steps
            chosen = [n for n in chosen if not inside_attention(n) or layer_of(n) == inside]
        if attention is not True:  # no pattern, or only the named blocks'
            chosen = [n for n in chosen if not is_pattern(n) or layer_of(n) in patterns]
        self.names = chosen
        if tensors is True:
            keep = set(chosen)
        elif tensors is False or tensors is None:
            keep = set()
        else:
            patterns = [tensors] if isinstance(tensors, str) else list(tensors)
            keep = {n for n in chosen if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
        self.keep = keep
        self.float16 = float16
        self.budget_bytes = int(budget_bytes)
        self.topk = topk
        now = [now] if isinstance(now, str) else list(now)
        self.later = ({n for n in keep if not any(fnmatch.fnmatchcase(n, p) for p in now)}
                      if later and mask is None else set())
        self.records: dict[str, NodeCapture] = {}
        self.dropped: list[str] = []
        self.kept_bytes = 0
        order = order_of(cfg)
        self._order = order
        self._eval_source = {n: eval_source(n, order) for n in chosen if eval_source(n, order) != n}
        self._alive: dict[str, weakref.ref] = {}  # the output objects seen, while they live
        self._refs: dict[int, int] = {}  # kept tensor id -> records holding it

    # context manager -----------------------------------------------------------------
    def _hooks(self) -> dict[str, object]:
        return {name: self._hook_for(name) for name in self.names}

    def _forget(self) -> None:
        self._alive.clear()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if self.resident:
            gather(self.records, self._batches.all_numbers(), self.topk)
            self._batches = Batches(self.topk, self.budget_bytes)
            self._refs = {}
            for record in self.records.values():
                if record.tensor is not None:
                    self._refs[id(record.tensor)] = self._refs.get(id(record.tensor), 0) + 1
        if self.ahead and exc[0] is None:  # the side thread goes forward: meet it
            for name, record in reversed(list(self.records.items())):
                if name in self.later:
                    record.stats.complete_moments()
                else:  # every statistic in the pass
                    record.stats.complete()

    # access ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> NodeCapture:
        return self.records[name]

    def __contains__(self, name: str) -> bool:
        return name in self.records

    def __iter__(self):
        return iter(self.records.values())

    def complete(self, should_stop=None, workers: int | None = None) -> None:
        """Compute every statistic still to compute (``later``, ``on_read``) now, the
        largest tensors first, a node at a time on each of ``workers`` threads (default:
        torch's thread count); ``should_stop()`` is asked between nodes (``Cancelled``)."""
        todo = sorted((r for r in self.records.values() if not r.stats.ready),
                      key=lambda r: -r.stats.count)
        workers = torch.get_num_threads() if workers is None else workers
        on_threads([r.stats.complete for r in todo], min(workers, len(todo)), should_stop)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {n: r.tensor for n, r in self.records.items() if r.tensor is not None}

    def views(self) -> dict[str, NodeView]:
        """Numpy views of every record, in forward order (arrays shared, not copied)."""
        return {n: NodeView(n, r.node, r.shape, r.dtype, r.device, r.stats,
                            None if r.tensor is None else r.tensor.float().numpy(),
                            self._valid_numpy(r.shape))
                for n, r in self.records.items()}

    # padding ------------------------------------------------------------------------
    def _valid_for(self, out: torch.Tensor) -> torch.Tensor | None:
        """The mask of real vectors for this output (None: all are real)."""
        if self.mask is None:
            return None
        key = (str(out.device), tuple(out.shape))
        if key not in self._masks:
            self._masks[key] = self._shape_mask(tuple(out.shape)).to(out.device)
        return self._masks[key]

    def _shape_mask(self, shape: tuple[int, ...]) -> torch.Tensor:
        B, T = self.mask.shape
        lead = shape[:-1]
        if lead == (B, T):
            return self.mask
        if len(lead) == 3 and (lead[0], lead[2]) == (B, T):  # pattern: (B, H, T queries)
            return self.mask[:, None, :].expand(lead)
        if lead == (T,):  # the position embedding: one vector per position
            return self.mask.any(0)
        raise ValueError(f"the batch mask {(B, T)} does not fit a tensor of shape {shape}")

    def _valid_numpy(self, shape: tuple[int, ...]) -> np.ndarray | None:
        return None if self.mask is None else self._shape_mask(shape).numpy()

    # the hook -------------------------------------------------------------------------
    def _hook_for(self, name: str):
        node = node_for_hook(name, self._order)  # that family's and order's words

        def hook(module, inputs, output) -> None:
            self._record(name, node, output)

        return hook

    def _record(self, name: str, node: Node, output: torch.Tensor) -> None:
        out = output.detach()
        # In eval mode a dropout passes its input through and ff returns ff.layers.2's
        # tensor: the very same object, whose statistics (and kept copy) already exist.
        twin = None
        source = self._eval_source.get(name)
        if source is not None and not self.model.training:
            ref = self._alive.get(source)
            if ref is not None and ref() is output:
                twin = self.records[source]
        try:
            self._alive[name] = weakref.ref(output)
        except TypeError:
            pass
        kept = None
        if name in self.keep:
            self._release(self.records.get(name))  # a later pass replaces an earlier one
            if twin is not None and twin.tensor is not None:
                kept = twin.tensor  # shared, costs nothing more
                self._refs[id(kept)] = self._refs.get(id(kept), 0) + 1
            else:
                dtype = torch.float16 if self.float16 else torch.float32
                nbytes = out.numel() * torch.tensor([], dtype=dtype).element_size()
                if self.kept_bytes + nbytes <= self.budget_bytes:
                    kept = out if _keep_as_is(out, dtype, self.resident) else \
                        out.to(out.device if self.resident else "cpu", dtype, copy=True)
                    self.kept_bytes += nbytes
                    self._refs[id(kept)] = 1
                elif name not in self.dropped:
                    self.dropped.append(name)
        if self.resident:  # computed there a shape at a time, read back with the others
            if twin is not None and twin.node.hist == node.hist:
                self._batches.twins[name] = twin.name
            else:
                self._batches.add(name, out, node.hist, self._valid_for(out), kept is not None)
            stats = None  # set by gather() as the pass ends
        elif twin is not None and twin.node.hist == node.hist:
            stats = twin.stats
        elif self.on_read and _deferrable(kept, out):
            stats = NodeStats.of(Source(kept, node.hist, self.topk, self._valid_for(kept)), ())
        elif self.ahead and self.mask is None and _deferrable(kept, out):
            stats = ahead_stats(kept, node.hist, self.topk)
        elif name in self.later and _deferrable(kept, out):
            stats = tensor_stats(kept, node.hist, self.topk, self._valid_for(kept), later=True)
        else:
            stats = NodeStats.of(Source(out, node.hist, self.topk, self._valid_for(out)),
                                 self.groups, keep=False)
        self.records[name] = NodeCapture(
            name=name, node=node, shape=tuple(out.shape),
            dtype=str(out.dtype).replace("torch.", ""), device=str(out.device),
            stats=stats, tensor=kept)

    def _release(self, record: NodeCapture | None) -> None:
        if record is None or record.tensor is None:
            return
        key = id(record.tensor)
        self._refs[key] -= 1
        if not self._refs[key]:
            del self._refs[key]
            self.kept_bytes -= record.tensor.numel() * record.tensor.element_size()


def known_groups(groups: Iterable[str]) -> tuple[str, ...]:
    """The groups of statistics named (``stats.GROUPS``); an unknown name is an error."""
    groups = tuple(groups)
    unknown = set(groups) - set(ALL_GROUPS)
    if unknown:
        raise ValueError(f"no statistics named {', '.join(sorted(unknown))}: "
                         f"choose from {', '.join(ALL_GROUPS)}")
    return tuple(Group(g) for g in groups)


def _experts_of(chosen: list[str], cfg, experts: bool | int, mask) -> list[str]:
    """The chosen nodes with only the named block's experts' steps (``experts`` an
    index); a batch's mask refused beside them (their tensors hold routed tokens)."""
    if experts is not True and experts is not False:  # one block's experts
        chosen = [n for n in chosen if expert_step(n, cfg) is None or layer_of(n) == experts]
    if mask is not None and any(expert_step(n, cfg) for n in chosen):
        raise ValueError("the experts' steps are captured for unpadded prompts only: their "
                         "tensors hold routed tokens, which a batch's mask does not fit")
    return chosen


def named_blocks(attention: bool | int, inside: bool | int) -> set[int]:
    """The blocks named by index in ``attention`` and ``inside`` (True or False name none)."""
    return {b for b in (attention, inside) if not isinstance(b, bool)}


def _deferrable(kept: torch.Tensor | None, out: torch.Tensor) -> bool:
    """Whether a node's statistics can be computed after its hook, from its kept tensor:
    a float32 CPU tensor that nothing changes afterwards."""
    return kept is not None and kept.dtype == torch.float32 and out.device.type == "cpu"


def _keep_as_is(out: torch.Tensor, dtype: torch.dtype, resident: bool = False) -> bool:
    """Whether a module's output can be kept without a copy: a CPU tensor (resident: one
    on any device) of the kept dtype that owns all of its memory. The model never changes a module's output in
    place (a test checks every node against copies), so holding the output itself costs
    nothing, as TransformerLens's cache does; a copy took ~0.5 s of a 1024-token pass."""
    return ((resident or out.device.type == "cpu") and out.dtype == dtype and out.is_contiguous()
            and out.untyped_storage().nbytes() == out.numel() * out.element_size())


class StopCheck(HookSet):
    """``with StopCheck(model, should_stop)``: before each transformer block runs, ask
    ``should_stop()``; if it says yes, raise ``Cancelled``, so a long forward pass (a
    1024-token prompt on a large model) stops within one block."""

    pre = True

    def __init__(self, model: BlockModel, should_stop) -> None:
        super().__init__(model)
        self.should_stop = should_stop

    def _hooks(self) -> dict[str, object]:
        def before_block(module, inputs) -> None:
            check(self.should_stop)
        return {block_module_name(i): before_block for i in range(self.model.cfg.n_layers)}
