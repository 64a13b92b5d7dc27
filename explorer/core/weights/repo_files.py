"""A repository's small files on the Hub, beside its weights: config.json (checked to be
a model of a family the explorer opens), the shard index, and for a family whose models
bring their own vocabulary (Llama, Qwen) its tokenizer.json and generation_config.json —
each size checked before it is fetched."""

from __future__ import annotations

from pathlib import Path

from ..base.validate import read_json
from ..gpt.families import FAMILIES, for_config, model_types
from ..gpt.family import BlockFamily
from .hub import HubError

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # config.json and the shard index: a few KB on the Hub
MAX_TOKENIZER_BYTES = 16 * 1024 * 1024  # tokenizer.json: Qwen's and Llama 3's are 7–9 MB
TOKENIZER, GENERATION_CONFIG = "tokenizer.json", "generation_config.json"


def small_file(repo_id: str, filename: str, revision: str, root: Path, hub: str,
                headers: dict) -> Path:
    """config.json or the shard index into the cache, its announced size checked first
    (a GPT-2's are a few KB)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=hub)
    size = get_hf_file_metadata(url, headers=headers).size
    if size is not None and size > MAX_CONFIG_BYTES:
        raise HubError(f"{repo_id}: its {filename} is {size / 1e6:,.0f} MB, where a GPT-2's is "
                       "a few KB; not stored")
    return Path(hf_hub_download(repo_id, filename, revision=revision, cache_dir=str(root),
                                endpoint=hub))


def tokenizer_files(repo_id: str, revision: str, root: Path, hub: str, headers: dict) -> None:
    """tokenizer.json (a Llama or Qwen vocabulary: megabytes) and generation_config.json
    (its end-of-text id) into the cache; a repository without a tokenizer.json is refused
    (GPT-2's would misread its ids)."""
    from huggingface_hub import errors, get_hf_file_metadata, hf_hub_download, hf_hub_url

    url = hf_hub_url(repo_id, TOKENIZER, revision=revision, endpoint=hub)
    try:
        size = get_hf_file_metadata(url, headers=headers).size
    except errors.RemoteEntryNotFoundError:
        raise HubError(f"{repo_id} has no {TOKENIZER}: its ids cannot be read") from None
    if size is not None and size > MAX_TOKENIZER_BYTES:
        raise HubError(f"{repo_id}: its {TOKENIZER} is {size / 1e6:,.0f} MB; a tokenizer's is "
                       f"at most {MAX_TOKENIZER_BYTES / 1e6:.0f} MB")
    hf_hub_download(repo_id, TOKENIZER, revision=revision, cache_dir=str(root), endpoint=hub)
    try:
        small_file(repo_id, GENERATION_CONFIG, revision, root, hub, headers)
    except errors.RemoteEntryNotFoundError:
        pass  # config.json's eos_token_id is read instead


def check_config(config: Path, repo_id: str) -> BlockFamily:
    """The family of the repository's model, from its config.json; ``HubError`` for a
    model no family opens."""
    try:
        data = read_json(config, "config.json")  # kind, size, depth and numbers checked
    except ValueError as exc:
        raise HubError(f"{repo_id}: its config.json is unreadable ({exc})") from None
    family = for_config(data)
    if family is None:
        kind = data.get("model_type") if isinstance(data, dict) else type(data).__name__
        titles = [f.title for f in FAMILIES.values()]
        others = f", nor {' or '.join(titles[2:])}" if len(titles) > 2 else ""
        raise HubError(f"{repo_id} is not a {' or '.join(titles[:2])} model{others} (its "
                       f"config.json says model_type {kind!r}); the explorer runs "
                       f"{', '.join(model_types())}")
    return family
