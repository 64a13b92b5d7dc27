"""A mixture of experts beside its peer: a Qwen3-MoE-shaped random model's prompt pass,
ours plain and with every node captured (the app's pass), against transformers' own
Qwen3MoeForCausalLM on the same weights and tokens; and what capture costs on the
mixture against a dense Qwen3 block of the same active size (its feed-forward k experts
wide), so that the experts' cost is seen to be the routed ones' only.

    python benchmarks/bench_moe.py [--tokens 512] [--rounds 5] [--threads N]
                                   [--new-tokens 32]

Then decoding (greedy, a KV cache): our generate_stream plain and with per-token capture
of every node against transformers' generate, the same tokens asked of both
(``--new-tokens 0`` leaves it out). Rounds alternate the rows; the medians and the worst
round's ratios are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_generate import hf_tok_s, ours_tok_s  # noqa: E402
from benchmarks.common import machine_line  # noqa: E402
from explorer.core.gpt.build import build_model  # noqa: E402
from explorer.core.gpt.config import preset  # noqa: E402
from explorer.core.run.passes import Keep, run_prompt  # noqa: E402
from explorer.core.weights.checkpoints import load_checkpoint  # noqa: E402

SHAPE = dict(vocab_size=50257, context_length=2048, emb_dim=512, n_heads=8, n_kv_groups=4,
             head_size=64, n_layers=6)
EXPERTS, K, EXPERT_WIDTH = 32, 4, 256  # Qwen3-30B-A3B routes 8 of 128, 768 wide


def models():
    """transformers' Qwen3-MoE with random weights, ours opened from its folder, and a
    dense Qwen3 block of the same active size (ours, random)."""
    import transformers
    torch.manual_seed(0)
    theirs = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
        vocab_size=SHAPE["vocab_size"], hidden_size=SHAPE["emb_dim"], intermediate_size=1024,
        moe_intermediate_size=EXPERT_WIDTH, num_experts=EXPERTS, num_experts_per_tok=K,
        norm_topk_prob=True, num_attention_heads=SHAPE["n_heads"],
        num_key_value_heads=SHAPE["n_kv_groups"], head_dim=SHAPE["head_size"],
        num_hidden_layers=SHAPE["n_layers"], max_position_embeddings=SHAPE["context_length"],
        decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False)).eval()
    with torch.no_grad():
        for layer in theirs.model.layers:
            layer.mlp.gate.weight.normal_(0, 0.5)  # routes apart, as a trained router does
    with tempfile.TemporaryDirectory() as tmp:
        theirs.save_pretrained(tmp)
        ours = load_checkpoint(tmp).model
    dense = build_model(preset("qwen3-tiny", **SHAPE, ff_dim=K * EXPERT_WIDTH, tie_weights=False),
                        seed=0).eval()
    return theirs, ours, dense


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine_line())
    theirs, ours, dense = models()
    ids = torch.randint(0, 50257, (1, args.tokens),
                        generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        gap = (ours(ids) - theirs(ids).logits).abs().max().item()
    print(f"Qwen3-MoE shape: {SHAPE['n_layers']} blocks, {SHAPE['emb_dim']} wide, {EXPERTS} "
          f"experts of {EXPERT_WIDTH}, {K} a token; T = {args.tokens}; max |logit gap| {gap:.2g}")

    def plain(model):
        with torch.inference_mode():
            model(ids)

    def theirs_pass():
        with torch.inference_mode():
            theirs(ids)

    rows = {"transformers' forward": theirs_pass, "our forward": lambda: plain(ours),
            "our pass, every node captured": lambda: run_prompt(ours, ids[0].tolist(), Keep()),
            "dense forward (same active size)": lambda: plain(dense),
            "dense pass, every node captured": lambda: run_prompt(dense, ids[0].tolist(), Keep())}
    for fn in rows.values():  # warm-up
        fn()
    seconds = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            seconds[name].append(timed(fn))
    for name, values in seconds.items():
        print(f"{name:36s} median {statistics.median(values) * 1e3:8.1f} ms  "
              f"worst {max(values) * 1e3:8.1f} ms")
    ratios = {
        "our forward / transformers'": ("our forward", "transformers' forward"),
        "our captured pass / transformers' forward": ("our pass, every node captured",
                                                      "transformers' forward"),
        "capture's cost on the mixture (pass / forward)": ("our pass, every node captured",
                                                           "our forward"),
        "capture's cost on the dense block (pass / forward)": ("dense pass, every node captured",
                                                               "dense forward (same active size)"),
    }
    for label, (a, b) in ratios.items():
        each = [x / y for x, y in zip(seconds[a], seconds[b])]
        print(f"{label:52s} {statistics.median(each):.2f}x  worst {max(each):.2f}x")
    return decode(theirs, ours, args) if args.new_tokens else 0


def decode(theirs, ours, args) -> int:
    """Tokens a second decoding: ours plain and with per-token capture against
    transformers' generate, round after round, alternating who goes first."""
    prompt = list(range(1000, 1016))
    ours_tok_s(ours, prompt, 4)  # warm-up
    hf_tok_s(theirs, prompt, 4)
    rates, tokens = {"ours": [], "capture": [], "transformers": []}, {}
    runs = {"ours": lambda: ours_tok_s(ours, prompt, args.new_tokens),
            "capture": lambda: ours_tok_s(ours, prompt, args.new_tokens, capture=True),
            "transformers": lambda: hf_tok_s(theirs, prompt, args.new_tokens)}
    for r in range(args.rounds):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            rate, tokens[name] = runs[name]()
            rates[name].append(rate)
    print(f"decoding {args.new_tokens} tokens after {len(prompt)}, greedy, a KV cache:")
    for name, values in rates.items():
        print(f"  {name:14s} median {statistics.median(values):7.1f} tok/s  worst {min(values):7.1f}")
    for name in ("ours", "capture"):
        each = [a / b for a, b in zip(rates[name], rates["transformers"])]
        print(f"  {name} / transformers' generate {statistics.median(each):.2f}x  "
              f"worst {min(each):.2f}x")
    same = tokens["ours"] == tokens["capture"] == tokens["transformers"]
    print(f"  same greedy tokens as transformers: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
