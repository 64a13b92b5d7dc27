"""The activation patching sweep: exact at its ends, 0 with nothing to restore."""

import numpy as np
import pytest

from explorer.core.base.cancel import Cancelled
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.experiments.patching import patch_keys, patch_sweep
from explorer.core.gpt.tokenizer import encode

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny", n_layers=3), seed=9)


def no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_the_last_blocks_output_at_the_last_position_restores_everything(model):
    sweep = patch_sweep(model, CLEAN, CORRUPT, " Mary", " John")
    assert sweep.restored.shape == (len(patch_keys("pre")), 3, 1)
    assert sweep.clean_diff != sweep.corrupt_diff
    last = sweep.keys.index("add2")
    assert sweep.restored[last, 2, 0] == pytest.approx(1.0, abs=1e-5)
    # the last position's residual before block 0 is the same token in both prompts (" to"):
    # patching block 0's first norm there changes nothing
    assert sweep.restored[sweep.keys.index("norm1"), 0, 0] == pytest.approx(0.0, abs=1e-6)
    assert sweep.best()[3] == pytest.approx(sweep.restored.max())
    assert no_hooks(model)


def test_every_position_and_the_csv(model, tmp_path):
    sweep = patch_sweep(model, CLEAN, CORRUPT, " Mary", " John", positions="all")
    t = sweep.restored.shape[2]
    assert t == len(sweep.positions) == 14
    # the prompts differ at one position (John/Mary after "store,"): patching block 0's
    # input there (norm1's input is the embedding) moves the most; elsewhere, nothing
    a, b = encode(CLEAN), encode(CORRUPT)
    where = [p for p in range(t) if a[p] != b[p]]
    assert len(where) == 1
    differ = [p for p in range(t) if p not in where]
    np.testing.assert_allclose(sweep.restored[sweep.keys.index("norm1"), 0, differ], 0, atol=1e-6)
    assert sweep.restored[sweep.keys.index("norm1"), 0, where[0]] != 0
    sweep.write_csv(tmp_path / "s.csv")
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0] == "node,layer,position,restored" and len(lines) == 1 + sweep.restored.size


def test_identical_prompts_restore_exactly_zero_and_say_why(model):
    sweep = patch_sweep(model, CLEAN, CLEAN, " Mary", " John", positions="all")
    assert np.all(sweep.restored == 0) and np.isfinite(sweep.restored).all()
    assert "nothing to restore" in sweep.note


def test_bad_pairs_are_refused_and_a_stop_leaves_no_hook(model):
    with pytest.raises(ValueError, match="same length"):
        patch_sweep(model, CLEAN, "When Mary went", " Mary", " John")
    with pytest.raises(ValueError, match="must be one token"):
        patch_sweep(model, CLEAN, CORRUPT, " Mary Ann", " John")
    with pytest.raises(ValueError, match="same token"):
        patch_sweep(model, CLEAN, CORRUPT, " Mary", " Mary")
    calls = []
    with pytest.raises(Cancelled):
        patch_sweep(model, CLEAN, CORRUPT, " Mary", " John", should_stop=lambda: len(calls) > 3,
                    progress=lambda d, t: calls.append(d))
    assert no_hooks(model)


def test_a_gap_within_noise_says_so_and_a_real_one_does_not():
    """A random model's clean and corrupted logit differences lie 0.002 apart: the shares
    divide by that and the sweep says they are noise. The same model with its logits
    scaled by 1000 (the final norm's scale; shift and bias are 0) has a real gap, the
    same shares, and no such note."""
    import torch
    from explorer.core.experiments.patching import NOISE_GAP
    small = build_model(preset("tiny", n_layers=3), seed=9)
    noisy = patch_sweep(small, CLEAN, CORRUPT, " Mary", " John")
    assert 0 < abs(noisy.clean_diff - noisy.corrupt_diff) < NOISE_GAP
    assert "noise" in noisy.note and f"under {NOISE_GAP:g}" in noisy.note
    with torch.no_grad():
        small.final_norm.scale.mul_(1000.0)
    real = patch_sweep(small, CLEAN, CORRUPT, " Mary", " John")
    assert abs(real.clean_diff - real.corrupt_diff) > NOISE_GAP and real.note == ""
    np.testing.assert_allclose(real.restored, noisy.restored, atol=1e-3)
