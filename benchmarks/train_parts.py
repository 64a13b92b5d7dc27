"""Where a training step's time goes, part by part: the book's loop and the explorer's
trainer (float32 and bfloat16) on the same batches, one step of each in turn.

The parts, in milliseconds a step (medians):

- the data: a batch drawn as each loop draws it (the book: its ``DataLoader`` over the
  sliding windows, shuffled; the explorer: random windows of the token tensor); the
  steps themselves then run on the same batches;
- the blocks' forward (embeddings, dropout, blocks, final norm);
- the head and the loss, forward (the book: the head's product and ``cross_entropy``;
  the explorer: ``head_loss``, which also makes both gradients);
- the head and the loss, backward (up to the hidden states' gradient, told by a hook on
  them), then the blocks' backward;
- the optimizer (the explorer: gradient clipping and fused AdamW; the book: AdamW);
- one evaluation as both schedules run it (4 batches of each split and a 20-token
  sample), spread over ``eval_every`` steps;
- of which attention, forward: the blocks' attention modules (a forward hook before and
  after each), already counted in the blocks' forward.

And, in the same run, the head's three matrix products alone (the logits, the hidden
states' gradient, the weight's gradient: 2 · rows · vocab · width operations each) in
float32 and bfloat16. Both loops must make them, so the book's step over them is the
most any trainer that computes the exact loss can gain on this CPU.

    python benchmarks/bench_train.py --rows parts [--rounds 6] [--threads N]
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from explorer.core.experiments import head_loss as head_losses
from explorer.core.experiments.head_loss import head_loss
from explorer.core.experiments.training import Trainer, TrainSettings
from explorer.core.gpt.tokenizer import encode
from torch.utils.data import DataLoader

from tests import book_model
from tests.book_model import GPTDatasetV1

PARTS = ("data, a batch", "blocks, forward", "head and loss, forward", "head and loss, backward",
         "blocks, backward", "optimizer", "evaluation, a step's share")
WITHIN = "of which attention, forward"  # inside the blocks' forward: not added again


class _Clock:
    """Times between named marks of one step."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        self.times[part] = self.times.get(part, 0.0) + 1e3 * (now - self._last)
        self._last = now


class _Inside:
    """Milliseconds spent inside some modules' forwards, summed until taken."""

    def __init__(self, modules) -> None:
        self.total, self._start = 0.0, 0.0
        for m in modules:
            m.register_forward_pre_hook(self._enter)
            m.register_forward_hook(self._leave)

    def _enter(self, *_args) -> None:
        self._start = time.perf_counter()

    def _leave(self, *_args) -> None:
        self.total += 1e3 * (time.perf_counter() - self._start)

    def take(self) -> float:
        total, self.total = self.total, 0.0
        return total


def _backward(loss: torch.Tensor, hidden: torch.Tensor, clock: _Clock) -> None:
    hidden.register_hook(lambda grad: clock.mark("head and loss, backward"))
    loss.backward()
    clock.mark("blocks, backward")


