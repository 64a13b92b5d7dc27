"""Llama 3's rotary frequency scaling said wherever θ is shown, with the model's numbers:
the pairs it divides, keeps and blends counted here from the model's own θ."""

import torch

from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.nodes import Kind
from explorer.core.gpt.rope import rope_inverse_frequencies
from explorer.core.gpt.rope_scaling import RopeScaling
from explorer.core.lessons.compare_blocks import roles
from explorer.core.lessons.explain import numbers
from explorer.core.lessons.formulas import worked
from explorer.core.lessons.kinds import KIND_LESSONS
from explorer.core.run.passes import Keep, run_prompt

SCALED = preset("llama-tiny", head_size=64, emb_dim=128, n_heads=2, n_kv_groups=1,
                rope_base=500000.0, rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192))


def _counted(cfg) -> tuple[int, int, int]:
    """(kept, blended, divided) from the model's own θ against the unscaled rule."""
    plain = rope_inverse_frequencies(cfg.head_dim, cfg.rope_base).double()
    scaled = rope_inverse_frequencies(cfg.head_dim, cfg.rope_base, cfg.rope_scaling).double()
    kept = int(torch.isclose(scaled, plain, rtol=1e-6).sum())
    divided = int(torch.isclose(scaled, plain / cfg.rope_scaling.factor, rtol=1e-6).sum())
    return kept, len(plain) - kept - divided, divided


def test_every_place_that_shows_theta_says_llama3s_scaling_with_its_numbers():
    kept, blended, divided = _counted(SCALED)
    assert (kept, blended, divided) == SCALED.rope_scaling.pairs(SCALED.rope_base, 64)
    assert divided > 0 and kept > 0 and blended > 0
    words = (f"Llama 3's frequency scaling then divides θᵢ by 32 where the pair's wavelength "
             f"2π/θᵢ is over 8,192 positions ({divided} of the 32 pairs), keeps it under 2,048 "
             f"({kept}) and blends the {blended} between")
    assert words in KIND_LESSONS[Kind.ROPE].what.format(**numbers(SCALED))  # Explain
    model = build_model(SCALED, seed=0).eval()
    ids = [5, 6, 7, 8]
    views = run_prompt(model, ids, Keep(inside=True)).views
    rope = worked(model, "trf_blocks.0.att.queries_rope", views, ids, 3)
    assert rope.max_error <= 1e-5 and words in rope.lines[0]
    theta = model.trf_blocks[0].att.rope.inv_freq.double()
    assert f"θ₁ = {float(theta[1]):.4g}" in rope.lines[0]  # the scaled θ, said scaled
    positions = next(r for r in roles(model, model) if r.name == "positions")
    assert words in positions.ways[0]  # GPT-2 beside Llama's Roles
    plain = preset("llama-tiny")  # no scaling: no word of it
    assert "scaling" not in KIND_LESSONS[Kind.ROPE].what.format(**numbers(plain))
