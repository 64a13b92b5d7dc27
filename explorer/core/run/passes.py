"""The captured pass, the app's central data: one forward of a prompt (or a batch) with
its nodes captured, as the views, the CLI, the comparisons and the divergence finder
read it — numpy only, no torch — and ``run_prompt``, the one way to run a prompt with
capture.

The prompt pass is also generation's prefill: ``prompt_and_prefill`` keeps the KV cache,
the last logits and every node's vector at the last position, and
``generation.generate_stream(..., prefill=…)`` continues from there, so a prompt runs
through the model once. Builds no model and owns no statistics (capture.py, stats.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .analysis import gelu_input_shares
from .batch import PAD_ID, Batch
from ..base.cancel import check
from .capture import DEFAULT_BUDGET_BYTES, Capture, NodeView, StopCheck, named_blocks
from .stats import ALL_GROUPS
from .steps import StepRecorder
from ..base.devices import check_memory
from ..base.heap import give_back_freed_memory
from .largest import most_likely
from .generation import (GenerationSettings, Prefill, Step, check_vocabulary, generate_stream,
                         pick, prepare_prompt, sampler)
from ..gpt.block_model import BlockModel
from ..gpt.nodes import Kind, Role, block_hook_name, block_nodes, node_for_hook, order_of, parse_hook, role
from ..gpt.tokenizer import gpt2_tokenizer, tokenizer_of

TOP_K = 10  # next-token candidates a pass reports


@dataclass(frozen=True)
class Keep:
    """What a pass keeps. nodes: None for every node, or hook names / globs; layer: one
    block only; tensors: which nodes keep their full tensor (True, False, or names /
    globs), within ``budget_bytes`` (what does not fit keeps its statistics); float16:
    keep them in half precision; attention: also the attention patterns, True for every
    block's, a block's index for that block's only (a block whose pattern is captured
    materialises it instead of running the fused kernel, ~40 ms a block at T = 1024; the
    window asks for the shown block's, and opens another's on demand: ``opened.py``);
    gelu_shares: count each GELU input's shares.
    later: statistics when something shows them: the pass computes every node's moments
    (what the graph and the heatmaps show) and the details (histograms, top dimensions,
    token norms, GELU shares) only of the nodes in ``now`` (hook names or globs); the
    rest when read or when ``Pass.complete()`` runs (the same numbers).
    ahead: the statistics are computed on a side thread while the forward goes on, the
    moments first (``Capture``'s ``ahead``): for a core torch leaves free.
    on_read: no statistic of a kept tensor in the pass, each group when read; groups:
    the groups computed of the nodes that keep no tensor (``Capture``'s)."""

    nodes: str | tuple[str, ...] | None = None
    layer: int | None = None
    tensors: bool | str | tuple[str, ...] = True
    float16: bool = False
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    attention: bool | int = True
    gelu_shares: bool = False
    later: bool = False
    now: tuple[str, ...] = ()
    inside: bool | int = False  # also attention's own steps: every block's, or one block's
    ahead: bool = False
    on_read: bool = False
    groups: tuple[str, ...] = ALL_GROUPS
    experts: bool | int = False  # also every expert's steps: every block's, or one block's


# The app and the CLI: every node in full, patterns, GELU shares; the details later.
EVERYTHING = Keep(gelu_shares=True, later=True)
STATISTICS = Keep(tensors=False, attention=False)  # every node's statistics, no tensors


def window_keep(config, layer: int, node: str | None = None, attention_opened: bool = False,
                later: bool = True, ahead: bool = False) -> Keep:
    """What the window's prompt pass keeps: every node in full; the shown block's
    attention pattern (another block's is made when shown: ``opened.py``) and its steps
    when its attention is opened. With ``later``, the details in the pass only of what
    the first view shows (the selected ``node`` and its block's activation input), the
    rest when read; without, every statistic in the pass. ``ahead``: the statistics on a
    core torch leaves free (``cpu_work.spare_core()``)."""
    keep = dataclasses.replace(EVERYTHING, attention=layer, ahead=ahead,
                               inside=layer if attention_opened else False)
    if not later:
        return dataclasses.replace(keep, later=False)
    activation_input = role(order_of(config), Role.ACTIVATION_INPUT) if config else None
    now = ((node,) if node else ()) + ((block_hook_name(layer, activation_input),)
                                       if activation_input else ())
    return dataclasses.replace(keep, now=now)


@dataclass
class Pass:
    """A forward pass as the views see it: the tokens and every node's NodeView."""

    ids: list[int]
    pieces: list[str]
    views: dict[str, NodeView]
    step: int | None = None  # None for the prompt pass, else the generation step index
    token_id: int | None = None  # the token this pass chose (a step) or predicts next
    prob: float | None = None
    top_ids: tuple[int, ...] = ()
    top_probs: tuple[float, ...] = ()
    top_pieces: tuple[str, ...] = ()
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0
    batch: Batch | None = None  # several prompts at once (ids/pieces: the first one's)
    gelu_shares: dict = field(default_factory=dict)  # GELU input name -> GeluInputShares
    dropped: tuple[str, ...] = ()  # nodes over the memory budget: statistics only
    error: str | None = None  # the forward failed here (run_prompt(tolerate_errors=True))
    shares_later: tuple[str, ...] = ()  # GELU inputs whose shares complete() counts
    whole: bool = False  # a step that ran the whole context again (GenerationSettings.recompute)
    next_logits: np.ndarray | None = None  # (vocab,) what the next token (a step: its
    # own token) is drawn from: live sampling reshapes it without running the model

    @property
    def one_position(self) -> bool:
        """A generated step from the KV cache: every node's vector at its own position
        only, shaped (1, 1, C); a prompt pass or a recomputed step holds every position."""
        return self.step is not None and not self.whole

    @property
    def ready(self) -> bool:
        """Whether every statistic is computed (see ``Keep.later``)."""
        return not self.shares_later and all(v.stats.ready for v in self.views.values())

    def complete(self, should_stop=None) -> None:
        """Compute what the pass left for later (``Keep.later``), node by node from the
        last (a side thread, ``Keep.ahead``, goes forward); ``should_stop()`` is asked
        between nodes (``Cancelled``)."""
        for view in reversed(list(self.views.values())):
            if not view.stats.ready:
                check(should_stop)
                view.stats.complete()
        while self.shares_later:
            check(should_stop)
            name = self.shares_later[0]
            self.gelu_shares[name] = gelu_input_shares(self.views[name].real_rows())
            self.shares_later = self.shares_later[1:]

    def row_labels(self) -> list[str]:
        """For a prompt or batch pass: a label per vector of a (B, T, C) node, in
        ``reshape(-1, C)`` order."""
        if self.batch is not None:
            return self.batch.row_labels()
        return [f"{i}: {p!r}" for i, p in enumerate(self.pieces)]

    def sample_pieces(self, b: int = 0) -> list[str]:
        """Sample b's pieces per position (a batch's padding labelled ``[pad]``)."""
        return self.batch.pieces(b) if self.batch is not None else list(self.pieces)


@dataclass(frozen=True)
class Completed:
    """Reported when a pass's later statistics (``Keep.later``) are all computed."""

    result: Pass


def as_batch(prompt: Batch | list[int], context_length: int, tokenizer=None) -> Batch:
    """A single prompt (token ids, cropped to the context with a notice) as a batch of one."""
    if isinstance(prompt, Batch):
        return prompt
    ids, notices = prepare_prompt(list(prompt), context_length, tokenizer=tokenizer)
    return Batch(ids=(tuple(ids),), lengths=(len(ids),), notices=tuple(notices),
                 tokenizer=tokenizer)


def _top(logits_row: torch.Tensor, k: int = TOP_K) -> tuple[tuple[int, ...], tuple[float, ...]]:
    return most_likely(logits_row, k)[1:]


def _gelu_input(cfg) -> str | None:
    """What the block's GELU reads, if its non-linearity is a GELU."""
    order = order_of(cfg)
    activation = role(order, Role.ACTIVATION)
    if activation is None or node_for_hook(block_hook_name(0, activation), order).kind != Kind.GELU:
        return None
    return role(order, Role.ACTIVATION_INPUT)


def block_values(cfg) -> int:
    """Values one token makes in one block, every node of it that is a tensor of its own
    (the family's node table, at the config's widths: a SwiGLU block's four hidden-wide
    tensors, GPT-2's two), and attention's query, key and value projections."""
    own = sum(math.prod(n.shape(cfg, 1, 1)) for n in block_nodes(order_of(cfg))
              if n.kind != Kind.PATTERN and not n.same_in_eval)
    return own + (cfg.n_heads + 2 * cfg.kv_heads) * cfg.head_dim


def pass_bytes(cfg, batch: int, tokens: int, keep: Keep) -> int:
    """About the most memory a captured pass holds at once: the logits, one layer's
    activations (and attention pattern), and the kept tensors (within their budget)."""
    rows = batch * tokens
    logits = rows * cfg.vocab_size * 4
    layer = rows * block_values(cfg) * 4
    pattern = batch * cfg.n_heads * tokens * tokens * 4  # one block's, one T × T matrix
    if keep.attention is True or keep.inside is True:
        blocks = cfg.n_layers
    else:  # the blocks named
        blocks = len(named_blocks(keep.attention, keep.inside))
    if keep.inside is not False:  # and the scores and masked scores of the opened blocks
        blocks += 2 * (cfg.n_layers if keep.inside is True else 1)
    every_node = logits + cfg.n_layers * layer + blocks * pattern
    kept = min(keep.budget_bytes, every_node) if keep.tensors else 0
    return logits + layer + (pattern if blocks else 0) + kept


def _forward(model: BlockModel, batch: Batch, keep: Keep, should_stop, tolerate_errors: bool,
             prefill: bool, cached: bool = True) -> tuple[Pass, Prefill | None]:
    """The captured pass; with ``prefill`` also the last position's logits, and (when
    ``cached``) the KV cache and every node's vector there, for generation to go on."""
    device = next(model.parameters()).device
    need = pass_bytes(model.cfg, batch.size, batch.width, keep)
    check_memory(need, device, f"a pass of {batch.size} × {batch.width} tokens with capture")
    for b in range(batch.size):
        check_vocabulary(batch.sample(b), model.cfg.vocab_size)
    rows = [list(batch.sample(b)) + [PAD_ID] * (batch.width - batch.lengths[b])
            for b in range(batch.size)]  # what padding holds never counts
    cap = Capture(model, None if keep.nodes is None else keep.nodes, layer=keep.layer,
                  tensors=keep.tensors, float16=keep.float16, budget_bytes=keep.budget_bytes,
                  attention=keep.attention, mask=batch.mask if batch.size > 1 else None,
                  later=keep.later, now=keep.now, inside=keep.inside, ahead=keep.ahead,
                  on_read=keep.on_read, groups=keep.groups, experts=keep.experts)
    recorder = StepRecorder(model) if prefill and cached else contextlib.nullcontext()
    cache = model.new_cache() if prefill and cached else None
    error, logits, step = None, None, None
    start = time.perf_counter()
    with torch.inference_mode(), StopCheck(model, should_stop), recorder, cap:
        try:
            logits = model(torch.tensor(rows, device=device), cache=cache)  # (B, T, V)
        except RuntimeError as exc:  # e.g. a changed model whose shapes no longer add up
            if not tolerate_errors:
                raise
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if prefill and cached and logits is not None:
            step = recorder.snapshot(batch.width - 1)
    seconds = time.perf_counter() - start
    notices = list(batch.notices)
    if cap.dropped:
        notices.append(f"{len(cap.dropped)} tensors were over the memory budget: only their "
                       "statistics are shown")
    top_ids, top_probs = ((), ()) if logits is None else _top(logits[0, batch.lengths[0] - 1])
    views = cap.views()
    shares, shares_later = {}, []
    gelu_input = _gelu_input(model.cfg) if keep.gelu_shares else None
    if gelu_input:  # the Activation tab's shares: 3 million inputs a layer at T=1024
        for n, v in views.items():
            if parse_hook(n)[1] == gelu_input and v.array is not None:
                if n in cap.later or keep.on_read:  # later, as the node's details
                    shares_later.append(n)
                else:
                    shares[n] = gelu_input_shares(v.real_rows())
    ids = batch.sample(0)
    tok = tokenizer_of(model)
    result = Pass(ids=ids, pieces=[tok.token_piece(i) for i in ids], views=views,
                  token_id=top_ids[0] if top_ids else None,
                  prob=top_probs[0] if top_probs else None, top_ids=top_ids, top_probs=top_probs,
                  top_pieces=tuple(tok.token_piece(i) for i in top_ids), notices=notices,
                  seconds=seconds, batch=None if batch.size == 1 else batch, gelu_shares=shares,
                  dropped=tuple(cap.dropped), error=error, shares_later=tuple(shares_later),
                  next_logits=None if logits is None else (  # a copy of one row
                      logits[0, batch.lengths[0] - 1]).float().cpu().clone().numpy())
    # (a view would keep the whole (T, vocab) logits alive: 200 MB a pass at T = 1,024)
    if not prefill or logits is None:
        return result, None
    return result, Prefill(ids=ids, cache=cache, logits=logits[0, -1], step=step, seconds=seconds)


def run_prompt(model: BlockModel, prompt: Batch | list[int], keep: Keep = EVERYTHING,
               should_stop=None, tolerate_errors: bool = False) -> Pass:
    """One forward pass of a prompt (token ids) or a padded batch, captured as ``keep``
    says. ``should_stop`` is asked before every block (``Cancelled``). With
    ``tolerate_errors`` a forward that fails (a changed model) returns what was captured
    up to there, with ``Pass.error``."""
    batch = as_batch(prompt, model.cfg.context_length)
    return _forward(model, batch, keep, should_stop, tolerate_errors, prefill=False)[0]


def prompt_and_prefill(model: BlockModel, ids: list[int], keep: Keep = EVERYTHING,
                       should_stop=None) -> tuple[Pass, Prefill]:
    """The prompt pass that generation then continues from (one forward per prompt)."""
    batch = as_batch(ids, model.cfg.context_length, tokenizer_of(model))
    result, prefill = _forward(model, batch, keep, should_stop, False, prefill=True)
    return result, prefill


def step_pass(step: Step, ids: list[int], notices: list[str] | None = None,
              tokenizer=None) -> Pass:
    """A generated token as a pass: every node's vector at the position that chose it."""
    tok = tokenizer or gpt2_tokenizer()
    return Pass(ids=list(ids), pieces=[], views=step.capture.views() if step.capture else {},
                step=step.index, token_id=step.token_id, prob=step.prob, top_ids=step.top_ids,
                top_probs=step.top_probs, top_pieces=tuple(tok.token_piece(i) for i in step.top_ids),
                notices=list(notices or []), seconds=step.elapsed, next_logits=step.logits)


def prompt_then_generate(model: BlockModel, prompt_ids: list[int], settings: GenerationSettings,
                         report, should_stop=None, keep: Keep = EVERYTHING,
                         after_prompt=None, streams=None, forced: list[int] | None = None) -> str:
    """The app's Ctrl+Enter: the captured prompt pass, reported as a Pass, then token by
    token from its KV cache (the prompt runs once), each step reported as a Pass with
    every node's vector. ``after_prompt()`` runs between the two (the app lets its views
    draw there); then what ``keep.later`` left is computed and reported as
    ``Completed(prompt)``. Returns why it stopped: eot, max_new_tokens or stopped (checked
    between tokens). ``streams(stream)`` is told the generation stream (its KV cache
    serves branches later). ``forced``: the tokens of a saved run, replayed one by one
    instead of drawn (each step still reports its probability, to be checked)."""
    if forced is not None:
        settings = dataclasses.replace(settings, max_new_tokens=max(1, len(forced)))
    ids, notices = prepare_prompt(prompt_ids, model.cfg.context_length,
                                  new_tokens=settings.max_new_tokens, leave_room=settings.leave_room,
                                  tokenizer=tokenizer_of(model))
    prompt, prefill = prompt_and_prefill(model, ids, keep, should_stop)
    prompt.notices[:0] = notices
    if settings.recompute:  # the bound, said with the pass the status line reports
        prompt.notices.append(f"each step keeps at most "
                              f"{recompute_budget(settings, keep) / 2**20:.1f} MiB of its tensors "
                              f"({RUN_BUDGET / 2**30:.0f} GiB for the run), the rest as statistics")
    report(prompt)
    if after_prompt is not None:
        after_prompt()
    if not prompt.ready:  # what the first view did not need: now, before generating
        prompt.complete(should_stop)
        report(Completed(prompt))
    settings = dataclasses.replace(settings, capture_steps=True,
                                   show_top_k=max(settings.show_top_k, TOP_K))
    if settings.recompute:
        return _recomputing(model, prompt, prefill, settings, report, should_stop, keep, forced)
    stream = generate_stream(model, prefill.ids, settings, prefill=prefill, forced=forced)
    if streams is not None:
        streams(stream)
    seen = list(prefill.ids)
    for step in stream:
        seen.append(step.token_id)
        report(step_pass(step, seen, tokenizer=tokenizer_of(model)))
        if should_stop is not None and should_stop():
            stream.close()
            return "stopped"
    return stream.stopped_by or "max_new_tokens"


STEP_BUDGET = 256 * 2**20  # a recomputed step keeps at most this much of its tensors
RUN_BUDGET = 2 * 2**30  # and all the steps of a recomputed run together at most this much


def recompute_budget(s: GenerationSettings, keep: Keep) -> int:
    """The tensor bytes each recomputed step may keep: the run's budget shared evenly
    between its steps, fixed before the run starts (a 1,000-token run: 2 MiB a step)."""
    return min(keep.budget_bytes, STEP_BUDGET, RUN_BUDGET // max(1, s.max_new_tokens))


def _recomputing(model: BlockModel, prompt: Pass, prefill: Prefill, s: GenerationSettings,
                 report, should_stop, keep: Keep, forced: list[int] | None = None) -> str:
    """Generation the book's way (``generate_text_simple``): every new token runs the
    whole context again, without a KV cache, and each step is reported as that whole
    captured pass — (1, T + k, C) at step k; its last position chose the token."""
    gen, ctx, tok = sampler(s), model.cfg.context_length, tokenizer_of(model)
    ids, current, logits = list(prefill.ids), prompt, prefill.logits
    keep = dataclasses.replace(keep, later=False, budget_bytes=recompute_budget(s, keep))
    for index in range(s.max_new_tokens):
        if index:  # step 0 is chosen by the prompt pass itself
            check(should_stop)
            batch = as_batch(ids[-ctx:], ctx, tok)  # no KV cache to keep: only the logits
            current, pre = _forward(model, batch, keep, should_stop, False, prefill=True, cached=False)
            logits = pre.logits
        token = pick(logits, s, gen) if forced is None else forced[index]
        probs, top_ids, top_probs = most_likely(logits, s.show_top_k)
        report(dataclasses.replace(
            current, step=index, whole=True, token_id=token, prob=float(probs[token]),
            top_ids=top_ids, top_probs=top_probs,
            top_pieces=tuple(tok.token_piece(i) for i in top_ids), notices=[]))
        ids.append(token)
        give_back_freed_memory()  # the step's temporaries, larger each step
        if token == tok.eot_id and s.stop_at_eot:
            return "eot"
        if should_stop is not None and should_stop():
            return "stopped"
    return "max_new_tokens"
