"""Where a model comes from: a seeded random initialisation of a preset, a checkpoint
file or folder, a GPT-2 in the local Hugging Face cache, or the default — the GPT-2 that
was last downloaded, else GPT-2 small, else any GPT-2 in the cache, else an untrained
gpt2-small, labelled as such. Cached weights are checked against their published sha256
before they are used (hub.verified). Loads through checkpoints.py; fetches nothing.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from . import hub, state
from .cancel import check
from .checkpoints import CheckpointError, LoadedModel, check_memory, load_checkpoint
from .config import preset
from .devices import resolve_device, resolve_dtype
from .model import build_model, count_parameters

NO_TRAINED_MODEL = ("no trained GPT-2 found in the Hugging Face cache ({cache}); using a "
                    "random initialisation. Get one with `gpt-explorer download gpt2`, "
                    "File ▸ Get GPT-2…, or open the book's gpt2/124M folder")


def random_model(preset_name: str = "gpt2-small", seed: int = 0, device: str = "cpu",
                 dtype: str | torch.dtype = "float32", should_stop=None,
                 **overrides: Any) -> LoadedModel:
    """A seeded GPT-2 initialisation of a preset: it runs, but it was never trained."""
    cfg = preset(preset_name, **overrides)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    need = count_parameters(cfg).total * torch.tensor([], dtype=dt).element_size()
    check_memory(need, dev, f"{preset_name} in {str(dt).replace('torch.', '')}")
    check(should_stop)
    model = build_model(cfg, device=dev, dtype=dt, seed=seed)
    check(should_stop)
    post = " · Post-LN" if cfg.norm_position == "post" else ""
    label = f"{preset_name}{post} · random init (seed {seed}) · UNTRAINED: output is noise"
    return LoadedModel(model, cfg, "preset", label, trained=False)


def load_cached(cached: hub.CachedModel, device: str = "cpu", dtype: str | torch.dtype = "float32",
                should_stop=None) -> LoadedModel:
    """A GPT-2 from the cache, after its weights pass their sha256 check (a corrupt file
    is removed from the cache and refused)."""
    problem = hub.verified(cached, should_stop)
    if problem:
        raise CheckpointError(cached.folder, problem)
    loaded = load_checkpoint(cached.folder, device=device, dtype=dtype, should_stop=should_stop)
    loaded.source = "hf-cache"
    loaded.label = f"{cached.repo_id} from the Hugging Face cache"
    return loaded


def default_candidates(cache: str | os.PathLike | None = None) -> list[hub.CachedModel]:
    """The cached GPT-2s the default may be, in order of preference."""
    found = hub.find_cached(cache)
    chosen = state.default_repo()
    first = [c for c in found if chosen and (c.repo_id == chosen or
                                              (c.model and c.model.repo_id == chosen))]
    if chosen and not first:  # a repository that is not one of the four sizes
        try:
            hit = hub.find_repo(chosen, cache)
        except hub.HubError:
            hit = None
        first = [hit] if hit is not None else []
    return first + [c for c in found if c not in first]


def load_default_model(device: str = "cpu", dtype: str | torch.dtype = "float32",
                       cache: str | os.PathLike | None = None, should_stop=None) -> LoadedModel:
    """The last downloaded GPT-2, else the smallest one in the cache, else an untrained
    gpt2-small. Works offline; a cached file that fails its check is skipped, said why."""
    notices: list[str] = []
    for cached in default_candidates(cache):
        try:
            loaded = load_cached(cached, device, dtype, should_stop)
        except (CheckpointError, hub.HubError) as exc:
            notices.append(f"skipped {cached.repo_id} in the cache: {exc}")
            continue
        loaded.notices[:0] = notices
        return loaded
    loaded = random_model("gpt2-small", seed=0, device=device, dtype=dtype, should_stop=should_stop)
    loaded.notices.extend(notices)
    loaded.notices.append(NO_TRAINED_MODEL.format(cache=cache or hub.cache_dir()))
    return loaded


def open_model(checkpoint: str | None = None, preset_name: str | None = None, device: str = "cpu",
               dtype: str | torch.dtype = "float32", seed: int = 0,
               norm_position: str = "pre", should_stop=None) -> LoadedModel:
    """The CLI's and the app's one way to get a model: a checkpoint path, a preset
    (random init, Pre-LN or Post-LN), ``hf:NAME`` for a model in the HF cache, or the
    default."""
    if checkpoint and preset_name:
        raise ValueError("give either a checkpoint or a preset, not both")
    if checkpoint:
        if checkpoint.startswith("hf:"):
            want = checkpoint[3:]
            try:
                cached = hub.find_repo(want)
            except hub.HubError as exc:
                raise ValueError(str(exc)) from None
            if cached is None:
                raise ValueError(f"{want!r} is not in the Hugging Face cache at {hub.cache_dir()}; "
                                 f"get it with `gpt-explorer download {want}`")
            return load_cached(cached, device, dtype, should_stop)
        return load_checkpoint(checkpoint, device=device, dtype=dtype, should_stop=should_stop)
    if preset_name:
        return random_model(preset_name, seed=seed, device=device, dtype=dtype,
                            should_stop=should_stop, norm_position=norm_position)
    return load_default_model(device=device, dtype=dtype, should_stop=should_stop)
