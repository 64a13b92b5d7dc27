"""A prompt's capture beside transformers, on any family: one pass over T tokens of a
preset's shapes, random weights written by transformers' own class (GPT2LMHeadModel,
LlamaForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, Olmo2ForCausalLM) and opened by
our loader, the same tokens through both, round after round (alternating who goes first):

- transformers' forward, plain; and with every layer's hidden states and attention
  weights returned (``output_hidden_states``, ``output_attentions``, eager attention:
  transformers' own way of showing what is inside);
- our forward, plain; our pass as the window runs it (``passes.window_keep`` for the
  first block and node: every node's tensor, the shown block's pattern, every node's
  moments in the pass, the details of what the first view shows); the same with every
  statistic then computed (``Pass.complete()``, as the window does before generating);
  every node's tensor and every block's pattern, each statistic when read and none read
  (what the peer returns, and more); every statistic computed in the pass, every block's
  pattern too.

    python benchmarks/bench_prompt.py [--preset smollm2-135m] [--tokens 512] [--rounds 3]
                                      [--layers N] [--threads N] [--no-compile]

Both sides run on the window's threads (every core but one for torch; the window's
statistics are computed ahead on the core left, ``cpu_work.spare_core()``) unless
``--threads`` says otherwise.

The compiled statistics (core/run/fused.py) are made first, as the window makes them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (compile_option, compiled_statistics, machine_line,  # noqa: E402
                               twin_models)
from explorer.core.base.cpu_work import spare_core  # noqa: E402
from explorer.core.base.devices import usable_cores  # noqa: E402
from explorer.core.gpt.nodes import FIRST_BLOCK_NODE, block_hook_name  # noqa: E402
from explorer.core.run.passes import Keep, run_prompt, window_keep  # noqa: E402


def rows_of(hf, ours, ids: torch.Tensor) -> dict:
    """Each row's pass, as a function to time."""
    tokens = ids[0].tolist()

    def theirs(inside: bool):
        def run():
            hf.set_attn_implementation("eager" if inside else "sdpa")
            with torch.inference_mode():
                hf(ids, output_hidden_states=inside, output_attentions=inside)
        return run

    def plain():
        with torch.inference_mode():
            ours(ids)

    window = window_keep(ours.cfg, 0, block_hook_name(0, FIRST_BLOCK_NODE), ahead=spare_core())
    return {"transformers' forward": theirs(False),
            "transformers, hidden states and attentions": theirs(True),
            "our forward": plain,
            "our pass as the window runs it": lambda: run_prompt(ours, tokens, window),
            "the same, every statistic then": lambda: run_prompt(ours, tokens, window).complete(),
            "every pattern, statistics when read": lambda: run_prompt(ours, tokens,
                                                                      Keep(on_read=True)),
            "every pattern, every statistic in the pass": lambda: run_prompt(ours, tokens, Keep())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=None, help="the preset's widths, N blocks")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch's threads on both sides (default: the window's choice, every "
                         "core but one, the statistics ahead on the one left)")
    compile_option(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads or max(1, usable_cores() - 1))
    print(f"machine: {machine_line()}")
    compiled_statistics(args.no_compile)
    hf, ours = twin_models(preset_name=args.preset,
                           **({"n_layers": args.layers} if args.layers else {}))
    ids = torch.randint(0, ours.cfg.vocab_size, (1, args.tokens),
                        generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        gap = (ours(ids) - hf(ids).logits).abs().max().item()
    rows = rows_of(hf, ours, ids)
    for run in rows.values():  # warm-up
        run()
    seconds = {name: [] for name in rows}
    for r in range(args.rounds):
        for name in (list(rows) if r % 2 == 0 else list(rows)[::-1]):
            start = time.perf_counter()
            rows[name]()
            seconds[name].append(time.perf_counter() - start)
    blocks = f", {args.layers} blocks" if args.layers else ""
    print(f"{args.preset}{blocks}, T = {args.tokens}, {torch.get_num_threads()} torch "
          f"thread(s), max |logit gap| {gap:.2g}; median / worst of {args.rounds} rounds, "
          f"ratios to transformers' forward with hidden states and attentions in the round:")
    peer = seconds["transformers, hidden states and attentions"]
    for name, values in seconds.items():
        ratios = [a / b for a, b in zip(values, peer)]
        print(f"  {name:44s} {statistics.median(values):7.3f} s   "
              f"{statistics.median(ratios):.2f}x / {max(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
