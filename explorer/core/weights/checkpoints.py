"""Checkpoints: format detection, key maps, safe loading and saving of files and folders.

Reads Hugging Face GPT-2 weights (safetensors or ``pytorch_model.bin``, with or without
the ``transformer.`` prefix and ``lm_head``), OpenAI's TensorFlow checkpoint folder (the
book's ``gpt2/124M``, via tf_checkpoint.py), the book's ``.pth`` state dicts, and the
project's own format (safetensors with the config in its metadata). The format comes
from the file's bytes, never its extension. Pickles are read with ``weights_only=True``
only. Every failure is a ``CheckpointError`` that names the file and the problem.
Which names a file uses is a format of some family's key maps (state_dicts.py). This
module builds models through the family's record (build.new_model); it owns no model
code, and does not decide where a model comes from (sources.py) or fetch anything
(hub.py).
"""

from __future__ import annotations

import os
import pickle
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..base.cancel import check
from ..gpt.config import GPTConfig
from ..gpt.families import for_config, model_types
from ..base.outputs import shown
from ..base.devices import check_memory, resolve_device, resolve_dtype
from ..base.errors import CheckpointError
from .hf_files import hf_folder_weights, read_safetensors, safetensors_header
from .keymaps import check_tensor, validate_state_dict
from .state_dicts import PROJECT_FORMAT, converted
from ..gpt.build import new_model
from ..gpt.sizes import count_parameters, describe_size
from ..gpt.block_model import BlockModel
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer
from .tokenizers_files import check_vocabulary_size, tokenizer_for, tokenizer_notes
from .tf_bundle import BundleError, open_bundle
from .tf_checkpoint import is_tf_checkpoint, read_tf_checkpoint, tf_files
from ..base.validate import FileKind, file_kind, parse_json, read_json, regular_file

PROJECT_FORMAT_VERSION = "1"


@dataclass
class LoadedModel:
    """A model ready to run, with where it came from."""

    model: BlockModel  # the config's family's model
    config: GPTConfig
    source: str  # "preset", "hf-cache", or a format name
    label: str  # one line for every output: what this model is
    trained: bool
    path: str | None = None
    notices: list[str] = field(default_factory=list)
    tokenizer: Tokenizer | None = None  # None: GPT-2's
    tokenizer_note: str = ""  # said in the title: read with a tokenizer not its own

    def __post_init__(self) -> None:
        if self.tokenizer is None:
            self.tokenizer = gpt2_tokenizer()
        if getattr(self.model, "tokenizer", None) is None:  # what core code reading text asks
            self.model.tokenizer = self.tokenizer

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def size(self) -> str:
        """Its shape in words, from the config: '12 blocks · 768 wide · 12 heads · …'."""
        return describe_size(self.config)


# --------------------------------------------------------------------------- detection

