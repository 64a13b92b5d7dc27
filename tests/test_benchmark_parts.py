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
    times = book.step(x, y)
    assert set(times) == set(PARTS[:-1])
    assert not torch.equal(before, book.model.out_head.weight)


def test_the_explorers_step_times_every_part_and_trains():
    trainer = _trainer()
    x, y = trainer._batch(trainer.train_ids, torch.Generator().manual_seed(1))
    trainer.model.eval()
    with torch.no_grad():
        before = loss_of(trainer.model, x, y).item()
    for _ in range(3):
        times = ExplorerSteps(trainer, bfloat16=False).step(x, y)
        assert set(times) == set(PARTS[:-1])
        assert all(ms >= 0 for ms in times.values())
    trainer.model.eval()
    with torch.no_grad():
        after = loss_of(trainer.model, x, y).item()
    assert after < before - 0.05  # three steps on one batch lower its loss
