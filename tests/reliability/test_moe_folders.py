"""A mixture of experts' folder that lies: its config.json against its weights, or
against itself. Each is refused in one line naming the file and what is wrong — never a
traceback, never another model."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from explorer.core.weights.checkpoints import load_checkpoint

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A small Qwen3-MoE folder (8 experts, 2 a token) as save_pretrained writes it."""
    from tests.core.gpt.test_qwen3moe import hf_model
    from tests.llama_folder import write_tokenizer
    folder = tmp_path_factory.mktemp("moe")
    hf_model("eight-experts-top2-renormalised").save_pretrained(folder)
    write_tokenizer(folder, 320)
    return folder


def copy_of(saved, tmp_path, config=None, drop=(), reshape=None):
    """The folder again, its config.json changed by ``config``, tensors dropped or one
    given another shape."""
    for f in saved.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    hf = json.loads((saved / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, **(config or {})}))
    tensors = load_file(saved / "model.safetensors")
    for key in drop:
        del tensors[key]
    if reshape:
        key, shape = reshape
        tensors[key] = torch.zeros(shape)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    return tmp_path


@pytest.mark.parametrize("change, says", [
    (dict(config={"num_experts_per_tok": 9}), "routes each token to 9 experts of 8"),
    (dict(config={"num_experts_per_tok": 0}), "num_experts_per_tok in config.json must be at least 1"),
    (dict(config={"num_local_experts": 6}), "config.json says 6 experts but the router scores 8"),
    (dict(config={"num_local_experts": "eight"}), "num_experts in config.json"),
    (dict(config={"mlp_only_layers": [1]}), "mixes dense layers among the expert layers"),
    (dict(config={"norm_topk_prob": "yes"}), "norm_topk_prob must be true or false"),
    (dict(config={"hidden_act": "gelu"}), "the experts' SwiGLU uses silu"),
    (dict(reshape=("model.layers.1.mlp.gate.weight", (6, 32))),
     "shape mismatch for 'trf_blocks.1.ff.gate.weight': the file has (6, 32), the model needs (8, 32)"),
    (dict(drop=("model.layers.1.mlp.experts.3.up_proj.weight",)), "ff.fc2.3"),
])
def test_a_lying_mixture_folder_is_refused_in_one_line(saved, tmp_path, change, says):
    folder = copy_of(saved, tmp_path, **change)
    with pytest.raises(ValueError) as refused:
        load_checkpoint(folder)
    message = str(refused.value)
    assert says in message and "\n" not in message and str(folder) in message
