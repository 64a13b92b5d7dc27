"""Downloads bounded by what the Hub promised, through real HTTP to a stand-in Hub on
127.0.0.1: a body longer than announced, an oversized config, answers that disagree on
the commit, a redirect loop, a server that stalls, and Stop while nothing arrives."""

import threading

import pytest
from huggingface_hub import constants

from explorer.core.weights import download, hub
from explorer.core.base import state
from explorer.core.base.cancel import Cancelled
from tests.hub_server import serving, tiny_gpt2

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

pytest.importorskip("transformers")

REPO = "openai-community/gpt2"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=5)


@pytest.fixture
def server(tiny, hf_cache, monkeypatch):
    with serving(REPO, tiny[1], monkeypatch) as srv:
        yield srv


def cache_files(hf_cache):
    return sorted(p.name for p in hf_cache.rglob("*") if p.is_file() and ".locks" not in p.parts)


def test_a_body_longer_than_announced_stops_at_the_size_and_is_removed(tiny, server, hf_cache):
    size = len(tiny[1]["model.safetensors"])
    server.state.extra_body = 50 * 1024 * 1024  # 50 MiB more than the Hub's X-Linked-Size
    with pytest.raises(hub.HubError, match=f"sent more than the {size:,} bytes the Hub "
                                           "announced; removed what arrived"):
        download.download("gpt2")
    assert not list(hf_cache.rglob("*.incomplete")) and hub.cached_model(REPO) is None
    assert server.state.served < size + 50 * 1024 * 1024  # the rest was never read
    assert state.default_repo() is None


def test_an_oversized_config_is_refused_before_it_is_stored(tiny, hf_cache, monkeypatch):
    files = dict(tiny[1], **{"config.json": b" " * (17 * 1024 * 1024) + b"{}"})
    with serving(REPO, files, monkeypatch):
        with pytest.raises(hub.HubError, match="its config.json is 18 MB, where a GPT-2's is a "
                                               "few KB; not stored"):
            download.download("gpt2")
    assert not any(name.startswith("config") for name in cache_files(hf_cache))


def test_a_refused_config_does_not_stay_in_the_cache(tiny, hf_cache, monkeypatch):
    files = dict(tiny[1], **{"config.json": b'{"model_type": "bert", "n_embd": 4}'})
    with serving(REPO, files, monkeypatch):
        with pytest.raises(hub.HubError, match="is not a GPT-2 or Llama / Qwen model"):
            download.download("gpt2")
    assert "config.json" not in cache_files(hf_cache)
    assert not [p for p in hf_cache.rglob("*") if p.is_file() and p.stat().st_size == len(
        files["config.json"])]


def test_answers_that_disagree_on_the_commit_are_not_called_done(server, hf_cache):
    server.state.commit_for["config.json"] = "f" * 40
    with pytest.raises(hub.HubError, match="do not agree on the model's commit .*nothing was "
                                           "made the default"):
        download.download("gpt2")
    assert state.default_repo() is None and hub.find_repo("gpt2") is None


def test_a_redirect_loop_is_one_line(server):
    server.state.redirect_loop = True
    with pytest.raises(hub.HubError, match="redirect"):
        download.download("gpt2")


def test_a_server_that_stops_sending_is_one_line_and_the_bytes_stay(server, hf_cache, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 2)
    server.state.bytes_per_second = 16 * 1024 / 3600  # one 16 KiB piece, then an hour's pause
    with pytest.raises(hub.HubUnreachable, match=r"the server sent nothing for 2 s after 0\.0 of"):
        download.download("gpt2")
    assert [p.stat().st_size for p in hf_cache.rglob("*.incomplete")] == [16 * 1024]


def test_stop_takes_effect_while_the_server_sends_nothing(server, hf_cache):
    """The server pauses for an hour after its first piece; Stop is asked while no byte
    arrives, and what arrived stays for the next run."""
    server.state.bytes_per_second = 16 * 1024 / 3600
    stop = threading.Event()
    seen = []

    def progress(p):
        seen.append(p.done_bytes)
        if p.done_bytes >= 16 * 1024:
            stop.set()

    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(pytest.raises(
        Cancelled, download.download, "gpt2", progress=progress, should_stop=stop.is_set)))
    worker.start()
    worker.join(timeout=60)  # a hang guard, not a speed target
    assert not worker.is_alive() and outcome and max(seen) == 16 * 1024
    assert [p.stat().st_size for p in hf_cache.rglob("*.incomplete")] == [16 * 1024]


@pytest.mark.parametrize("revision", ["../../../x", "/etc", "main/../../x", "a b", "x" * 300, ""])
def test_a_revision_that_is_no_ref_name_is_refused_before_any_request(server, revision, capsys):
    """--revision goes into the request's path: one that is no branch, tag or commit name
    is refused in one line, and no request reaches the Hub."""
    from explorer.cli import main
    before = len(server.state.requests)
    with pytest.raises(hub.HubError, match="is not a branch, tag or commit name"):
        download.download("gpt2", revision=revision)
    assert main(["download", "gpt2", "--revision", revision]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a branch, tag or commit name" in err[0]
    assert len(server.state.requests) == before
    download.check_revision("v1.0/release_2")  # a real one passes
