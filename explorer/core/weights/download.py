"""Downloading GPT-2 from the Hugging Face Hub into its standard cache.

Everything goes through ``huggingface_hub``, so the files land where ``transformers`` and
every other tool look, and ``HF_ENDPOINT``, ``HF_HOME``, ``HF_HUB_CACHE``,
``HF_HUB_OFFLINE``, proxies and tokens work as in the rest of that ecosystem. Only what
the explorer needs is fetched: ``config.json`` and the safetensors weights.

The weights are fetched resumably: the library's metadata call gives the file's sha256
(its ETag), size and location; the bytes are streamed with the library's HTTP session
into ``blobs/<sha256>.incomplete``, which a stop, Ctrl+C or a dropped connection leaves
in place for the next run to continue. What the Hub announced bounds what is written: a
body longer than the announced size is an error and its bytes are removed; a server
that stops sending for ``HF_HUB_DOWNLOAD_TIMEOUT`` seconds is one line; Stop is asked
after every network read and at least once a second while none arrives. A finished file
is hashed, and only a file whose sha256 equals the published one is moved into the
cache, where the library links it into the snapshot. Config files are size-checked
before they are stored, and one that is refused is removed from the cache. A download
counts as done only when the model can be found again from the cache.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Callable, Iterator

from ..base import state
from ..base.outputs import shown
from ..base.cancel import Cancelled, check
from .hub import (CONFIG, SHA256_RE, WEIGHTS, WEIGHTS_INDEX, HubError, HubUnreachable, cache_dir,
                  check_environment,
                  endpoint, find_repo, offline, remove_from_cache, resolve, sha256_of, shard_names,
                  verified, verify)
from .transfer import TooLong, stream
from .repo_files import check_config as _check_config
from .repo_files import small_file as _small_file
from .repo_files import tokenizer_files as _tokenizer_files



class Phase(StrEnum):
    """Where a download is: fetching bytes, checking a file, or finished."""
    DOWNLOAD = "download"
    VERIFY = "verify"  # the file's checksum
    DONE = "done"


@dataclass
class DownloadProgress:
    """Where a download is: bytes of all files, speed over the last seconds, time left."""

    phase: Phase
    filename: str
    done_bytes: int
    total_bytes: int
    bytes_per_second: float | None = None
    seconds_left: float | None = None

    def line(self) -> str:
        mb = 1e6
        share = f" ({100 * self.done_bytes / self.total_bytes:.0f}%)" if self.total_bytes else ""
        text = (f"{self.filename}: {self.done_bytes / mb:,.1f} of {self.total_bytes / mb:,.1f} MB"
                f"{share}")
        if self.phase == Phase.VERIFY:
            return f"{self.filename}: checking its sha256…"
        if self.bytes_per_second:
            text += f", {self.bytes_per_second / mb:,.1f} MB/s"
        if self.seconds_left is not None:
            minutes, seconds = divmod(int(round(self.seconds_left)), 60)
            text += f", {minutes}:{seconds:02d} left"
        return text


class _Meter:
    """Counts bytes for the progress callback (at most ten calls a second) and asks
    ``should_stop`` on every network read."""

    def __init__(self, callback, should_stop, total: int, done: int) -> None:
        self.callback, self.should_stop = callback, should_stop
        self.total, self.done = total, done
        self.filename = ""
        self.samples: deque[tuple[float, int]] = deque()
        self.last_call = 0.0

    def add(self, n: int) -> None:
        check(self.should_stop)
        self.done += n
        now = time.monotonic()
        self.samples.append((now, self.done))
        while len(self.samples) > 2 and now - self.samples[0][0] > 5.0:
            self.samples.popleft()
        if now - self.last_call >= 0.1:
            self.report(Phase.DOWNLOAD)

    def report(self, phase: Phase) -> None:
        self.last_call = time.monotonic()
        if self.callback is None:
            return
        speed = left = None
        if len(self.samples) >= 2:
            (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
            if t1 > t0 and b1 > b0:
                speed = (b1 - b0) / (t1 - t0)
                left = max(0.0, (self.total - self.done) / speed)
        self.callback(DownloadProgress(phase, self.filename, self.done, self.total, speed, left))


@dataclass
class DownloadResult:
    repo_id: str
    folder: Path  # the snapshot in the cache
    fetched_bytes: int  # 0 when everything was already there
    total_bytes: int
    notices: list[str] = field(default_factory=list)

    @property
    def already_complete(self) -> bool:
        return self.fetched_bytes == 0


@contextmanager
def _plain_errors(repo_id: str, hub: str) -> Iterator[None]:
    """The library's and the network's exceptions, as one line each."""
    import httpx2
    from huggingface_hub import errors

    try:
        yield
    except (HubError, Cancelled, KeyboardInterrupt):
        raise
    except errors.GatedRepoError:
        raise HubError(f"{repo_id} is gated on {hub}: accept its terms on the website and log "
                       "in (huggingface-cli login)") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"repository {repo_id} not found on {hub} (or it is private)") from None
    except errors.RevisionNotFoundError:
        raise HubError(f"{repo_id} has no such revision on {hub}") from None
    except errors.RemoteEntryNotFoundError as exc:
        what = str(exc).split("for url:")[-1].strip().rstrip(".") if "for url:" in str(exc) else ""
        raise HubError(f"{repo_id} on {hub} lacks a file the explorer needs"
                       + (f" ({what.rsplit('/', 1)[-1]})" if what else "")) from None
    except errors.OfflineModeIsEnabled:
        raise HubError("HF_HUB_OFFLINE is set: downloads are switched off") from None
    except errors.LocalEntryNotFoundError:
        raise HubUnreachable(f"cannot reach the Hugging Face Hub at {hub} (no network?) and "
                             "the files are not in the cache") from None
    except errors.FileMetadataError as exc:
        raise HubError(f"{hub} does not answer like the Hugging Face Hub "
                       f"({str(exc).splitlines()[0]})") from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise HubError(f"the Hub at {hub} answered HTTP {status} for {repo_id}; try again "
                       "later") from None
    except httpx2.ProxyError as exc:
        raise HubError(f"the proxy refused the connection to {hub} ({exc})") from None
    except httpx2.TransportError as exc:
        reason = str(exc) or type(exc).__name__
        raise HubUnreachable(f"cannot reach the Hugging Face Hub at {hub} ({reason}): no "
                             "network, or a proxy or firewall in the way?") from None
    except httpx2.TooManyRedirects:
        raise HubError(f"{hub} redirects without end (a redirect loop): not the Hugging Face "
                       "Hub, or a proxy in the way") from None
    except httpx2.HTTPError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HubError(f"the exchange with {hub} failed ({reason})") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", -1)):
            raise HubError(f"no room to write {repo_id} ({exc.strerror}: the disk is full or "
                           "a size limit was reached); free some space and run it again, it "
                           "resumes") from None
        raise HubError(f"downloading {repo_id} failed: {exc}") from None


def _metadata(repo_id: str, filename: str, revision: str, hub: str, headers: dict):
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=hub)
    meta = get_hf_file_metadata(url, headers=headers)
    if not meta.commit_hash or not meta.etag:
        raise HubError(f"{hub} does not answer like the Hugging Face Hub (no commit or ETag "
                       f"for {filename})")
    if not SHA256_RE.fullmatch(meta.etag):
        raise HubError(f"{repo_id}: the Hub publishes no sha256 for {filename} (ETag "
                       f"{meta.etag!r}), so it cannot be checked; not used")
    if meta.size is None:
        raise HubError(f"{repo_id}: the Hub gives no size for {filename}")
    return url, meta


def download(name: str, progress: Callable[[DownloadProgress], None] | None = None,
             should_stop: Callable[[], bool] | None = None, *, revision: str = "main",
             cache: str | os.PathLike | None = None, hub: str | None = None,
             make_default: bool = True) -> DownloadResult:
    """Fetch config.json and the safetensors weights of a GPT-2 (a size name or a repo
    id) into the Hugging Face cache; resume what an earlier run left; check every
    weights file's sha256. On success, the downloaded model becomes the default."""
    check_environment()  # before the library reads it
    check_revision(revision)  # before the network: it goes into the request's path
    from huggingface_hub import errors
    from huggingface_hub.file_download import repo_folder_name
    from huggingface_hub.utils import build_hf_headers

    repo_id, _ = resolve(name)
    root = Path(cache) if cache else cache_dir()
    hub = (hub or endpoint()).rstrip("/")
    if offline():
        raise HubError("HF_HUB_OFFLINE is set: downloads are switched off (unset it to download)")
    headers = build_hf_headers()
    notices: list[str] = []
    try:
        with _plain_errors(repo_id, hub):
            try:
                files = [(WEIGHTS, *_metadata(repo_id, WEIGHTS, revision, hub, headers))]
            except errors.RemoteEntryNotFoundError:  # no single file: a sharded checkpoint?
                index = _small_file(repo_id, WEIGHTS_INDEX, revision, root, hub, headers)
                with _removed_if_refused(index):
                    names = shard_names(index)
                files = [(n, *_metadata(repo_id, n, revision, hub, headers)) for n in names]
            commit = files[0][2].commit_hash
            config = _small_file(repo_id, CONFIG, commit, root, hub, headers)
            with _removed_if_refused(config):
                family = _check_config(config, repo_id)
            if family.files.own_tokenizer:  # its own tokenizer, and the end of its text
                _tokenizer_files(repo_id, commit, root, hub, headers)
            storage = root / repo_folder_name(repo_id=repo_id, repo_type="model")
            total = sum(meta.size for _, _, meta in files)
            meter = _Meter(progress, should_stop, total, 0)
            fetched = 0
            for filename, url, meta in files:
                meter.filename = filename
                fetched += _fetch(repo_id, filename, url, meta, storage, revision, root, hub,
                                  headers, meter, notices)
            meter.report(Phase.DONE)
            _found_again(repo_id, root, files)
    except HubUnreachable as exc:
        # offline, but a complete, checked copy is already here: nothing to do
        cached = find_repo(repo_id, root)
        if cached is None or verified(cached, should_stop) is not None:
            raise
        if make_default:
            state.set_default_repo(cached.repo_id)
        return DownloadResult(cached.repo_id, cached.folder, 0,
                              sum(w.stat().st_size for w in cached.weights),
                              [f"{exc}; the copy in the cache is complete"])
    if make_default:
        state.set_default_repo(repo_id)
    return DownloadResult(repo_id, config.parent, fetched, total, notices)


