"""Shared set-up for benchmarks: identical random weights in transformers and in the
explorer (gpt2-small, or a Llama-family preset), and a machine description line."""

from __future__ import annotations

import os
import platform
import tempfile
import time

import torch

from explorer.core.base.heap import reuse_freed_memory


# the math libraries' instruction-set limits: set, they make one CPU stand in for a
# plainer one (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: no AMX; MKL_ENABLE_INSTRUCTIONS=AVX2)
ISA_LIMITS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")


def cpu_name() -> str:
    """The CPU's model name as the system gives it ("" when it does not)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_line() -> str:
    """The machine, said as every benchmark starts (its CPU by name, and any limit on the
    instruction sets the math libraries use); and the process set up as ``gpt-explorer``
    sets up its own first (the C heap keeps freed blocks for reuse:
    ``heap.reuse_freed_memory``), so that what is measured is what the app runs."""
    reused = reuse_freed_memory()
    limits = [f"{k}={os.environ[k]}" for k in ISA_LIMITS if os.environ.get(k)]
    return (f"{platform.node()} · {cpu_name() or platform.machine()} · "
            f"{os.cpu_count()} cores · torch {torch.__version__} · "
            f"{torch.get_num_threads()} threads" + (" · freed memory reused" if reused else "")
            + "".join(f" · {limit}" for limit in limits))


def _newer_twin(transformers, cfg):
    """transformers' Gemma 3 (text) or OLMo 2 model of ``cfg``'s shapes, random weights."""
    from explorer.core.gpt.families.gemma3 import GEMMA3
    from explorer.core.weights.llama_keys import LayerType
    kinds = [str(LayerType.SLIDING if i in cfg.sliding_layers else LayerType.FULL)
             for i in range(cfg.n_layers)]
    common = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.emb_dim,
                  intermediate_size=cfg.hidden_dim, num_hidden_layers=cfg.n_layers,
                  num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.kv_heads,
                  max_position_embeddings=cfg.context_length, rms_norm_eps=cfg.norm_eps,
                  tie_word_embeddings=cfg.tie_weights)
    if cfg.family is GEMMA3:
        config = transformers.Gemma3TextConfig(
            **common, head_dim=cfg.head_dim, query_pre_attn_scalar=cfg.attn_scalar,
            sliding_window=cfg.sliding_window, layer_types=kinds, rope_theta=cfg.rope_base,
            rope_local_base_freq=cfg.rope_local_base)
        return transformers.Gemma3ForCausalLM(config).eval()
    return transformers.Olmo2ForCausalLM(transformers.Olmo2Config(
        **common, rope_theta=cfg.rope_base)).eval()


def twin_models(seed: int = 0, preset_name: str = "gpt2-small", **overrides):
    """transformers' model with random weights (GPT2LMHeadModel; LlamaForCausalLM or
    Qwen3ForCausalLM for a Llama-family preset; Gemma3ForCausalLM, Olmo2ForCausalLM) and
    ours loaded from the same weights through our checkpoint loader, as a user opens a
    folder (both fp32, eval, CPU); ``overrides``: the preset's fields replaced (e.g.
    ``n_layers``: a model of the preset's widths, fewer blocks)."""
    import transformers

    from explorer.core.weights.checkpoints import load_checkpoint
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.families.gemma3 import GEMMA3
    from explorer.core.gpt.families.llama import LLAMA
    from explorer.core.gpt.families.olmo import OLMO

    cfg = preset(preset_name, **overrides)
    torch.manual_seed(seed)
    if cfg.family in (GEMMA3, OLMO):
        hf = _newer_twin(transformers, cfg)
    elif cfg.family is LLAMA:
        kind = "Qwen3" if cfg.qk_norm else "Llama"  # Qwen3: the q/k norms
        hf = getattr(transformers, f"{kind}ForCausalLM")(getattr(transformers, f"{kind}Config")(
            vocab_size=cfg.vocab_size, hidden_size=cfg.emb_dim, intermediate_size=cfg.hidden_dim,
            num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_dim,
            max_position_embeddings=cfg.context_length, rms_norm_eps=cfg.norm_eps,
            rope_theta=cfg.rope_base, tie_word_embeddings=cfg.tie_weights)).eval()
    else:
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_embd=cfg.emb_dim, n_layer=cfg.n_layers, n_head=cfg.n_heads,
            n_positions=cfg.context_length, vocab_size=cfg.vocab_size)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = load_checkpoint(tmp).model
    return hf, ours


def compile_option(ap) -> None:
    """``--no-compile``: the statistics without their compiled kernels (core/run/fused.py),
    as on a machine without a C++ compiler."""
    ap.add_argument("--no-compile", action="store_true",
                    help="the statistics without their compiled kernels (core/run/fused.py)")


def compiled_statistics(no_compile: bool) -> None:
    """Make the statistics' compiled kernels first, as the window does once it is on
    screen (unless ``no_compile``), and say so."""
    from explorer.core.run import fused

    if no_compile:
        print("compiled statistics: off (--no-compile)")
        return
    start = time.perf_counter()
    made = fused.warm(force=True)
    print(f"compiled statistics: {'ready' if made else fused.error()} "
          f"({time.perf_counter() - start:.1f} s)")
