"""A stand-in for the Hugging Face Hub on 127.0.0.1, for tests that download.

It answers the way the Hub does for what huggingface_hub asks of it: ``HEAD``/``GET
/{repo}/resolve/{revision}/{file}`` with ``X-Repo-Commit`` and an ``ETag`` (a git blob
sha1 for small files); for files stored with LFS (the weights), a 302 to a separate
"CDN" server (another port, so another origin, as on the real Hub) with
``X-Linked-Etag`` (the sha256) and ``X-Linked-Size``; the CDN serves byte ranges
(206 + Content-Range). Missing repositories, revisions and files get 404 with the
Hub's ``X-Error-Code``. Knobs for tests: throttle the CDN, cut a transfer after N bytes,
serve one flipped byte, and a log of every request.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"

    def is_lfs(self, name: str) -> bool:
        return name.endswith(".safetensors") or name.endswith(".bin")


@dataclass
class HubState:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range
    bytes_per_second: float | None = None  # throttle the CDN
    cut_after: int | None = None  # close the next CDN transfer after this many body bytes
    flip_byte_at: int | None = None  # serve this byte of LFS files XOR 0xFF
    served: int = 0  # body bytes the CDN sent
    extra_body: int = 0  # the CDN sends this many bytes more than the Hub announced
    commit_for: dict[str, str] = field(default_factory=dict)  # file -> another X-Repo-Commit
    redirect_loop: bool = False  # every resolve answers with a redirect to itself
    blobs: dict[str, bytes] = field(default_factory=dict)  # sha256 -> bytes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_repo(self, repo_id: str, files: dict[str, bytes]) -> Repo:
        repo = Repo(dict(files))
        self.repos[repo_id] = repo
        for name, data in files.items():
            if repo.is_lfs(name):
                self.blobs[hashlib.sha256(data).hexdigest()] = data
        return repo


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


def _hub_handler(state: HubState, cdn_base: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:  # noqa: N802
            self._resolve(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._resolve(body=True)

        def _error(self, code: str, commit: str | None = None) -> None:
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", code)
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _resolve(self, body: bool) -> None:
            with state.lock:
                state.requests.append((self.command, self.path, self.headers.get("Range")))
            m = _RESOLVE.match(self.path.split("?")[0])
            if not m:
                return self._error("RepoNotFound")
            repo = state.repos.get(m["repo"])
            if repo is None:
                return self._error("RepoNotFound")
            if m["rev"] not in ("main", repo.commit):
                return self._error("RevisionNotFound")
            name = m["file"]
            if name not in repo.files:
                return self._error("EntryNotFound", repo.commit)
            if state.redirect_loop:
                self.send_response(302)
                self.send_header("Location", self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = repo.files[name]
            commit = state.commit_for.get(name, repo.commit)
            if repo.is_lfs(name):
                sha = hashlib.sha256(data).hexdigest()
                self.send_response(302)
                self.send_header("Location", f"{cdn_base}/{sha}")
                self.send_header("X-Repo-Commit", commit)
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("ETag", f'"{git_blob_sha1(b"pointer " + sha.encode())}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("ETag", f'"{git_blob_sha1(data)}"')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler


def _cdn_handler(state: HubState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_HEAD(self) -> None:  # noqa: N802
            self._serve(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._serve(body=True)

        def _serve(self, body: bool) -> None:
            rng = self.headers.get("Range")
            with state.lock:
                state.requests.append((f"CDN {self.command}", self.path, rng))
            data = state.blobs.get(self.path.strip("/"))
            if data is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if state.flip_byte_at is not None and state.flip_byte_at < len(data):
                data = bytearray(data)
                data[state.flip_byte_at] ^= 0xFF
                data = bytes(data)
            data = data + b"\0" * state.extra_body
            start = 0
            m = re.fullmatch(r"bytes=(\d+)-", rng or "")
            if m:
                start = int(m.group(1))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if not body:
                return
            cut, state.cut_after = state.cut_after, None
            pos, chunk = start, 16 * 1024
            while pos < len(data):
                piece = data[pos:pos + chunk]
                if cut is not None and pos - start + len(piece) > cut:
                    piece = piece[: max(0, cut - (pos - start))]
                    self.wfile.write(piece)
                    self.wfile.flush()
                    self.close_connection = True
                    state.served += len(piece)
                    self.connection.shutdown(2)
                    return
                try:
                    self.wfile.write(piece)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                state.served += len(piece)
                pos += len(piece)
                if state.bytes_per_second:
                    time.sleep(len(piece) / state.bytes_per_second)

    return Handler


def tiny_gpt2(folder, n_embd: int = 32, seed: int = 0, shard: str | None = None):
    """A small GPT-2 saved by transformers as the Hub holds it (config.json and
    safetensors weights, sharded with ``shard``); returns the model and the files' bytes."""
    from pathlib import Path

    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_embd=n_embd, n_layer=2, n_head=4, n_positions=64,
                                  vocab_size=50257)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    files = {p.name: p.read_bytes() for p in Path(folder).iterdir()
             if p.name == "config.json" or p.name.startswith("model")}
    return model, files


class StandInHub:
    """Two servers on 127.0.0.1: the Hub (``url``) and its CDN."""

    def __init__(self) -> None:
        self.state = HubState()
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), _cdn_handler(self.state))
        cdn_base = f"http://127.0.0.1:{self.cdn.server_address[1]}"
        self.hub = ThreadingHTTPServer(("127.0.0.1", 0), _hub_handler(self.state, cdn_base))
        self.url = f"http://127.0.0.1:{self.hub.server_address[1]}"
        for server in (self.cdn, self.hub):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    def cdn_ranges(self) -> list[str | None]:
        return [rng for method, _, rng in self.state.requests if method == "CDN GET"]


@contextlib.contextmanager
def serving(repo: str, files: dict, monkeypatch=None):
    """A StandInHub holding ``repo``'s files, closed afterwards; with ``monkeypatch``,
    HF_ENDPOINT points at it for the test."""
    srv = StandInHub()
    try:
        srv.state.add_repo(repo, files)
        if monkeypatch is not None:
            monkeypatch.setenv("HF_ENDPOINT", srv.url)
        yield srv
    finally:
        srv.close()
