"""Decode speed: our generate_stream vs transformers' GPT2LMHeadModel.generate, greedy
with a KV cache, on identical random gpt2-small weights, fp32, CPU, in one run.

Also prints the memory-bandwidth bound: the time of one matrix-vector pass over every
weight matrix of the model (what one decode step must at least read).

    python benchmarks/bench_generate.py [--new-tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line, twin_models  # noqa: E402
from explorer.core.generation import GenerationSettings, generate_stream  # noqa: E402
from explorer.core.tokenizer import encode  # noqa: E402


def ours_tok_s(model, prompt, n):
    stream = generate_stream(model, prompt, GenerationSettings(max_new_tokens=n, stop_at_eot=False))
    steps = list(stream)
    decode_s = steps[-1].elapsed - stream.prompt_seconds
    return (n - 1) / decode_s, [s.token_id for s in steps]


def hf_tok_s(model, prompt, n):
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, pad_token_id=0)
        t1 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
        t2 = time.perf_counter()
    # Subtract the prompt pass (measured by the one-token call) as for ours.
    return (n - 1) / ((t2 - t1) - (t1 - t0)), out[0, len(prompt):].tolist()


def matvec_bound_tok_s(model, repeats=5):
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    x = {w.shape[1]: torch.randn(1, w.shape[1]) for w in weights}
    with torch.inference_mode():
        for w in weights:
            F.linear(x[w.shape[1]], w)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for w in weights:
                F.linear(x[w.shape[1]], w)
            times.append(time.perf_counter() - t0)
    return 1.0 / min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine_line()}")
    hf, ours = twin_models()
    prompt = encode("Every effort moves you")
    ours_tok_s(ours, prompt, 8)  # warm-up
    hf_tok_s(hf, prompt, 8)
    ours_runs, hf_runs = [], []
    for _ in range(args.repeats):  # interleaved, so both see the same machine load
        rate, ours_ids = ours_tok_s(ours, prompt, args.new_tokens)
        ours_runs.append(rate)
        rate, hf_ids = hf_tok_s(hf, prompt, args.new_tokens)
        hf_runs.append(rate)
    same = ours_ids == hf_ids
    bound = matvec_bound_tok_s(ours)
    o, h = statistics.median(ours_runs), statistics.median(hf_runs)
    print(f"gpt2-small fp32 greedy, {args.new_tokens} new tokens, median of {args.repeats}:")
    print(f"  explorer generate_stream     {o:7.1f} tok/s")
    print(f"  transformers generate        {h:7.1f} tok/s")
    print(f"  matrix-vector bound          {bound:7.1f} tok/s  (one pass over all weights)")
    print(f"  ratio explorer / transformers  {o / h:.2f}x")
    print(f"  ratio explorer / bound         {o / bound:.2f}")
    print(f"  same greedy tokens as transformers: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
