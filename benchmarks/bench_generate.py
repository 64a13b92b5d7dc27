"""Decode speed: our generate_stream vs transformers' generate, greedy with a KV cache, on
identical random weights, fp32, CPU, in one run; ours both plain and with per-token
capture of every node (what the app runs). gpt2-small against GPT2LMHeadModel by default;
``--preset smollm2-135m`` (a Llama-family block shaped like SmolLM2-135M) against
LlamaForCausalLM; ``qwen3-0.6b`` against Qwen3ForCausalLM, ``gemma3-270m`` against
Gemma3ForCausalLM, an OLMo preset against Olmo2ForCausalLM.

Also prints the memory-bandwidth bound: the time of one matrix-vector pass over every
weight matrix of the model (what one decode step must at least read), each matrix in
its faster layout (``bound_weights``), measured in every round, and the optional
bfloat16 mode's speed and largest logit difference from fp32.

    python benchmarks/bench_generate.py [--preset gpt2-small] [--new-tokens 64] [--repeats 5]
                                        [--threads N] [--device cuda] [--layers N]

Each round also decodes with bfloat16 weights (same tokens, interleaved with the rest).
On a CUDA GPU our decode runs over a static KV cache, each step a replayed CUDA graph
(core/run/graph_decode.py); ``--static off`` measures the growing cache's decode instead,
``--static on`` the static cache on any device.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line, twin_models  # noqa: E402
from explorer.core.run import graph_decode  # noqa: E402
from explorer.core.run.generation import GenerationSettings, generate_stream  # noqa: E402
from explorer.core.run.passes import step_pass  # noqa: E402
from explorer.core.gpt.tokenizer import encode  # noqa: E402


def ours_tok_s(model, prompt, n, capture=False, shown=False):
    """Decode speed; ``shown``: each step also made into the pass the app's views read
    (``step_pass``: every node's statistics at that position), as a window run does."""
    settings = GenerationSettings(max_new_tokens=n, stop_at_eot=False, capture_steps=capture)
    stream = generate_stream(model, prompt, settings)
    steps = []
    for step in stream:
        steps.append(step)
        if shown:
            step_pass(step, stream.ids)
    decode_s = steps[-1].elapsed - stream.prompt_seconds
    STEP_TIMES[capture, shown].append([b.elapsed - a.elapsed for a, b in zip(steps, steps[1:])])
    return (n - 1) / decode_s, [s.token_id for s in steps]


STEP_TIMES = {(c, s): [] for c in (False, True) for s in (False, True)}  # each run's step times


def step_lines(runs: list[list[float]], bounds: list[float]) -> list[str]:
    """Where a round's time went: each round's median step, its slowest tenth and its
    slowest step, against that round's matrix-vector pass; a round slow all through
    (the machine) reads differently from one slowed by a few steps (a stall)."""
    lines = []
    for r, (times, bound) in enumerate(zip(runs, bounds), 1):
        ms = sorted(1000 * t for t in times)
        lines.append(f"    round {r}: {1000 / bound:5.1f} ms bound pass; steps median "
                     f"{statistics.median(ms):5.1f} ms, 90th percentile {ms[int(0.9 * len(ms))]:5.1f} ms, "
                     f"slowest {ms[-1]:5.1f} ms; {len(ms) / sum(ms) * 1000 / bound:.2f} of the bound")
    return lines


def hf_tok_s(model, prompt, n):
    ids = torch.tensor([prompt], device=next(model.parameters()).device)
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, pad_token_id=0)
        t1 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
        t2 = time.perf_counter()
    # Subtract the prompt pass (measured by the one-token call) as for ours.
    return (n - 1) / ((t2 - t1) - (t1 - t0)), out[0, len(prompt):].tolist()


def bound_weights(model) -> list[torch.Tensor]:
    """Every weight matrix of the model (the query, key and value projections as one
    matrix), each in the faster of its row-major and column-major layouts on this
    machine: timed inside whole passes over them all, so that none sits in a cache."""
    mats = []
    for block in model.trf_blocks:
        att = block.att
        ff = [m.weight for m in block.ff.modules() if isinstance(m, torch.nn.Linear)]
        mats += [torch.cat([att.W_query.weight, att.W_key.weight, att.W_value.weight]),
                 att.out_proj.weight, *ff]
    mats.append(model.out_head.weight)
    layouts = ([w.detach().contiguous() for w in mats],
               [w.detach().t().contiguous().t() for w in mats])
    seconds = [[0.0] * len(mats), [0.0] * len(mats)]
    x = {w.shape[1]: torch.randn(1, w.shape[1], device=w.device) for w in mats}
    sync = torch.cuda.synchronize if mats[0].is_cuda else (lambda: None)
    with torch.inference_mode():
        for r in range(4):  # the first pass warms up
            for layout, spent in zip(layouts, seconds):
                for i, w in enumerate(layout):
                    sync()
                    t0 = time.perf_counter()
                    F.linear(x[w.shape[1]], w)
                    sync()
                    spent[i] += (time.perf_counter() - t0) if r else 0.0
    return [row if a <= b else col
            for row, col, a, b in zip(layouts[0], layouts[1], seconds[0], seconds[1])]


