"""The training profile's loops do the work they are named for: the book's step, called
module by module, gives the book's GPTModel's loss; each loop's step times every part
(the hook that splits the backward fires) and moves the weights."""

import torch
import torch.nn.functional as F

from benchmarks.train_parts import PARTS, BookSteps, ExplorerSteps
from explorer.core.experiments.head_loss import loss_of
from explorer.core.experiments.training import Trainer, TrainSettings, default_text


def _trainer():
    torch.manual_seed(0)
    return Trainer(default_text(), TrainSettings(preset="mini", batch_size=2, precision="float32"))


def test_the_books_step_module_by_module_is_its_forward():
    trainer = _trainer()
    book = BookSteps(trainer)
    x, y = trainer._batch(trainer.train_ids, torch.Generator().manual_seed(1))
    book.model.eval()  # no dropout: the same numbers both ways
    with torch.no_grad():
        whole = F.cross_entropy(book.model(x).flatten(0, 1), y.flatten())
        parts = book._loss(book._hidden(x), y)
    assert x.shape == (2, trainer.cfg.context_length)
    assert torch.equal(whole, parts)
    before = book.model.out_head.weight.detach().clone()
    book.attention.take()
    times = book.step(x, y)
    assert set(times) == set(PARTS[1:-1])  # the data and the evaluation timed apart
    assert 0 < book.attention.take() < times["blocks, forward"]
    assert not torch.equal(before, book.model.out_head.weight)
    drawn = [book.draw() for _ in range(len(book.loader) + 1)]  # past an epoch: a new one
    assert all(bx.shape == by.shape == x.shape and torch.equal(bx[:, 1:], by[:, :-1])
               for bx, by in drawn)


def test_the_explorers_step_times_every_part_and_trains():
    trainer = _trainer()
    x, y = trainer._batch(trainer.train_ids, torch.Generator().manual_seed(1))
    trainer.model.eval()
    with torch.no_grad():
        before = loss_of(trainer.model, x, y).item()
    steps = ExplorerSteps(trainer, bfloat16=False)
    for _ in range(3):
        times = steps.step(x, y)
        assert set(times) == set(PARTS[1:-1])
        assert all(ms >= 0 for ms in times.values())
        assert 0 < steps.attention.take() < times["blocks, forward"]
    bx, by = steps.draw()
    assert bx.shape == x.shape and torch.equal(bx[:, 1:], by[:, :-1])
    trainer.model.eval()
    with torch.no_grad():
        after = loss_of(trainer.model, x, y).item()
    assert after < before - 0.05  # three steps on one batch lower its loss
