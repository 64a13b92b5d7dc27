"""A Gemma 3 or OLMo 3 folder that lies — a sliding window of 0, of no number or past any
model's, layer types that do not name every layer, a norm of its placement missing from
one block — is refused in one line naming the folder and what is wrong: never a
traceback, never a model without the norm or with another window."""

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from explorer.core.base.errors import CheckpointError
from explorer.core.weights.checkpoints import load_checkpoint

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["gemma3", "olmo3"])
def saved(request, tmp_path_factory):
    from tests.llama_folder import write_tokenizer
    if request.param == "gemma3":
        from tests.core.gpt.test_gemma3 import hf_model
        model = hf_model("sliding-gqa-tied")
    else:
        from tests.core.gpt.test_olmo import hf_model
        model = hf_model("olmo3-sliding")
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    write_tokenizer(folder, 320)
    return request.param, folder


def _variant(saved, tmp_path, config=None, drop=()):
    _family, folder = saved
    for f in folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    hf = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, **(config or {})}))
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if not k.endswith(drop)},
              tmp_path / "model.safetensors", metadata={"format": "pt"})
    return tmp_path


def _refusal(folder) -> str:
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(folder)
    text = str(refused.value)
    assert text.startswith(f"{folder}: ") and "\n" not in text
    return text[len(f"{folder}: "):]


@pytest.mark.parametrize("window, said", [
    (0, "sliding_window in config.json must be at least 1, got 0"),
    (-1, "sliding_window in config.json must be at least 1, got -1"),
    (None, "sliding_window in config.json must be a whole number, got None"),
    (2.5, "sliding_window in config.json must be a whole number, got 2.5"),
    ("4", "sliding_window in config.json must be a whole number, got '4'"),
    (10**9, "invalid GPTConfig: sliding_window must be a whole number from 1 to 131,072, "
            "got 1000000000"),
])
def test_a_sliding_window_that_is_not_one_is_refused(saved, tmp_path, window, said):
    assert _refusal(_variant(saved, tmp_path, config={"sliding_window": window})) == said


def test_layer_types_that_do_not_name_every_layer_are_refused(saved, tmp_path):
    layers = json.loads((saved[1] / "config.json").read_text())["num_hidden_layers"]
    for kinds in (["full_attention"], ["sliding_attention"] * (layers - 1) + ["everything"],
                  "full_attention"):
        said = _refusal(_variant(saved, tmp_path, config={"layer_types": kinds}))
        assert said == (f"config.json's layer_types must name {layers} layers, each "
                        "sliding_attention or full_attention")


def test_a_norm_of_the_placement_missing_from_one_block_is_refused(saved, tmp_path):
    """Gemma 3's norm after the feed-forward, OLMo's (its only norm of that half)."""
    family, _folder = saved
    said = _refusal(_variant(saved, tmp_path,
                             drop=("layers.1.post_feedforward_layernorm.weight",)))
    assert said == ("missing key(s) 'trf_blocks.1.post_norm2.scale'" if family == "gemma3"
                    else "missing key(s) 'trf_blocks.1.norm2.scale'")


def test_the_genuine_folder_opens_with_its_window(saved, tmp_path):
    cfg = load_checkpoint(_variant(saved, tmp_path)).config
    assert cfg.sliding_window == 4 and cfg.sliding_layers
    from explorer.core.gpt.config import preset
    assert cfg.family is preset(f"{saved[0]}-tiny").family