def matvec_bound_tok_s(weights, repeats=3):
    """What one decode step must at least read, read as fast as this machine's kernels
    read it: the best of ``repeats`` passes of one matrix-vector product over every
    weight matrix (``bound_weights``), in tokens per second."""
    x = {w.shape[1]: torch.randn(1, w.shape[1], device=w.device) for w in weights}
    sync = torch.cuda.synchronize if weights[0].is_cuda else (lambda: None)
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            for w in weights:
                F.linear(x[w.shape[1]], w)
            sync()
            times.append(time.perf_counter() - t0)
    return 1.0 / min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt2-small",
                    help="gpt2-small, or a preset of another family: smollm2-135m, "
                         "qwen3-0.6b, gemma3-270m, olmo2-1b")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--layers", type=int, default=None,
                    help="the preset's widths with this many blocks (two 1B models in fp32 "
                         "need some 20 GB)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, mps")
    ap.add_argument("--static", choices=("auto", "on", "off"), default="auto",
                    help="decode over a static KV cache (auto: on a CUDA GPU, as CUDA graphs)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.static != "auto":
        os.environ[graph_decode.SWITCH] = "1" if args.static == "on" else "0"
    print(f"machine: {machine_line()} · device {args.device} · static cache {args.static}")
    hf, ours = twin_models(preset_name=args.preset,
                           **({"n_layers": args.layers} if args.layers else {}))
    device = torch.device(args.device)
    hf, ours = hf.to(device), ours.to(device)
    ours.tie_weights()
    bf16 = copy.deepcopy(ours).to(torch.bfloat16)
    bf16.tie_weights()
    prompt = encode("Every effort moves you")
    ours_tok_s(ours, prompt, 8)  # warm-up
    hf_tok_s(hf, prompt, 8)
    ours_tok_s(bf16, prompt, 8)
    fastest = bound_weights(ours)
    ours_runs, cap_runs, hf_runs, bf16_runs, shown_runs = [], [], [], [], []
    got = {}

    def run(name: str) -> None:
        if name == "ours":
            rate, got[name] = ours_tok_s(ours, prompt, args.new_tokens)
            ours_runs.append(rate)
        elif name == "capture":
            rate, got[name] = ours_tok_s(ours, prompt, args.new_tokens, capture=True)
            cap_runs.append(rate)
        elif name == "shown":
            rate, got[name] = ours_tok_s(ours, prompt, args.new_tokens, capture=True, shown=True)
            shown_runs.append(rate)
        elif name == "bound":
            bounds.append(matvec_bound_tok_s(fastest))
        elif name == "hf":
            rate, got[name] = hf_tok_s(hf, prompt, args.new_tokens)
            hf_runs.append(rate)
        else:
            bf16_runs.append(ours_tok_s(bf16, prompt, args.new_tokens)[0])

    bounds = []  # measured in every round: the machine's memory bandwidth varies too
    order = ["ours", "capture", "shown", "hf", "bf16", "bound"]
    for r in range(args.repeats):  # interleaved, so all see the same machine load
        for name in (order if r % 2 == 0 else order[::-1]):  # and alternating who goes first
            run(name)
    same = got["ours"] == got["hf"] == got["capture"] == got["shown"]
    bound = statistics.median(bounds)
    o, c, h = (statistics.median(r) for r in (ours_runs, cap_runs, hf_runs))
    # Ratios per round (each round's three runs saw the same machine load), then the median.
    plain_ratios = [a / b for a, b in zip(ours_runs, hf_runs)]
    cap_ratios = [a / b for a, b in zip(cap_runs, hf_runs)]
    plain_ratio, cap_ratio = statistics.median(plain_ratios), statistics.median(cap_ratios)
    bf16_rate = statistics.median(bf16_runs)
    bf16_ratio = statistics.median(a / b for a, b in zip(bf16_runs, ours_runs))
    ids = torch.tensor([prompt], device=device)
    with torch.inference_mode():
        diff = (bf16(ids).float() - ours(ids)).abs().max().item()
    blocks = f" ({args.layers} blocks)" if args.layers else ""
    print(f"{args.preset}{blocks} fp32 greedy, {args.new_tokens} new tokens, median of "
          f"{args.repeats}:")
    print(f"  explorer generate_stream            {o:7.1f} tok/s")
    print(f"  explorer, per-token capture on      {c:7.1f} tok/s")
    print(f"  the same, each step's statistics    {statistics.median(shown_runs):7.1f} tok/s"
          "  (step_pass, as a window run)")
    print(f"  transformers generate               {h:7.1f} tok/s")
    print(f"  matrix-vector bound                 {bound:7.1f} tok/s  (every weight read once, fastest "
          "layout; measured in every round)")
    print(f"  ratio explorer / transformers         {plain_ratio:.2f}x  worst {min(plain_ratios):.2f}x "
          "(median and worst of the rounds' ratios)")
    print(f"  ratio explorer+capture / transformers {cap_ratio:.2f}x  worst {min(cap_ratios):.2f}x "
          f"(budget {'1.0x on a CPU' if device.type == 'cpu' else '4x on a GPU'})")
    for label, runs, note in (("explorer / bound", ours_runs, ""),
                              ("explorer+capture / bound", cap_runs,
                               "  (target 0.8)" if device.type == "cpu" else "  (target 0.5)"),
                              ("with each step's statistics / bound", shown_runs, "")):
        ratios = [a / b for a, b in zip(runs, bounds)]  # each against its own round's bound
        print(f"  ratio {label:36s}{statistics.median(ratios):.2f}  worst {min(ratios):.2f}{note}")
    print("  per-token capture, round by round:")
    print("\n".join(step_lines(STEP_TIMES[True, False][-args.repeats:], bounds)))
    print(f"  same greedy tokens as transformers: {same}")
    print(f"bfloat16 weights: {bf16_rate:.1f} tok/s ({bf16_ratio:.2f}x fp32, median of the "
          f"rounds' ratios), max |logit - fp32 logit| = {diff:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
