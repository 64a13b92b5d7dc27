"""Downloads from a Hub and the local cache, through huggingface_hub and real HTTP: a
stand-in Hub on 127.0.0.1 (tests/hub_server.py) serves a tiny GPT-2 repository."""

import hashlib
import os
from pathlib import Path

import pytest
import torch

from explorer.core.weights import download, hub
from explorer.core.base import state
from explorer.core.base.cancel import Cancelled
from explorer.core.sources import ModelSpec, load_default_model, open_model
from tests.hub_server import serving, tiny_gpt2

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

transformers = pytest.importorskip("transformers")

REPO = "openai-community/gpt2"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=3)


@pytest.fixture
def server(tiny, hf_cache, monkeypatch):
    with serving(REPO, tiny[1], monkeypatch) as srv:
        yield srv


def weights_sha(tiny) -> str:
    return hashlib.sha256(tiny[1]["model.safetensors"]).hexdigest()


def test_a_download_lands_in_the_standard_cache_and_becomes_the_default(tiny, server, hf_cache):
    seen = []
    result = download.download("gpt2", progress=seen.append)
    sha = weights_sha(tiny)
    storage = hf_cache / "models--openai-community--gpt2"
    commit = server.state.repos[REPO].commit
    assert (storage / "refs" / "main").read_text() == commit
    pointer = storage / "snapshots" / commit / "model.safetensors"
    assert pointer.is_symlink() and pointer.resolve() == (storage / "blobs" / sha).resolve()
    assert result.folder == pointer.parent and result.fetched_bytes == len(tiny[1]["model.safetensors"])
    # the library sees the same cache: what transformers would find
    from huggingface_hub import try_to_load_from_cache
    assert Path(try_to_load_from_cache(REPO, "model.safetensors", cache_dir=hf_cache)) == pointer
    assert not list((storage / "blobs").glob("*.incomplete"))
    assert seen[-1].phase == "done" and seen[-1].done_bytes == seen[-1].total_bytes
    assert state.default_repo() == REPO
    # offline now: the default model is that GPT-2, with no request to the hub
    before = len(server.state.requests)
    loaded = load_default_model()
    assert len(server.state.requests) == before
    assert loaded.trained and loaded.source == "hf-cache" and REPO in loaded.label
    n = tiny[0].num_parameters()  # transformers' count, the tied head once
    assert loaded.size == f"2 blocks · 32 wide · 4 heads · {n / 1e6:.1f}M parameters" == (
        "2 blocks · 32 wide · 4 heads · 1.6M parameters")
    ids = torch.tensor([[6109, 3626, 6100, 345]])
    with torch.no_grad():
        diff = (loaded.model(ids) - tiny[0](ids).logits).abs().max().item()
    assert diff <= 1e-4


def test_a_second_run_does_nothing(server):
    download.download("gpt2")
    gets = len(server.cdn_ranges())
    again = download.download("openai-community/gpt2")
    assert again.already_complete and len(server.cdn_ranges()) == gets == 1


def test_a_dropped_connection_is_resumed_with_a_range_request(tiny, server, hf_cache):
    server.state.cut_after = 2_500_000
    download.download("gpt2")
    assert server.cdn_ranges() == [None, "bytes=2500000-"]  # every byte that arrived kept
    blob = hf_cache / "models--openai-community--gpt2" / "blobs" / weights_sha(tiny)
    assert blob.read_bytes() == tiny[1]["model.safetensors"]


def test_a_stopped_download_resumes_where_it_stopped(tiny, server, hf_cache):
    server.state.bytes_per_second = 20e6
    total = len(tiny[1]["model.safetensors"])
    with pytest.raises(Cancelled):
        download.download("gpt2", progress=lambda p: None,
                     should_stop=lambda: server.state.served > 2_000_000)
    partial = hf_cache / "models--openai-community--gpt2" / "blobs" / (weights_sha(tiny) + ".incomplete")
    kept = partial.stat().st_size
    assert 1_000_000 < kept < total and download.partial_bytes("gpt2") == kept
    assert hub.cached_model(REPO) is None and state.default_repo() is None
    result = download.download("gpt2")
    assert server.cdn_ranges()[-1] == f"bytes={kept}-"
    assert result.fetched_bytes == total - kept and not partial.exists()
    assert hub.cached_model(REPO) is not None


def test_a_flipped_byte_is_refused_and_removed(tiny, server, hf_cache):
    server.state.flip_byte_at = 123_456
    with pytest.raises(hub.HubError, match="do not match the Hub's sha256.*removed them"):
        download.download("gpt2")
    storage = hf_cache / "models--openai-community--gpt2"
    left = [p.name for p in (storage / "blobs").iterdir()]
    assert weights_sha(tiny) not in left and not [n for n in left if "incomplete" in n]
    assert left == [hashlib.sha1(b"blob %d\0" % len(tiny[1]["config.json"])
                                 + tiny[1]["config.json"]).hexdigest()]  # the config stays
    assert hub.cached_model(REPO) is None and state.default_repo() is None
    assert not load_default_model().trained  # the corrupt file never becomes the default


