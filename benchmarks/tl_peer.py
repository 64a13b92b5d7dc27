"""The TransformerLens side of bench_capture.py's side-by-side rounds. Runs in its own
environment (TransformerLens 2.x needs other versions of transformers and datasets than
the explorer's tests): ``benchmarks/setup_transformerlens.sh`` makes ``.venv-tl``.

Reads one command per line on stdin — ``plain`` or ``cache`` — and answers each with the
seconds and the page faults it took (a plain forward, or ``run_with_cache`` keeping every
hook's tensor), on random gpt2-small-shaped weights, the same tokens as the explorer's
side.

    .venv-tl/bin/python benchmarks/tl_peer.py THREADS TOKENS
"""

import sys
import time
from importlib.metadata import version

import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig


def faults() -> int:
    """Page faults this process has taken so far (0 where the system does not say)."""
    try:
        import resource
    except ImportError:
        return 0
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_minflt + use.ru_majflt


def main() -> int:
    threads, tokens = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    cfg = HookedTransformerConfig(n_layers=12, d_model=768, n_ctx=1024, d_head=64, n_heads=12,
                                  d_mlp=3072, d_vocab=50257, act_fn="gelu_new",
                                  normalization_type="LN", seed=0, device="cpu")
    model = HookedTransformer(cfg).eval()
    ids = torch.randint(0, 50257, (1, tokens), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model(ids)  # warm-up
        _, cache = model.run_with_cache(ids)
        n, size = len(cache), sum(t.numel() * t.element_size() for t in cache.values())
        del cache
    print(f"ready: TransformerLens {version('transformer-lens')}, run_with_cache keeps {n} "
          f"tensors, {size / 2**20:,.0f} MiB", flush=True)
    for line in sys.stdin:
        with torch.inference_mode():
            before = faults()
            start = time.perf_counter()
            out = model.run_with_cache(ids) if line.strip() == "cache" else model(ids)
            seconds = time.perf_counter() - start
            faulted = faults() - before
            del out  # the cache is freed between rounds, not while timing
        print(f"{seconds:.6f} {faulted}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