def detect_format(path: str | os.PathLike) -> str:
    """'hf-folder', 'openai-tf', 'safetensors', 'torch-zip' or 'torch-legacy', from the
    bytes; a CheckpointError says what the file is when it is none of those."""
    p = Path(path)
    kind = file_kind(p)
    if kind == FileKind.MISSING:
        if is_tf_checkpoint(p):  # a checkpoint prefix such as gpt2/124M/model.ckpt
            return "openai-tf"
        raise CheckpointError(p, "no such file or folder")
    if kind not in (FileKind.FILE, FileKind.FOLDER):  # opening a FIFO would wait forever
        raise CheckpointError(p, f"{kind}, not a checkpoint file or folder")
    if kind == FileKind.FOLDER:
        if hf_folder_weights(p):
            return "hf-folder"
        if is_tf_checkpoint(p):
            return "openai-tf"
        raise CheckpointError(p, "a folder without model.safetensors, "
                                 "model.safetensors.index.json or pytorch_model.bin (Hugging "
                                 "Face), and without a TensorFlow checkpoint (model.ckpt.index, "
                                 "as in the book's gpt2/124M)")
    if is_tf_checkpoint(p):
        return "openai-tf"
    if re.search(r"\.data-\d{5}-of-\d{5}$", p.name):
        raise CheckpointError(p, "the data half of a TensorFlow checkpoint: open its folder or "
                                 "its .index file")
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(512)
    except PermissionError:
        raise CheckpointError(p, "permission denied: the file cannot be read") from None
    except OSError as exc:
        raise CheckpointError(p, f"cannot be read ({exc.strerror or exc})") from None
    if size == 0:
        raise CheckpointError(p, "the file is empty (0 bytes)")
    if head.startswith(b"version https://git-lfs"):
        raise CheckpointError(p, "a Git LFS pointer, not the weights: the real file was "
                                 "never downloaded (run `git lfs pull` where it came from)")
    stripped = head.lstrip().lower()
    if stripped.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        raise CheckpointError(p, "an HTML/XML page, not a checkpoint: probably an error or "
                                 "login page saved by a download")
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(p) as zf:
                names = zf.namelist()
        except zipfile.BadZipFile:
            raise CheckpointError(p, "a damaged zip archive (truncated PyTorch file?)") from None
        if any(n.endswith("data.pkl") for n in names):
            return "torch-zip"
        raise CheckpointError(p, "a zip archive that is not a PyTorch checkpoint "
                                 "(it has no data.pkl)")
    if head[:1] == b"\x80" and len(head) > 1 and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "torch-legacy"
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    if p.suffix == ".index":
        raise CheckpointError(p, "not a TensorFlow tensor bundle index (no table magic at its end)")
    raise CheckpointError(p, "not a recognised checkpoint (expected safetensors, a PyTorch "
                             ".bin/.pth file, or a Hugging Face model folder)")


def tensor_bytes_in_file(path: str | os.PathLike) -> int:
    """How many bytes of tensors a checkpoint holds (read from headers, not loaded)."""
    p = Path(path)
    fmt = detect_format(p)
    if fmt == "hf-folder":
        return sum(tensor_bytes_in_file(w) for w in hf_folder_weights(p))
    if fmt == "openai-tf":
        try:
            return open_bundle(p).total_bytes()
        except BundleError as exc:
            raise CheckpointError(exc.path, exc.problem) from None
    if fmt == "safetensors":
        return safetensors_header(p)[1]
    if fmt == "torch-zip":
        with zipfile.ZipFile(p) as zf:
            return sum(i.file_size for i in zf.infolist() if "/data/" in i.filename)
    return p.stat().st_size


# --------------------------------------------------------------------------- reading

_GLOBAL_RE = re.compile(r"GLOBAL\s+([\w.]+)")


def _read_torch(path: Path, fmt: str) -> dict[str, torch.Tensor]:
    # Read into memory (mmap=False): tensors mapped from the file would die with SIGBUS
    # when the file is truncated or re-saved in place while the model is loaded.
    # torch.load hands a file that looks like safetensors to the safetensors library,
    # whose SafetensorError must be caught here as well.
    from safetensors import SafetensorError
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=False)
    except pickle.UnpicklingError as exc:
        found = _GLOBAL_RE.search(str(exc))
        what = f" (it asks for `{found.group(1)}`)" if found else ""
        raise CheckpointError(
            path, "refused: the pickle holds more than tensors" + what + "; only plain "
                  "state dicts are loaded, with weights_only=True, and nothing in the file "
                  "was run") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError,
            IndexError, TypeError, AttributeError, OverflowError, MemoryError,
            RecursionError, SafetensorError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(path, f"corrupt or truncated PyTorch file ({first})") from None
    return _unwrap_state_dict(path, obj)


def _unwrap_state_dict(path: Path, obj: Any) -> dict[str, torch.Tensor]:
    if isinstance(obj, dict):
        for wrapper in ("model_state_dict", "state_dict", "model"):
            inner = obj.get(wrapper)
            if isinstance(inner, dict) and inner and all(
                    isinstance(v, torch.Tensor) for v in inner.values()):
                return dict(inner)
        if obj and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
            return dict(obj)
    kind = type(obj).__name__
    raise CheckpointError(path, f"holds a {kind}, not a state dict of named tensors")


