"""GPT-2 and the Hugging Face Hub: the four sizes, where the Hub and its cache are, and
what the cache holds — found with ``huggingface_hub``'s own cache lookup, no network —
with every weights file checked against the sha256 the Hub published for it before it
is used (``verify``). Fetching is download.py's. Failures are ``HubError``: one line
that says what happened. Builds no model.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base import state
from ..base.cancel import check
from ..gpt.config import preset

log = logging.getLogger("explorer.hub")

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
SHA256_RE = re.compile(r"[0-9a-f]{64}")
CHUNK = 8 * 1024 * 1024


class HubError(Exception):
    """A download or a cached model that cannot be used, in one line."""


class HubUnreachable(HubError):
    """No connection to the Hub (no network, a firewall, an endpoint that is down)."""


# what works without the Hub, said wherever a download cannot reach it
OFFLINE_CHOICES = ("without the Hub, open a GPT-2 folder you already have (the book's "
                   "gpt2/124M, a Hugging Face folder, a .pth file) or train a small model here")


@dataclass(frozen=True)
class HubModel:
    """One of OpenAI's four GPT-2 sizes on the Hub."""

    name: str  # gpt2, gpt2-medium, ...
    repo_id: str  # openai-community/gpt2, ...
    preset: str  # the explorer's preset of the same shape
    title: str

    @property
    def parameters(self) -> int:
        from ..gpt.sizes import count_parameters

        return count_parameters(preset(self.preset)).total

    @property
    def download_bytes(self) -> int:
        """The size of the Hub's model.safetensors: every weight in float32, plus each
        layer's saved context x context causal mask (matches the Hub's files)."""
        cfg = preset(self.preset)
        return 4 * self.parameters + 4 * cfg.n_layers * cfg.context_length ** 2

    @property
    def memory_bytes(self) -> int:
        """Memory while loading: the file's tensors and the model's, at once."""
        return 2 * 4 * self.parameters


GPT2_MODELS = (
    HubModel("gpt2", "openai-community/gpt2", "gpt2-small", "GPT-2 small (124M)"),
    HubModel("gpt2-medium", "openai-community/gpt2-medium", "gpt2-medium", "GPT-2 medium (355M)"),
    HubModel("gpt2-large", "openai-community/gpt2-large", "gpt2-large", "GPT-2 large (774M)"),
    HubModel("gpt2-xl", "openai-community/gpt2-xl", "gpt2-xl", "GPT-2 XL (1.5B)"),
)


