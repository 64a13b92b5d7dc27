"""Training speed: the book's loop against the explorer's trainer, side by side; and what
snapshots cost a run that the explorer follows.

The book's ``train_model_simple`` (chapter 5) — its GPTModel (tests/book_model.py), its
sliding-window dataset and DataLoader (stride = context), AdamW, an evaluation of
``eval_iter`` batches of both loaders every ``eval_freq`` steps and a sample — against
``explorer.core.experiments.training.Trainer`` on the same config, text, batch size and
context, for the same number of optimizer steps, each round alternating which runs first.
Tokens per second: training tokens over the whole run's wall time, evaluations and samples
included. Rows (``--rows``, any of):

- ``same``: both on the explorer's schedule (4 batches of each split and a 20-token
  sample before the first step, every 25 steps and after the last): the ratio measures
  training alone;
- ``float32``: the same, the explorer in float32 (no bfloat16 autocast);
- ``own``: each on its own schedule (the book: 5 batches every 5 steps and a 50-token
  sample after every epoch);
- ``parts``: where a step's time goes in each loop, part by part, and the head's
  products alone (``benchmarks/train_parts.py``);
- ``snapshots``: the explorer training in a child process as the window runs it, with
  snapshots off, and on with a follower that loads each one and runs the prompt on it,
  every node captured, as Follow training does: their cost in training time.

    python benchmarks/bench_train.py [--rows same,float32,own,parts,snapshots] [--rounds 5]
                                     [--preset mini] [--steps 40] [--threads N]
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line  # noqa: E402
from benchmarks.train_parts import run_parts  # noqa: E402
from explorer.core.experiments.training import Trainer, TrainSettings, default_text  # noqa: E402
from explorer.core.gpt.config import preset  # noqa: E402
from explorer.core.gpt.tokenizer import decode, encode  # noqa: E402
from tests import book_model  # noqa: E402
from tests.book_model import GPTDatasetV1  # noqa: E402


# ------------------------------------------------------------------ the book's code

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


def generate_and_print_sample(model, device, start_context, context_size, tokens=50):
    model.eval()
    encoded = torch.tensor(encode(start_context)).unsqueeze(0).to(device)
    with torch.no_grad():
        token_ids = book_model.generate_text_simple(model, encoded, tokens, context_size)
    model.train()
    return decode(token_ids[0].tolist())


def train_model_simple(model, train_loader, val_loader, optimizer, device, max_steps,
                       eval_freq, eval_iter, start_context, context_size, sample_at_eval=0):
    """The book's loop, stopped after ``max_steps`` optimizer steps (it counts epochs).
    ``sample_at_eval``: the explorer's schedule instead of the book's — an evaluation and
    a sample of that many tokens before the first step, after every ``eval_freq`` steps
    and after the last (the book: after steps 1, 1 + eval_freq, … and a 50-token sample
    after each epoch)."""
    def evaluate_and_sample():
        evaluate_model(model, train_loader, val_loader, device, eval_iter)
        generate_and_print_sample(model, device, start_context, context_size, sample_at_eval)

    tokens_seen, global_step = 0, -1
    if sample_at_eval:
        evaluate_and_sample()
    while global_step + 1 < max_steps:
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            done = global_step + 1
            if sample_at_eval:
                if done % eval_freq == 0 or done == max_steps:
                    evaluate_and_sample()
            elif global_step % eval_freq == 0:
                evaluate_model(model, train_loader, val_loader, device, eval_iter)
            if done >= max_steps:
                break
        if not sample_at_eval:
            generate_and_print_sample(model, device, start_context, context_size)
    return tokens_seen


# ------------------------------------------------------------------ the comparison

def book_run(cfg, text: str, steps: int, batch: int, eval_freq: int, eval_iter: int,
             sample_at_eval: int = 0) -> float:
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
                                "Every effort moves you", cfg.context_length, sample_at_eval)
    return tokens / (time.perf_counter() - start)


def settings_for(name: str, steps: int, batch: int, **more) -> TrainSettings:
    return TrainSettings(preset=name, max_steps=steps, batch_size=batch,
                         warmup_steps=min(20, steps // 4), **more)


def explorer_run(name: str, text: str, steps: int, batch: int, precision: str) -> float:
    trainer = Trainer(text, settings_for(name, steps, batch, precision=precision))
    start = time.perf_counter()
    for _ in trainer.run():
        pass
    return steps * batch * trainer.cfg.context_length / (time.perf_counter() - start)


WRITES: list[float] = []  # every snapshot's write, in seconds


def followed_run(name: str, steps: int, batch: int, snapshots: int, new_tokens: int) -> float:
    """Seconds of a training run in a child process (as the window runs it); with
    snapshots, a follower thread loads each one and runs the prompt on it, every node
    captured and ``new_tokens`` generated, as the window's engine does when it follows."""
    from explorer.core.base.devices import usable_cores
    from explorer.core.experiments.snapshots import SnapshotEvent
    from explorer.core.experiments.train_process import train_in_process
    from explorer.core.run.generation import GenerationSettings
    from explorer.core.run.passes import EVERYTHING, prompt_then_generate
    from explorer.core.sources import ModelSpec, open_model

    todo: queue.Queue = queue.Queue()
    prompt = encode("Every effort moves you")
    generation = GenerationSettings(max_new_tokens=new_tokens, stop_at_eot=False)

    def follow() -> None:
        while (path := todo.get()) is not None:
            loaded = open_model(ModelSpec(checkpoint=path))
            prompt_then_generate(loaded.model, prompt, generation, lambda p: None, keep=EVERYTHING)

    def report(event) -> None:
        if isinstance(event, SnapshotEvent):
            WRITES.append(event.seconds)  # the trainer's own time writing it
            todo.put(event.path)

    follower = threading.Thread(target=follow)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, usable_cores() - 1))  # the window's engine's choice
    follower.start()
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        try:
            train_in_process(None, settings_for(name, steps, batch, snapshots=snapshots), out, report)
        finally:
            todo.put(None)
            follower.join()  # the last snapshot's pass counts too
            torch.set_num_threads(threads)
        return time.perf_counter() - start