def test_a_file_corrupted_in_the_cache_is_refused_removed_and_said(tiny, server, hf_cache):
    result = download.download("gpt2")
    blob = (result.folder / "model.safetensors").resolve()
    raw = bytearray(blob.read_bytes())
    raw[1000] ^= 1
    os.chmod(blob, 0o644)
    blob.write_bytes(bytes(raw))
    loaded = load_default_model()
    assert not loaded.trained
    assert any("corrupt" in n and "removed it from the cache" in n for n in loaded.notices)
    assert not blob.exists() and hub.cached_model(REPO) is None
    with pytest.raises(ValueError, match="not in the Hugging Face cache"):
        open_model(ModelSpec.parse("hf:gpt2"))
    download.download("gpt2")  # and a new download repairs it
    assert load_default_model().trained


def test_a_sharded_repository_downloads_every_shard(tmp_path, hf_cache, monkeypatch):
    model, files = tiny_gpt2(tmp_path, shard="2MB")
    names = sorted(files)
    assert "model.safetensors.index.json" in names and len([n for n in names if "-of-" in n]) >= 2
    with serving("someone/tiny-gpt2", files, monkeypatch) as srv:
        result = download.download("someone/tiny-gpt2")
        assert len(srv.cdn_ranges()) == len([n for n in names if "-of-" in n])
    loaded = open_model(ModelSpec.parse("hf:someone/tiny-gpt2"))
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert (loaded.model(ids) - model(ids).logits).abs().max().item() <= 1e-4
    assert load_default_model().label == loaded.label  # the last download is the default
    assert result.total_bytes == sum(len((tmp_path / n).read_bytes()) for n in names if "-of-" in n)


def test_missing_repositories_and_files_say_so(server):
    with pytest.raises(hub.HubError, match="repository someone/nothing not found on http://127"):
        download.download("someone/nothing")
    server.state.add_repo("someone/no-weights", {"config.json": b"{}"})
    with pytest.raises(hub.HubError, match="lacks a file the explorer needs"):
        download.download("someone/no-weights")
    with pytest.raises(hub.HubError, match="neither a GPT-2 size"):
        download.download("gpt3")


def test_a_repository_that_is_not_gpt2_is_refused(tiny, server):
    server.state.add_repo("someone/bert", {"config.json": b'{"model_type": "bert"}',
                                           "model.safetensors": tiny[1]["model.safetensors"]})
    with pytest.raises(hub.HubError, match="not a GPT-2 or Llama / Qwen model.*'bert'"):
        download.download("someone/bert")


