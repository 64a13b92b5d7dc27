"""OpenAI's GPT-2 as a TensorFlow checkpoint: the folder the book's ``gpt_download.py``
saves as ``gpt2/124M`` (also 355M, 774M, 1558M), read without TensorFlow.

Maps OpenAI's variable names (``model/wte``, ``model/h0/attn/c_attn/w`` of shape
``[1, in, out]``, …, ``model/ln_f/b``) onto Hugging Face's GPT-2 names — the same
numbers under other names, as the book's ``load_weights_into_gpt`` assigns them — so
checkpoints.py converts them like any Hugging Face file. ``hparams.json`` is checked
against the shapes in the index before a byte of weights is read. The bundle itself is
read by tf_bundle.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from ..base import state
from ..base.cancel import check
from .tf_bundle import BundleError, TensorBundle, open_bundle
from ..base.validate import read_json

_BLOCK_RE = re.compile(r"^model/h(\d+)/(ln_1|ln_2|attn/c_attn|attn/c_proj|mlp/c_fc|mlp/c_proj)/([gbw])$")
_TOP = {"model/wte": "wte.weight", "model/wpe": "wpe.weight", "model/ln_f/g": "ln_f.weight",
        "model/ln_f/b": "ln_f.bias"}
_LEAF = {"g": "weight", "b": "bias", "w": "weight"}
# training state that a TensorFlow checkpoint may carry beside the weights
_TRAINING_STATE = re.compile(r"(/Adam(_\d+)?$|^global_step$|_power$|/ExponentialMovingAverage$)")


def is_tf_checkpoint(path: str | os.PathLike) -> bool:
    """A folder holding a TensorFlow checkpoint index (then its parse says what is wrong
    with it), an ``.index`` file or a prefix (``…/model.ckpt``) whose index has the
    table's magic bytes."""
    p = Path(path)
    try:
        if p.is_dir():
            return any(p.glob("*.index"))
        if p.is_file():
            index = p
        else:
            index = p.with_name(p.name + ".index")
        if not index.is_file():
            return False
        with open(index, "rb") as fh:
            fh.seek(-8, os.SEEK_END)
            return fh.read(8) == b"\x57\xfb\x80\x8b\x24\x75\x47\xdb"
    except (OSError, BundleError):
        return False


def _hf_name(name: str) -> str | None:
    if name in _TOP:
        return _TOP[name]
    m = _BLOCK_RE.match(name)
    if not m:
        return None
    layer, part, leaf = m.groups()
    return f"h.{layer}.{part.replace('/', '.')}.{_LEAF[leaf]}"


def _read_hparams(folder: Path) -> tuple[dict | None, Path]:
    path = folder / "hparams.json"
    if not path.is_file():
        return None, path
    try:
        data = read_json(path, "hparams.json")  # kind, size, depth and numbers checked
    except ValueError as exc:
        raise BundleError(path, str(exc).split(": ", 1)[-1]) from None
    keys = ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer")
    if not isinstance(data, dict) or any(not isinstance(data.get(k), int) or isinstance(data.get(k), bool)
                                         or data[k] <= 0 for k in keys):
        raise BundleError(path, "not GPT-2's hparams: it needs positive whole numbers for "
                                + ", ".join(keys))
    return data, path


def _check_hparams(bundle: TensorBundle, hparams: dict, path: Path, layers: int) -> None:
    entries = bundle.entries
    wte = entries.get("model/wte")
    wpe = entries.get("model/wpe")
    found = {"n_layer": (layers, f"{layers} blocks (model/h0 …)")}
    if wte is not None and len(wte.shape) == 2:
        found["n_vocab"] = (wte.shape[0], f"model/wte has shape {list(wte.shape)}")
        found["n_embd"] = (wte.shape[1], f"model/wte has shape {list(wte.shape)}")
    if wpe is not None and len(wpe.shape) == 2:
        found["n_ctx"] = (wpe.shape[0], f"model/wpe has shape {list(wpe.shape)}")
    for key, (value, where) in found.items():
        if hparams[key] != value:
            raise BundleError(path, f"says {key} is {hparams[key]}, but {where} in "
                                    f"{bundle.index_path.name}: the two do not belong together")
    if hparams["n_embd"] % hparams["n_head"]:
        raise BundleError(path, f"n_embd {hparams['n_embd']} is not divisible by n_head "
                                f"{hparams['n_head']}")


def read_tf_checkpoint(path: str | os.PathLike, should_stop=None
                       ) -> tuple[dict[str, torch.Tensor], dict | None, list[str]]:
    """The weights under Hugging Face's GPT-2 names, a Hugging Face-style config (from
    hparams.json, None without one) and notices."""
    bundle = open_bundle(path, should_stop)
    folder = bundle.index_path.parent
    notices: list[str] = []
    names: dict[str, str] = {}
    skipped = []
    for name in bundle.entries:
        target = _hf_name(name)
        if target is not None:
            names[name] = target
        elif _TRAINING_STATE.search(name):
            skipped.append(name)
        else:
            raise BundleError(bundle.index_path, f"unexpected variable {name!r} for OpenAI's "
                                                 "GPT-2 (model/wte, model/h0/attn/c_attn/w, …)")
    if not names:
        raise BundleError(bundle.index_path, "no GPT-2 weights (model/wte, model/h0/…) in this "
                                             "TensorFlow checkpoint")
    if skipped:
        notices.append(f"ignored {len(skipped)} training variables of the TensorFlow "
                       f"checkpoint (optimizer state such as {skipped[0]!r})")
    layers = len({int(_BLOCK_RE.match(n).group(1)) for n in names if _BLOCK_RE.match(n)})
    hparams, hparams_path = _read_hparams(folder)
    if hparams is not None:
        _check_hparams(bundle, hparams, hparams_path, layers)
    data_files = [bundle.data_path(s) for s in range(bundle.num_shards)]
    # verified once per data file and index: the record names the index's bytes, so a
    # changed index (other offsets into the same data) is verified again
    label = f"crc32c, index sha256:{bundle.index_sha256}"
    checked = all(state.was_verified(f, label) for f in data_files)
    sd: dict[str, torch.Tensor] = {}
    for name, target in names.items():
        check(should_stop)
        tensor = bundle.read(name, should_stop, verify=not checked)
        if name.endswith("/w"):  # conv1d weights: [1, in, out] -> Hugging Face's (in, out)
            if tensor.dim() != 3 or tensor.shape[0] != 1:
                raise BundleError(bundle.index_path, f"{name!r} has shape {list(tensor.shape)}; "
                                                     "OpenAI's GPT-2 stores [1, in, out]")
            tensor = tensor[0]
        sd[target] = tensor
    if not checked and len(names) == len(bundle.entries):  # every byte was checked
        for f in data_files:
            state.mark_verified(f, label)
    config = None
    if hparams is not None:
        config = {"n_head": hparams["n_head"], "n_embd": hparams["n_embd"],
                  "n_layer": hparams["n_layer"], "n_positions": hparams["n_ctx"],
                  "vocab_size": hparams["n_vocab"], "model_type": "gpt2"}
    else:
        notices.append(f"no hparams.json beside {bundle.index_path.name}")
    return sd, config, notices


def tf_files(path: str | os.PathLike) -> list[Path]:
    """The index and data files of a checkpoint (for size and change checks)."""
    bundle = open_bundle(path)
    return [bundle.index_path] + [bundle.data_path(s) for s in range(bundle.num_shards)]