def resolve(name: str) -> tuple[str, HubModel | None]:
    """A size name (gpt2, gpt2-medium, …, or the presets' gpt2-small) or a repository
    id (owner/name) -> (repo id, the GPT-2 size if it is one)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    key = (name or "").strip()
    for model in GPT2_MODELS:
        if key in (model.name, model.preset, model.repo_id):
            return model.repo_id, model
    sizes = ", ".join(m.name for m in GPT2_MODELS)
    if "/" not in key:
        raise HubError(f"{name!r} is neither a GPT-2 size ({sizes}) nor a repository id "
                       "such as openai-community/gpt2")
    try:
        validate_repo_id(key)
    except HFValidationError as exc:
        raise HubError(f"{name!r} is not a valid repository id ({str(exc).splitlines()[0]})") from None
    return key, None


def model_for_repo(repo_id: str) -> HubModel | None:
    for model in GPT2_MODELS:
        if repo_id in (model.repo_id, model.name):
            return model
    return None


# settings huggingface_hub reads from the environment with int() when it is imported
WHOLE_SECONDS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")


def check_environment() -> None:
    """The Hub library's timeouts from the environment, named when unreadable (the library
    itself says only "invalid literal for int()")."""
    for name in WHOLE_SECONDS:
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            seconds = int(value)
        except ValueError:
            seconds = -1
        if seconds < 0:
            raise HubError(f"{name}={value!r} is not a whole number of seconds (e.g. "
                           f"{name}=30); unset it or give one"[:200])
    address = os.environ.get("HF_ENDPOINT")
    if address:
        from urllib.parse import urlsplit
        try:
            parts = urlsplit(address)
            parts.port  # noqa: B018 — raises ValueError for a port that is not a number
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # a port that is not a number, a bracket left open
            ok = False
        if not ok:
            raise HubError(f"HF_ENDPOINT={address!r} is not an http(s) address (e.g. "
                           "https://huggingface.co); unset it or give one"[:200])


def cache_dir() -> Path:
    """The Hub cache as huggingface_hub resolves it (HF_HUB_CACHE, else HF_HOME/hub, else
    the library's default), read when called so that a changed environment counts."""
    check_environment()
    from huggingface_hub import constants

    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(constants.HF_HUB_CACHE).expanduser()


def endpoint() -> str:
    """The Hub's address: HF_ENDPOINT, else huggingface.co (read when called)."""
    check_environment()
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


# --------------------------------------------------------------------------- checking

def sha256_of(path: str | os.PathLike, should_stop=None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            check(should_stop)
    return digest.hexdigest()


def verify(path: str | os.PathLike, should_stop=None) -> str | None:
    """Check a cached file against the sha256 in its blob's name (the Hub's ETag for
    files stored with Git LFS). None when it matches, or when the cache keeps no blob
    to compare with; otherwise the problem, after the file is removed from the cache so
    that it can never be used. Each file is hashed once per size and mtime."""
    pointer = Path(path)
    try:
        blob = pointer.resolve(strict=True)
    except (OSError, RuntimeError):  # gone, a dangling link, a symlink loop
        return f"{pointer}: missing from the cache (a broken link?)"
    expected = blob.name
    if not SHA256_RE.fullmatch(expected):
        return None  # a copy without its blob (no symlinks here): nothing to compare with
    if state.was_verified(blob, f"sha256:{expected}"):
        return None
    actual = sha256_of(blob, should_stop)
    if actual == expected:
        state.mark_verified(blob, f"sha256:{expected}")
        return None
    remove_from_cache(blob, pointer)
    return (f"{pointer.name} in the Hugging Face cache was corrupt (its sha256 is "
            f"{actual[:12]}…, the Hub published {expected[:12]}…): removed it from the cache; "
            "download it again")


def remove_from_cache(blob: Path, pointer: Path | None = None) -> None:
    state.forget_verified(blob)
    for p in (pointer, blob):
        if p is not None:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not remove %s: %s", p, exc)


# --------------------------------------------------------------------------- the cache

@dataclass(frozen=True)
class CachedModel:
    """A GPT-2 whose config and weights are all in the local cache."""

    repo_id: str
    folder: Path  # the snapshot
    weights: tuple[Path, ...]

    @property
    def model(self) -> HubModel | None:
        return model_for_repo(self.repo_id)

    @property
    def name(self) -> str:
        return self.model.name if self.model else self.repo_id


def _cached(repo_id: str, filename: str, cache: Path) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=str(cache))
    except (ValueError, OSError):
        return None
    return Path(found) if isinstance(found, str) else None


def shard_names(index: Path) -> list[str]:
    """The shard files an index names, each a plain file name in the same folder."""
    from ..base.errors import CheckpointError
    from ..base.validate import read_json

    try:
        data = read_json(index, "a shard index")
    except CheckpointError as exc:
        raise HubError(str(exc)) from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise HubError(f"{index}: unreadable shard index (no weight_map object)")
    names = sorted({str(v) if not isinstance(v, str) else v for v in weight_map.values()})
    for name in names:
        if not isinstance(name, str) or Path(name).name != name or not name.endswith(".safetensors"):
            raise HubError(f"{index}: names {name!r} as a shard; shards must be .safetensors "
                           "files beside the index")
    return names


def cached_model(repo_id: str, cache: str | os.PathLike | None = None) -> CachedModel | None:
    """The cached snapshot of ``repo_id`` (its 'main'), if its config and every weights
    file are there; found with the library's cache lookup, no network."""
    root = Path(cache) if cache else cache_dir()
    config = _cached(repo_id, CONFIG, root)
    if config is None:
        return None
    weights = _cached(repo_id, WEIGHTS, root)
    if weights is not None:
        return CachedModel(repo_id, weights.parent, (weights,))
    index = _cached(repo_id, WEIGHTS_INDEX, root)
    if index is not None:
        try:
            shards = [_cached(repo_id, name, root) for name in shard_names(index)]
        except HubError:
            return None
        if shards and all(s is not None for s in shards):
            return CachedModel(repo_id, index.parent, tuple(shards))  # type: ignore[arg-type]
        return None
    legacy = _cached(repo_id, "pytorch_model.bin", root)  # what older transformers fetched
    return CachedModel(repo_id, legacy.parent, (legacy,)) if legacy is not None else None


def _candidates(repo_id: str) -> list[str]:
    model = model_for_repo(repo_id)
    return [model.repo_id, model.name] if model else [repo_id]  # also the old un-namespaced id


def find_cached(cache: str | os.PathLike | None = None) -> list[CachedModel]:
    """Every GPT-2 size in the cache, smallest first (checks no checksum)."""
    found = []
    for model in GPT2_MODELS:
        for repo in _candidates(model.repo_id):
            hit = cached_model(repo, cache)
            if hit is not None:
                found.append(hit)
                break
    return found


def find_repo(name: str, cache: str | os.PathLike | None = None) -> CachedModel | None:
    repo_id, _ = resolve(name)
    for repo in _candidates(repo_id):
        hit = cached_model(repo, cache)
        if hit is not None:
            return hit
    return None


def verified(cached: CachedModel, should_stop=None) -> str | None:
    """verify() on every weights file: None if all are good, else the first problem."""
    for weights in cached.weights:
        problem = verify(weights, should_stop)
        if problem:
            return problem
    return None