class BookSteps:
    """The book's GPTModel and AdamW, its forward called module by module as its
    ``forward`` does, so the head is timed apart."""

    def __init__(self, trainer: Trainer) -> None:
        cfg = trainer.cfg
        torch.manual_seed(123)
        self.model = book_model.GPTModel({
            "vocab_size": cfg.vocab_size, "context_length": cfg.context_length,
            "emb_dim": cfg.emb_dim, "n_heads": cfg.n_heads, "n_layers": cfg.n_layers,
            "drop_rate": 0.1, "qkv_bias": False})
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=4e-4, weight_decay=0.1)
        self.trainer = trainer  # its batches
        context = cfg.context_length
        self.loader = DataLoader(GPTDatasetV1(trainer.train_ids.tolist(), context, context),
                                 batch_size=trainer.settings.batch_size, shuffle=True,
                                 drop_last=True, num_workers=0)
        self._batches = iter(self.loader)
        self.attention = _Inside(b.att for b in self.model.trf_blocks)

    def draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch from the book's loader, as its loop draws one (a new epoch when done)."""
        try:
            return next(self._batches)
        except StopIteration:
            self._batches = iter(self.loader)
            return next(self._batches)

    def _hidden(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        h = m.drop_emb(m.tok_emb(x) + m.pos_emb(torch.arange(x.shape[1])))
        return m.final_norm(m.trf_blocks(h))

    def _loss(self, hidden: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.model.out_head(hidden).flatten(0, 1), y.flatten())

    def step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        self.model.train()
        clock = _Clock()
        self.optimizer.zero_grad()
        hidden = self._hidden(x)
        clock.mark("blocks, forward")
        loss = self._loss(hidden, y)
        clock.mark("head and loss, forward")
        _backward(loss, hidden, clock)
        self.optimizer.step()
        clock.mark("optimizer")
        return clock.times

    def evaluate(self, batches: list[tuple[torch.Tensor, torch.Tensor]], tokens: int) -> None:
        self.model.eval()
        with torch.no_grad():
            for x, y in batches:
                self._loss(self._hidden(x), y).item()
            start = torch.tensor([encode(self.trainer.settings.sample_prompt)])
            book_model.generate_text_simple(self.model, start, tokens,
                                            self.trainer.cfg.context_length)


class ExplorerSteps:
    """The explorer's trainer's model and optimizer, its step as ``Trainer._run`` makes it
    (gradient clipping, fused AdamW), in float32 or bfloat16 autocast."""

    def __init__(self, trainer: Trainer, bfloat16: bool) -> None:
        self.trainer, self.bfloat16 = trainer, bfloat16
        self.attention = _Inside(b.att for b in trainer.model.trf_blocks)
        self._gen = torch.Generator().manual_seed(1)

    def draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch as the trainer draws one."""
        return self.trainer._batch(self.trainer.train_ids, self._gen)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        t = self.trainer
        t.model.train()
        clock = _Clock()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bfloat16):
            hidden = t.model(x, head=False)
        clock.mark("blocks, forward")
        loss = head_loss(hidden, t.model.out_head.weight, y, self.bfloat16)
        clock.mark("head and loss, forward")
        t.optimizer.zero_grad(set_to_none=True)
        _backward(loss, hidden, clock)
        torch.nn.utils.clip_grad_norm_(t.model.parameters(), t.settings.grad_clip, foreach=True)
        t.optimizer.step()
        clock.mark("optimizer")
        return clock.times

    def evaluate(self, batches: list[tuple[torch.Tensor, torch.Tensor]], tokens: int) -> None:
        t = self.trainer
        t.bfloat16, was = self.bfloat16, t.bfloat16
        try:
            t.evaluate()
            t.sample()
        finally:
            t.bfloat16 = was


def head_products(rows: int, width: int, vocab: int, dtype: torch.dtype, repeats: int) -> float:
    """Milliseconds (median) for the head's three products at these shapes."""
    h, w = torch.randn(rows, width, dtype=dtype), torch.randn(vocab, width, dtype=dtype)
    g, logits = torch.randn(rows, vocab, dtype=dtype), torch.empty(rows, vocab, dtype=dtype)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        torch.mm(h, w.t(), out=logits)
        g @ w  # the hidden states' gradient
        g.t() @ h  # the weight's gradient
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times[1:])


def run_parts(name: str, text: str, batch: int, rounds: int) -> None:
    """Print the parts of a step of each loop, and the head's products alone."""
    settings = TrainSettings(preset=name, batch_size=batch, precision="float32")
    trainer = Trainer(text, settings)
    loops = {"book": BookSteps(trainer), "explorer float32": ExplorerSteps(trainer, False),
             "explorer bfloat16": ExplorerSteps(trainer, True)}
    gen = torch.Generator().manual_seed(0)
    evals = [trainer._batch(trainer.train_ids, gen) for _ in range(2 * settings.eval_batches)]
    got: dict[str, list[dict[str, float]]] = {k: [] for k in loops}
    for r in range(rounds + 1):  # the first round warms up
        for key in (list(loops) if r % 2 else list(loops)[::-1]):
            x, y = trainer._batch(trainer.train_ids, gen)
            start = time.perf_counter()
            loops[key].draw()
            drawn = 1e3 * (time.perf_counter() - start)
            loops[key].attention.take()
            times = {"data, a batch": drawn, **loops[key].step(x, y)}
            attention = loops[key].attention.take()  # the step's forward only
            start = time.perf_counter()
            loops[key].evaluate(evals, settings.sample_tokens)
            times["evaluation, a step's share"] = \
                1e3 * (time.perf_counter() - start) / settings.eval_every
            loops[key].attention.take()
            if r:
                got[key].append({**times, WITHIN: attention})
    head_losses.release()
    print(f"{name}, batch {batch}, context {trainer.cfg.context_length}: ms a step, medians "
          f"of {rounds} (an evaluation every {settings.eval_every} steps)")
    print(f"  {'':28s}" + "".join(f"{k:>20s}" for k in loops))
    totals = {k: [sum(t[p] for p in PARTS) for t in got[k]] for k in loops}
    for part in PARTS + (WITHIN,):
        print(f"  {part:28s}" + "".join(
            f"{statistics.median(t[part] for t in got[k]):20.1f}" for k in loops))
    print(f"  {'total':28s}" + "".join(f"{statistics.median(totals[k]):20.1f}" for k in loops))
    book = statistics.median(totals["book"])
    for k in list(loops)[1:]:
        print(f"  book / {k}: {book / statistics.median(totals[k]):.2f}x")
    cfg = trainer.cfg
    for dtype in (torch.float32, torch.bfloat16):
        ms = head_products(batch * cfg.context_length, cfg.emb_dim, cfg.vocab_size, dtype,
                           max(3, rounds))
        print(f"  the head's three products alone, {str(dtype)[6:]}: {ms:.1f} ms; the book's "
              f"step over them: {book / ms:.2f}x")