def read_state_dict(path: str | os.PathLike, should_stop=None
                    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Raw tensors of a checkpoint and what is known about it (format, configs)."""
    p = Path(path)
    fmt = detect_format(p)
    info: dict[str, Any] = {"format": fmt}
    if fmt == "openai-tf":
        try:
            tensors, hf_config, notices = read_tf_checkpoint(p, should_stop)
        except BundleError as exc:
            raise CheckpointError(exc.path, exc.problem) from None
        if hf_config is not None:
            info["hf_config"] = hf_config
        info["notices"] = notices
        return tensors, info
    if fmt == "hf-folder":
        tensors: dict[str, torch.Tensor] = {}
        for weights in hf_folder_weights(p):
            if file_kind(weights) == FileKind.MISSING:
                raise CheckpointError(weights, "shard listed in the index is missing")
            regular_file(weights)
            sub, sub_info = read_state_dict(weights, should_stop)
            again = sorted(set(sub) & set(tensors))
            if again:  # which one the index means cannot be told: refused, not the last kept
                raise CheckpointError(weights, f"holds {again[0][:80]!r}, which another shard "
                                               "of the folder holds too")
            tensors.update(sub)
            info.setdefault("file_format", sub_info["format"])
        config_json = p / "config.json"
    else:
        if fmt == "safetensors":
            tensors, meta = read_safetensors(p, should_stop)
            if meta.get("format") == PROJECT_FORMAT:
                info["format"] = PROJECT_FORMAT
                try:
                    info["config"] = GPTConfig.from_dict(parse_json(meta["config"], p, "a config"))
                except (KeyError, ValueError, TypeError) as exc:
                    problem = exc.problem if isinstance(exc, CheckpointError) else str(exc)
                    raise CheckpointError(p, f"project checkpoint with a bad config ({problem})") from None
                info["metadata"] = meta
        else:
            tensors = _read_torch(p, fmt)
        config_json = p.parent / "config.json"
    if file_kind(config_json) != FileKind.MISSING and "config" not in info:
        _config_beside(config_json, info)
    return tensors, info


def _config_beside(config_json: Path, info: dict) -> None:
    """The config.json beside the weights, into ``info``: Hugging Face's of a family the
    explorer opens, or the book's dict; one naming another family, or unreadable, is
    refused (the weights' heads, rotary base and norms come from it)."""
    try:
        beside = read_json(config_json, "a config")
    except CheckpointError as exc:  # beside it, meant for it, unreadable: never guessed past
        raise CheckpointError(config_json, f"{exc.problem}; the config beside the weights "
                                           "cannot be read, and the model's heads, rotary base "
                                           "and norms come from it: write it again "
                                           "(json.dump(CONFIG, f, default=str)) or remove "
                                           "it") from None
    if for_config(beside) is not None:
        info["hf_config"] = beside  # Hugging Face's config.json of a family we open
    elif isinstance(beside, dict) and "n_heads" in beside:
        info["book_config"] = beside  # the book's GPT_CONFIG dict saved as JSON
    elif isinstance(beside, dict) and isinstance(beside.get("model_type"), str):
        kind = shown(beside["model_type"][:40])
        raise CheckpointError(config_json, f"model_type '{kind}': a model the explorer does "
                                           f"not open (it opens {', '.join(model_types())})")
    elif beside is not None:
        info.setdefault("notices", []).append(f"ignored {config_json}: not a GPT-2 config")


# --------------------------------------------------------------------------- loading

def _fingerprint(path: Path, fmt: str) -> list[tuple[str, int, int]]:
    if fmt == "openai-tf":
        try:
            files = tf_files(path)
        except BundleError:
            files = []
    else:
        files = hf_folder_weights(path) if path.is_dir() else [path]
    out = []
    for f in files:
        try:
            st = f.stat()
            out.append((str(f), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(f), -1, -1))
    return out


def load_checkpoint(path: str | os.PathLike, device: str = "cpu", dtype: str | torch.dtype = "float32",
                    config: GPTConfig | None = None, should_stop=None,
                    own_tokenizer: bool = False) -> LoadedModel:
    """Load any supported checkpoint into a BlockModel in eval mode. ``should_stop`` is
    asked between the phases (read, convert, check, place); nothing is half-loaded.
    ``own_tokenizer``: refuse a model of another vocabulary than GPT-2's that would be
    read with GPT-2's tokenizer (none of its own beside it)."""
    p = Path(path).expanduser()
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    file_bytes = tensor_bytes_in_file(p)  # also detects the format and reads headers
    check_memory(file_bytes * 2, torch.device("cpu"), f"loading {p.name}")
    fmt = detect_format(p)
    before = _fingerprint(p, fmt)
    sd, info = read_state_dict(p, should_stop)
    if _fingerprint(p, fmt) != before:
        raise CheckpointError(p, "the file changed while it was being read (still downloading or "
                                 "being written?); try again when it is complete")
    check(should_stop)
    for key, tensor in sd.items():  # dense, a usable dtype, no expanded views
        check_tensor(p, key, tensor)
    notices: list[str] = list(info.get("notices", []))
    sd, cfg, names = converted(p, sd, info, config, notices)
    tokenizer = tokenizer_for(p)
    check_vocabulary_size(p, cfg, tokenizer)
    foreign = tokenizer_notes(cfg, tokenizer, notices)
    if foreign and own_tokenizer:
        raise CheckpointError(p, f"{foreign}; refused as asked (--own-tokenizer): put its "
                                 "tokenizer.json, or Llama 3's tokenizer.model, beside it")
    validate_state_dict(p, sd, cfg)
    check(should_stop)
    params_bytes = count_parameters(cfg).total * torch.tensor([], dtype=dt).element_size()
    check_memory(params_bytes, dev, f"{p.name} in {str(dt).replace('torch.', '')}")
    if cfg.tie_weights:
        if "out_head.weight" in sd and not torch.equal(sd["out_head.weight"], sd["tok_emb.weight"]):
            notices.append("the file's out_head differs from tok_emb, but the config ties them: "
                           "tok_emb is used for both")
        sd["out_head.weight"] = sd["tok_emb.weight"]
    placed = {}
    for k, v in sd.items():  # a tensor at a time, Stop asked between
        check(should_stop)
        placed[k] = v.to(device=dev, dtype=dt)
    sd = placed
    with torch.device("meta"):
        model = new_model(cfg)
    model.load_state_dict(sd, strict=True, assign=True)
    model.tie_weights()
    model.eval()
    model.tokenizer = tokenizer  # it hangs off the model: whatever reads text asks it
    fmt = info["format"]
    kind = (info.get("hf_config") or {}).get("model_type")
    named = cfg.family.files.hf_name(kind) if kind else cfg.family.display_name(cfg)  # a book
    what = names.label(cfg) or f"{cfg.n_layers}-layer {named} ({cfg.emb_dim}-dim)"  # file's own
    label = f"{what} from {p.name} ({_FORMAT_NAMES.get(fmt, fmt)})"
    meta = info.get("metadata", {})
    trained = meta.get("trained", "true") != "false"
    if not trained:
        label += " · UNTRAINED"
    return LoadedModel(model, cfg, fmt, label + (f" · {foreign}" if foreign else ""),
                       trained=trained, path=str(p), notices=notices, tokenizer=tokenizer,
                       tokenizer_note=foreign)


_FORMAT_NAMES = {"hf-folder": "Hugging Face folder", "safetensors": "safetensors",
                 "openai-tf": "OpenAI TensorFlow checkpoint",
                 "torch-zip": "PyTorch state dict", "torch-legacy": "PyTorch state dict (legacy)",
                 PROJECT_FORMAT: "explorer checkpoint"}


def save_checkpoint(model: BlockModel, path: str | os.PathLike, trained: bool = True,
                    metadata: dict[str, str] | None = None) -> Path:
    """The project's format: one safetensors file with the config in its metadata."""
    from safetensors.torch import save_file

    p = Path(path)
    sd = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if model.cfg.tie_weights:
        sd.pop("out_head.weight", None)
    meta = {"format": PROJECT_FORMAT, "format_version": PROJECT_FORMAT_VERSION,
            "config": model.cfg.to_json(), "trained": "true" if trained else "false"}
    meta.update(metadata or {})
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".part")
    try:
        save_file(sd, str(tmp), metadata=meta)
    except BaseException:  # a full disk: nothing half-written is left behind
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, p)
    return p