def summary(label: str, values: list[float], unit: str = "x", better: str = "max") -> str:
    worst = min(values) if better == "max" else max(values)
    return f"{label:58s} median {statistics.median(values):6.2f}{unit}  worst {worst:6.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="same,float32,own,snapshots",
                        help="which comparisons, comma-separated: same, float32, own, parts, snapshots")
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=TrainSettings().batch_size)
    parser.add_argument("--snapshots", type=int, default=TrainSettings().snapshots,
                        help="snapshots in the snapshots row (the window's default)")
    parser.add_argument("--new-tokens", type=int, default=16,
                        help="tokens the follower generates on each snapshot")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = set(rows) - {"same", "float32", "own", "parts", "snapshots"}
    if unknown:
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}")
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, text, ts = preset(args.preset), default_text(), TrainSettings()
    print(machine_line())
    if "parts" in rows:
        run_parts(args.preset, text, args.batch, args.rounds)
        rows.remove("parts")
        if not rows:
            return
    runs = {
        "book, explorer's schedule": lambda: book_run(cfg, text, args.steps, args.batch, ts.eval_every,
                                                      ts.eval_batches, ts.sample_tokens),
        "book, its own schedule": lambda: book_run(cfg, text, args.steps, args.batch, 5, 5),
        "explorer": lambda: explorer_run(args.preset, text, args.steps, args.batch, "auto"),
        "explorer float32": lambda: explorer_run(args.preset, text, args.steps, args.batch, "float32"),
        "snapshots off": lambda: followed_run(args.preset, args.steps, args.batch, 0, 0),
        "snapshots on, followed": lambda: followed_run(args.preset, args.steps, args.batch,
                                                       args.snapshots, args.new_tokens),
    }
    wanted = []
    if "same" in rows or "float32" in rows:
        wanted.append("book, explorer's schedule")
    if "same" in rows or "own" in rows:
        wanted.append("explorer")
    if "float32" in rows:
        wanted.append("explorer float32")
    if "own" in rows:
        wanted.append("book, its own schedule")
    if "snapshots" in rows:
        wanted += ["snapshots off", "snapshots on, followed"]
    got: dict[str, list[float]] = {name: [] for name in wanted}
    for r in range(args.rounds):
        order = wanted if r % 2 == 0 else wanted[::-1]
        for name in order:
            got[name].append(runs[name]())
        print(f"round {r + 1}: " + ", ".join(
            f"{name} {got[name][-1]:,.{1 if name.startswith('snap') else 0}f}"
            f"{' s' if name.startswith('snap') else ' tok/s'}" for name in wanted), flush=True)
    print(f"{args.preset}, {args.steps} steps, batch {args.batch}, context {cfg.context_length}, "
          f"{torch.get_num_threads()} torch threads, {args.rounds} rounds (median, worst):")
    for name in wanted:
        unit = " s" if name.startswith("snap") else " tok/s"
        print(summary(f"  {name}", got[name], unit, "min" if unit == " s" else "max"))

    def ratio(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(got[a], got[b])]

    if "same" in rows:
        print(summary("  explorer / book, same schedule (target 2x)",
                      ratio("explorer", "book, explorer's schedule")))
    if "float32" in rows:
        print(summary("  explorer float32 / book, same schedule (target 1.3x)",
                      ratio("explorer float32", "book, explorer's schedule")))
    if "own" in rows:
        print(summary("  explorer / book, each on its own schedule",
                      ratio("explorer", "book, its own schedule")))
    if "snapshots" in rows:
        cost = [100 * (on / off - 1) for on, off in zip(got["snapshots on, followed"],
                                                        got["snapshots off"])]
        print(summary(f"  {args.snapshots} snapshots followed: extra training time "
                      "(target 10 %)", cost, " %", "min"))
        per_run = len(WRITES) / args.rounds
        print(f"  each snapshot written in {statistics.median(WRITES):.2f} s (median of "
              f"{len(WRITES)}), {per_run:.0f} a run")


if __name__ == "__main__":
    main()
