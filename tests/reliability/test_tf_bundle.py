"""OpenAI's TensorFlow checkpoint reader at its boundaries: files that are not regular
files, indexes whose cost would grow faster than their size, Stop between blocks, and a
verified-checksum record that covers the index as well as the data."""

import os
import shutil
from pathlib import Path

import pytest
import torch

from explorer.core.weights import tf_bundle
from explorer.core.base.cancel import Cancelled
from explorer.core.weights.checkpoints import CheckpointError, load_checkpoint
from explorer.core.weights.crc32c import unmask
from explorer.core.weights.tf_bundle import BundleError, open_bundle
from tests.data import bundle_writer as bw

FOLDER = Path(__file__).resolve().parents[1] / "data" / "openai-tf-tiny"


@pytest.fixture
def folder(tmp_path, hf_cache):
    copy = tmp_path / "124M"
    shutil.copytree(FOLDER, copy)
    return copy


def rewrite_index(folder: Path, change=None, **table_args) -> None:
    """The index again, by bundle_writer, from the TensorFlow-written one's entries,
    with ``change(entries)`` applied first."""
    original = open_bundle(FOLDER)
    entries = {name: (e.dtype, e.shape, e.offset, e.size, unmask(e.crc32c))
               for name, e in original.entries.items()}
    if change:
        change(entries)
    items = [(b"", bw.header_proto())] + [
        (name.encode(), bw.entry_proto(*entries[name])) for name in sorted(entries)]
    (folder / "model.ckpt.index").write_bytes(bw.table([items[:20], items[20:]], **table_args))


def test_the_writer_makes_an_index_read_as_tensorflows_own(folder):
    rewrite_index(folder)
    assert (folder / "model.ckpt.index").read_bytes() != (FOLDER / "model.ckpt.index").read_bytes()
    ours, theirs = open_bundle(folder), open_bundle(FOLDER)
    assert ours.entries == {k: v for k, v in theirs.entries.items()} and len(ours.entries) == 40
    a, b = load_checkpoint(folder).model, load_checkpoint(FOLDER).model
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("which", ["model.ckpt.index", "model.ckpt.data-00000-of-00001"])
def test_a_fifo_in_the_checkpoint_is_refused_without_opening_it(folder, which):
    (folder / which).unlink()
    os.mkfifo(folder / which)
    with pytest.raises(BundleError, match=r"a FIFO \(named pipe\), not a regular file"):
        open_bundle(folder)
    with pytest.raises(CheckpointError, match="FIFO"):
        load_checkpoint(folder)


@pytest.mark.slow
def test_keys_that_grow_by_a_byte_an_entry_are_refused_at_the_key_limit(folder):
    items = [(b"", bw.header_proto())] + [(b"k" * n, b"") for n in range(1, 6000)]
    (folder / "model.ckpt.index").write_bytes(bw.table([items]))
    with pytest.raises(BundleError, match=r"a key of [0-9,]+ bytes .*at most 4,096"):
        open_bundle(folder)


def test_many_handles_to_one_block_are_refused(folder):
    rewrite_index(folder, repeat_first=50)
    with pytest.raises(BundleError, match=r"names the block at byte 0 twice"):
        open_bundle(folder)


def test_stop_is_asked_between_blocks(folder):
    rewrite_index(folder)
    asked = []
    with pytest.raises(Cancelled):
        open_bundle(folder, should_stop=lambda: asked.append(1) or True)
    assert asked == [1]


def test_a_load_parses_the_index_once(folder, monkeypatch):
    calls = []
    real = tf_bundle._table
    monkeypatch.setattr(tf_bundle, "_table", lambda *a: calls.append(1) or real(*a))
    load_checkpoint(folder)
    assert calls == [1]


def test_a_changed_index_is_verified_again(folder):
    """Verified once, the data is not checksummed again; an index that points two
    tensors at each other's bytes is a new pair of files and fails its checks."""
    load_checkpoint(folder)
    load_checkpoint(folder)  # from the record: the same files, not read twice over

    def swap(entries):
        g, b = entries["model/h0/ln_1/g"], entries["model/h0/ln_1/b"]
        entries["model/h0/ln_1/g"] = g[:2] + (b[2],) + g[3:]
        entries["model/h0/ln_1/b"] = b[:2] + (g[2],) + b[3:]

    rewrite_index(folder, swap)
    with pytest.raises(CheckpointError, match="model/h0/ln_1/[gb]' do not match their checksum"):
        load_checkpoint(folder)