def test_an_unreachable_hub_is_one_line(hf_cache, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(hub.HubUnreachable, match=r"cannot reach the Hugging Face Hub at "
                                                 r"http://127\.0\.0\.1:9 .*no network"):
        download.download("gpt2")


def test_offline_mode_switches_downloads_off(hf_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubError, match="HF_HUB_OFFLINE"):
        download.download("gpt2")


def test_the_download_sizes_are_the_hubs():
    """The sizes the Hub's pages show for model.safetensors (548 MB, 1.52 GB, 3.25 GB,
    6.43 GB): float32 weights plus each layer's 1024 x 1024 mask, as stored there."""
    sizes = {m.name: m.download_bytes for m in hub.GPT2_MODELS}
    assert f"{sizes['gpt2'] / 1e6:.0f} MB" == "548 MB"
    assert [f"{sizes[n] / 1e9:.2f}" for n in ("gpt2-medium", "gpt2-large", "gpt2-xl")] == [
        "1.52", "3.25", "6.43"]


# --- the cache, without a download --------------------------------------------------------

def _cache_by_hand(root: Path, repo="models--openai-community--gpt2"):
    """A snapshot as older tools left it: plain files, no blobs to check against."""
    snap = root / repo / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    tiny_gpt2(snap)
    (root / repo / "refs").mkdir(parents=True)
    (root / repo / "refs" / "main").write_text("0123abc")
    return snap


@pytest.mark.parametrize("repo", ["models--openai-community--gpt2", "models--gpt2"])
def test_the_cache_is_found_without_network(hf_cache, repo):
    snap = _cache_by_hand(hf_cache, repo)
    (hf_cache / "models--gpt2-medium" / "snapshots" / "x").mkdir(parents=True)  # no weights
    found = hub.find_cached()
    assert [(m.name, m.folder) for m in found] == [("gpt2", snap)]


def test_hf_home_decides_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    _cache_by_hand(tmp_path / "hub")
    assert [m.name for m in hub.find_cached()] == ["gpt2"]


def test_a_malformed_shard_index_in_the_cache_is_skipped(hf_cache):
    snap = _cache_by_hand(hf_cache)
    (snap / "model.safetensors").unlink()
    (snap / "model.safetensors.index.json").write_text('{"weight_map": {"a": "../../etc/passwd"}}')
    assert hub.find_cached() == []
    loaded = load_default_model()
    assert not loaded.trained and any("no trained GPT-2" in n for n in loaded.notices)


def test_open_model_takes_hf_names_from_the_cache(hf_cache):
    _cache_by_hand(hf_cache)
    loaded = open_model(ModelSpec.parse("hf:gpt2"))
    assert loaded.source == "hf-cache" and loaded.config.emb_dim == 32
    with pytest.raises(ValueError, match="not in the Hugging Face cache.*download gpt2-xl"):
        open_model(ModelSpec.parse("hf:gpt2-xl"))
    with pytest.raises(ValueError, match="either"):
        ModelSpec(checkpoint="x.bin", preset="tiny")


@pytest.mark.parametrize("damage", ["dangling link", "link loop", "refs not UTF-8", "folder as file"])
def test_a_damaged_cache_entry_falls_back_to_the_default(hf_cache, damage):
    snap = _cache_by_hand(hf_cache)
    weights = snap / "model.safetensors"
    if damage == "dangling link":
        weights.unlink()
        weights.symlink_to(snap / "gone.safetensors")
    elif damage == "link loop":
        weights.unlink()
        weights.symlink_to(weights)
    elif damage == "refs not UTF-8":
        (hf_cache / "models--openai-community--gpt2" / "refs" / "main").write_bytes(b"\xff\xfe")
    else:
        weights.unlink()
        weights.mkdir()
    assert hub.find_cached() == []
    loaded = load_default_model()
    assert not loaded.trained and any("no trained GPT-2" in n for n in loaded.notices)



def test_a_llama_repository_downloads_with_its_tokenizer_and_opens_as_transformers_runs_it(
        tmp_path, hf_cache, monkeypatch):
    """A Qwen3 repository as the Hub holds it (weights, config.json, tokenizer.json,
    generation_config.json): downloaded through the stand-in Hub, then opened as hf:REPO
    from the cache: its own tokenizer, its end of text, and transformers' logits."""
    import torch

    from explorer.core.sources import ModelSpec, open_model
    from explorer.core.weights.download import download
    from tests.core.gpt.test_llama import hf_model
    from tests.llama_folder import write_tokenizer
    theirs = hf_model("qwen3-qk-norm-head-dim")
    theirs.generation_config.eos_token_id = write_tokenizer(tmp_path)
    theirs.save_pretrained(tmp_path)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert {"tokenizer.json", "generation_config.json", "config.json", "model.safetensors"} <= set(files)
    with serving("someone/tiny-qwen3", files, monkeypatch):
        result = download("someone/tiny-qwen3")
    assert (result.folder / "tokenizer.json").is_file()
    loaded = open_model(ModelSpec.parse("hf:someone/tiny-qwen3"))
    assert loaded.config.family.name == "llama" and loaded.config.qk_norm
    assert "Qwen3 (tokenizer.json)" == loaded.tokenizer.name
    ids = loaded.tokenizer.encode("I had always thought Jack Gisburn")
    assert loaded.tokenizer.decode(ids) == "I had always thought Jack Gisburn"
    assert loaded.tokenizer.eot_id == theirs.generation_config.eos_token_id
    assert max(ids) < 320 and len(ids) < len("I had always thought Jack Gisburn")
    with torch.no_grad():
        got = loaded.model(torch.tensor([ids]))
        want = theirs(torch.tensor([ids])).logits
    assert (got - want).abs().max() <= 1e-5


@pytest.mark.parametrize("family,module,case", [("olmo", "test_olmo", "olmo3-sliding"),
                                                 ("gemma3", "test_gemma3", "sliding-gqa-tied")])
def test_an_olmo_or_gemma_repository_downloads_and_opens_as_transformers_runs_it(
        tmp_path, hf_cache, monkeypatch, family, module, case):
    """OLMo 3 and Gemma 3 repositories through the stand-in Hub: their config.json's
    model type picks the family, and the model opened from the cache runs as theirs."""
    import importlib

    import torch

    from explorer.core.sources import ModelSpec, open_model
    from explorer.core.weights.download import download
    from tests.llama_folder import write_tokenizer
    theirs = importlib.import_module(f"tests.core.gpt.{module}").hf_model(case)
    theirs.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with serving(f"someone/tiny-{family}", files, monkeypatch):
        download(f"someone/tiny-{family}")
    loaded = open_model(ModelSpec.parse(f"hf:someone/tiny-{family}"))
    assert loaded.config.family.name == family and loaded.config.sliding_layers
    ids = torch.randint(0, 320, (1, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, want = loaded.model(ids), theirs(ids).logits
    assert (got - want).abs().max() <= 1e-5


def test_a_llama_repository_without_a_tokenizer_is_refused(tmp_path, hf_cache, monkeypatch):
    from tests.core.gpt.test_llama import hf_model
    hf_model("llama-gqa-untied").save_pretrained(tmp_path)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with serving("someone/no-tokenizer", files, monkeypatch):
        with pytest.raises(hub.HubError, match="someone/no-tokenizer has no tokenizer.json"):
            download.download("someone/no-tokenizer")
