"""Training speed: the book's loop against the explorer's trainer, side by side.

The book's ``train_model_simple`` (chapter 5) — its GPTModel (tests/book_model.py), its
sliding-window dataset and DataLoader (stride = context), AdamW, an evaluation of
``eval_iter`` batches of both loaders every ``eval_freq`` steps and a sample at the end —
against ``explorer.core.experiments.training.Trainer`` on the same config, text, batch
size and context, for the same number of optimizer steps, round after round
(alternating which runs first). Reports tokens per second (training tokens over the whole
run's wall time, evaluations and samples included) and the ratio, median and worst.

    python benchmarks/bench_train.py [--preset mini] [--steps 40] [--rounds 3]
                                     [--eval-freq 5] [--eval-iter 5] [--threads N]
                                     [--precision auto|float32|bfloat16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line  # noqa: E402
from explorer.core.experiments.training import Trainer, TrainSettings, default_text  # noqa: E402
from explorer.core.gpt.config import preset  # noqa: E402
from explorer.core.gpt.tokenizer import decode, encode  # noqa: E402
from tests import book_model  # noqa: E402


# ------------------------------------------------------------------ the book's code

class GPTDatasetV1(Dataset):
    def __init__(self, ids, max_length, stride):
        self.input_ids, self.target_ids = [], []
        for i in range(0, len(ids) - max_length, stride):
            self.input_ids.append(torch.tensor(ids[i:i + max_length]))
            self.target_ids.append(torch.tensor(ids[i + 1:i + max_length + 1]))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


def calc_loss_batch(input_batch, target_batch, model, device):
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    logits = model(input_batch)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())


def calc_loss_loader(data_loader, model, device, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    num_batches = len(data_loader) if num_batches is None else min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            total_loss += calc_loss_batch(input_batch, target_batch, model, device).item()
        else:
            break
    return total_loss / num_batches


def evaluate_model(model, train_loader, val_loader, device, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def generate_and_print_sample(model, device, start_context, context_size):
    model.eval()
    encoded = torch.tensor(encode(start_context)).unsqueeze(0).to(device)
    with torch.no_grad():
        token_ids = book_model.generate_text_simple(model, encoded, 50, context_size)
    model.train()
    return decode(token_ids[0].tolist())


def train_model_simple(model, train_loader, val_loader, optimizer, device, max_steps,
                       eval_freq, eval_iter, start_context, context_size):
    """The book's loop, stopped after ``max_steps`` optimizer steps (it counts epochs)."""
    tokens_seen, global_step = 0, -1
    while global_step + 1 < max_steps:
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if global_step % eval_freq == 0:
                evaluate_model(model, train_loader, val_loader, device, eval_iter)
            if global_step + 1 >= max_steps:
                break
        generate_and_print_sample(model, device, start_context, context_size)
    return tokens_seen


# ------------------------------------------------------------------ the comparison

def book_run(cfg, text: str, steps: int, batch: int, eval_freq: int, eval_iter: int) -> float:
    torch.manual_seed(123)
    model = book_model.GPTModel({"vocab_size": cfg.vocab_size, "context_length": cfg.context_length,
                                 "emb_dim": cfg.emb_dim, "n_heads": cfg.n_heads,
                                 "n_layers": cfg.n_layers, "drop_rate": 0.1, "qkv_bias": False})
    cut = int(0.9 * len(text))
    loaders = [DataLoader(GPTDatasetV1(encode(part), cfg.context_length, cfg.context_length),
                          batch_size=batch, shuffle=shuffle, drop_last=shuffle, num_workers=0)
               for part, shuffle in ((text[:cut], True), (text[cut:], False))]
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.1)
    start = time.perf_counter()
    tokens = train_model_simple(model, *loaders, optimizer, "cpu", steps, eval_freq, eval_iter,
                                "Every effort moves you", cfg.context_length)
    return tokens / (time.perf_counter() - start)


def explorer_run(name: str, text: str, steps: int, batch: int, precision: str) -> float:
    settings = TrainSettings(preset=name, max_steps=steps, batch_size=batch,
                             warmup_steps=min(20, steps // 4), precision=precision)
    trainer = Trainer(text, settings)
    start = time.perf_counter()
    for _ in trainer.run():
        pass
    return steps * batch * trainer.cfg.context_length / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=TrainSettings().batch_size)
    parser.add_argument("--eval-freq", type=int, default=5, help="the book's eval_freq")
    parser.add_argument("--eval-iter", type=int, default=5, help="the book's eval_iter")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--precision", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="the explorer's precision (auto: bfloat16 where native)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, text = preset(args.preset), default_text()
    print(machine_line())
    ratios, book_rates, ours_rates = [], [], []
    for r in range(args.rounds):
        runs = [("book", lambda: book_run(cfg, text, args.steps, args.batch, args.eval_freq,
                                          args.eval_iter)),
                ("explorer", lambda: explorer_run(args.preset, text, args.steps, args.batch,
                                              args.precision))]
        if r % 2:
            runs.reverse()
        rates = {name: fn() for name, fn in runs}
        book_rates.append(rates["book"])
        ours_rates.append(rates["explorer"])
        ratios.append(rates["explorer"] / rates["book"])
        print(f"round {r + 1}: book {rates['book']:,.0f} tok/s, explorer {rates['explorer']:,.0f} "
              f"tok/s, ratio {ratios[-1]:.2f}x", flush=True)
    print(f"{args.preset}, {args.steps} steps, batch {args.batch}, context {cfg.context_length}; "
          f"the book evaluates {args.eval_iter} batches every {args.eval_freq} steps, the "
          f"explorer {TrainSettings().eval_batches} every {TrainSettings().eval_every}, "
          f"precision {args.precision}:")
    print(f"  book's train_model_simple  median {statistics.median(book_rates):,.0f} tok/s")
    print(f"  explorer Trainer           median {statistics.median(ours_rates):,.0f} tok/s")
    print(f"  ratio explorer / book      median {statistics.median(ratios):.2f}x  worst "
          f"{min(ratios):.2f}x  (target 1.5x)")


if __name__ == "__main__":
    main()