@contextmanager
def _removed_if_refused(path: Path) -> Iterator[None]:
    """A file the checks in the block refuse does not stay in the cache."""
    try:
        yield
    except HubError:
        try:
            blob = path.resolve(strict=True)
        except (OSError, RuntimeError):
            blob = path
        remove_from_cache(blob, path)
        raise


def _found_again(repo_id: str, root: Path, files: list) -> None:
    """The download is done only if the cache lookup that the next start uses finds it:
    answers naming different commits leave files no lookup of 'main' finds."""
    cached = find_repo(repo_id, root)
    wanted = {name for name, _, _ in files}
    if cached is None or {w.name for w in cached.weights} != wanted:
        commits = sorted({meta.commit_hash for _, _, meta in files})
        raise HubError(f"{repo_id}: the Hub's answers do not agree on the model's commit "
                       f"({', '.join(c[:8] for c in commits)} and another), so the files "
                       "cannot be found again from the cache; nothing was made the default. "
                       "Try again later")


def _fetch(repo_id: str, filename: str, url: str, meta, storage: Path, revision: str,
           root: Path, hub: str, headers: dict, meter: _Meter, notices: list[str]) -> int:
    """One weights file into the cache, resumed if part of it is there; returns the
    bytes fetched now."""
    from urllib.parse import urlparse

    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import WeakFileLock

    sha, size = meta.etag, int(meta.size)
    blob = storage / "blobs" / sha
    pointer = storage / "snapshots" / meta.commit_hash / filename
    if blob.is_file():
        meter.report(Phase.VERIFY)
        problem = verify(pointer if pointer.exists() else blob, meter.should_stop)
        if problem is None:
            meter.done += size
            if not pointer.exists():
                hf_hub_download(repo_id, filename, revision=revision, cache_dir=str(root),
                                endpoint=hub)
            return 0
        notices.append(problem)
        remove_from_cache(blob, pointer)
    blob.parent.mkdir(parents=True, exist_ok=True)
    partial = blob.with_name(sha + ".incomplete")
    lock = root / ".locks" / storage.name / f"{sha}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    get_headers = dict(headers)
    if urlparse(meta.location).netloc != urlparse(url).netloc:
        get_headers.pop("authorization", None)  # never send a token to a CDN
    with WeakFileLock(lock):
        resume = partial.stat().st_size if partial.exists() else 0
        if resume > size:
            resume = 0  # not this file's bytes: start again
        free = shutil.disk_usage(blob.parent).free
        if size - resume > free:
            raise HubError(f"no room to write {repo_id}: {filename} needs "
                           f"{(size - resume) / 1e6:,.0f} MB more in {blob.parent}, only "
                           f"{free / 1e6:,.0f} MB are free")
        meter.done += resume
        try:
            with open(partial, "r+b" if resume else "wb") as fh:
                fh.seek(resume)
                fh.truncate()
                stream(meta.location, fh, resume, size, get_headers, meter, filename)
        except TooLong:
            partial.unlink(missing_ok=True)  # not the announced file: nothing of it is kept
            raise
        meter.report(Phase.DOWNLOAD)  # the file's last bytes, whatever the throttle said
        _checked_into_place(partial, blob, sha, f"{filename} of {repo_id}", meter)
        state.mark_verified(blob, f"sha256:{sha}")
    # the library links the blob into the snapshot and records the revision's commit
    hf_hub_download(repo_id, filename, revision=revision, cache_dir=str(root), endpoint=hub)
    return size - resume


def _checked_into_place(partial: Path, blob: Path, sha: str, what: str, meter: _Meter) -> None:
    """The finished bytes become the blob only if their sha256 is the Hub's; otherwise
    they are removed."""
    meter.report(Phase.VERIFY)
    actual = sha256_of(partial, meter.should_stop)
    if actual != sha:
        partial.unlink()
        raise HubError(f"{what}: the downloaded bytes do not match the Hub's sha256 "
                       f"({actual[:12]}… instead of {sha[:12]}…); removed them from the cache, "
                       "run the download again")
    os.replace(partial, blob)


def partial_bytes(name: str, cache: str | os.PathLike | None = None) -> int:
    """Bytes of unfinished weights downloads of this model in the cache (to resume)."""
    check_environment()  # before the library reads it
    from huggingface_hub.file_download import repo_folder_name

    repo_id, _ = resolve(name)
    blobs = (Path(cache) if cache else cache_dir()) / repo_folder_name(
        repo_id=repo_id, repo_type="model") / "blobs"
    try:
        return sum(p.stat().st_size for p in blobs.glob("*.incomplete"))
    except OSError:
        return 0


REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,199}")


def check_revision(revision: str) -> str:
    """A branch, tag or commit as the Hub names them: letters, digits, ``_ . - /``, no
    ``..`` and no leading ``/`` (it is put into the request's path)."""
    if not isinstance(revision, str) or not REVISION.fullmatch(revision) or ".." in revision \
            or "//" in revision or revision.endswith("/"):
        raise HubError(f"--revision '{shown(str(revision))[:60]}' is not a branch, tag or "
                       "commit name (letters, digits, _ . - /, no '..')")
    return revision

