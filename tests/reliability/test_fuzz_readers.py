"""Fuzzing the readers with hypothesis: output paths, JSON of any depth and number shape,
tensors of any rank under GPT-2's names, and damaged TensorFlow bundle indexes — each
ends in a success or the boundary's own one-line error, never another exception."""

import json
import os
import shutil
import unicodedata
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from explorer.core.weights.checkpoints import load_checkpoint
from explorer.core.base.outputs import OutputError, check_output
from explorer.core.weights.tf_bundle import BundleError, open_bundle
from explorer.core.base.validate import MAX_JSON_DEPTH, parse_json
from tests.reliability.test_fuzz import FUZZ, expect_boundary, json_values

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

TF_FOLDER = Path(__file__).resolve().parents[1] / "data" / "openai-tf-tiny"


@FUZZ
@given(kind=st.sampled_from(["missing", "file", "folder", "fifo", "no-parent", "link-to-fifo",
                             "device", "empty"]),
       # "." and ".." name the folder itself, "pipe" the fifo a link points to: not a
       # file the test could make under that name
       name=st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
                    min_size=1, max_size=20).filter(lambda n: n not in (".", "..", "pipe")),
       suffix=st.sampled_from(["", ".png", ".npz", ".csv"]))
@example(kind="fifo", name="x\n", suffix="")  # a newline in the name: still one line
@example(kind="folder", name="\r", suffix=".png")
def test_output_paths(tmp_path_factory, kind, name, suffix):
    base = tmp_path_factory.mktemp("out")
    target = base / name
    if kind == "file":
        target.write_text("old")
    elif kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "no-parent":
        target = base / "no" / "such" / name
    elif kind == "link-to-fifo":
        os.mkfifo(base / "pipe")
        target.symlink_to(base / "pipe")
    elif kind == "device":
        target = Path("/dev/null")
    elif kind == "empty":
        target = Path("   ")
    written = target  # what will be written: the suffix added when the name lacks it
    if suffix and not target.name.endswith(suffix):
        written = target.with_name(target.name + suffix)
    usable = (str(target).strip() != "" and not target.is_dir() and written.parent.is_dir()
              and (not written.exists() or written.is_file())
              and (not target.exists() or target.is_file())  # a FIFO given, .png to add: refused
              and not any(unicodedata.category(c) == "Cc" for c in str(target)))
    try:
        got = check_output(target, suffix)
    except OutputError as exc:
        assert not usable, exc
        assert str(exc).strip() and "\n" not in str(exc).strip()
        return
    assert usable and got == written


numbers = st.one_of(st.integers(-10**40, 10**40).map(str),
                    st.floats(allow_nan=False, allow_infinity=False).map(repr),
                    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999",
                                     "1" * 400, "0.1e-400", "1E+30"]))


@FUZZ
@given(depth=st.integers(0, 3 * MAX_JSON_DEPTH), number=numbers,
       shape=st.sampled_from(["list", "object", "mixed"]))
@example(depth=100_000, number="1", shape="list")
def test_json_of_any_depth_and_number(depth, number, shape):
    opens = {"list": "[", "object": '{"a":', "mixed": '[{"a":'}[shape]
    closes = {"list": "]", "object": "}", "mixed": "}]"}[shape]
    text = opens * depth + number + closes * depth
    value = expect_boundary(lambda: parse_json(text, "fuzz.json"))
    if value is not None:
        json.dumps(value, allow_nan=False)  # what comes back is finite, plain JSON


GPT2_KEYS = ["h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight",
             "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.bias", "h.0.ln_1.weight", "wte.weight",
             "wpe.weight", "ln_f.bias"]


@pytest.fixture(scope="module")
def hf_state_dict():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=16)
    return {k.removeprefix("transformer."): v for k, v in
            transformers.GPT2LMHeadModel(cfg).state_dict().items()
            if not k.endswith(".attn.bias") and not k.endswith("masked_bias")}


@FUZZ
@given(key=st.sampled_from(GPT2_KEYS),
       shape=st.lists(st.integers(0, 97), min_size=0, max_size=4))
def test_tensors_of_any_rank_under_gpt2_names(tmp_path_factory, hf_state_dict, key, shape):
    sd = dict(hf_state_dict)
    sd[key] = torch.zeros(shape)
    path = tmp_path_factory.mktemp("rank") / "pytorch_model.bin"
    torch.save(sd, path)
    loaded = expect_boundary(lambda: load_checkpoint(path))
    if loaded is not None:  # only the right shape loads
        assert tuple(shape) == tuple(hf_state_dict[key].shape)


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1,
                      max_size=4),
       cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_damaged_tensor_bundle_indexes(tmp_path_factory, flips, cut):
    folder = tmp_path_factory.mktemp("tf") / "124M"
    shutil.copytree(TF_FOLDER, folder)
    index = folder / "model.ckpt.index"
    data = bytearray(index.read_bytes())
    for at, mask in flips:
        data[at % len(data)] ^= mask
    if cut is not None:
        data = data[:cut % (len(data) + 1)]
    index.write_bytes(bytes(data))
    try:
        open_bundle(folder)
    except BundleError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip()


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A small saved run: the prompt pass and two steps of the tiny model."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from tests.core.playground.test_run_file import make_run
    from explorer.core.playground.run_file import save_run

    path = tmp_path_factory.mktemp("run") / "run.gbrun"
    return save_run(path, make_run(build_model(preset("tiny"), seed=2), 2)).read_bytes()


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 255)), min_size=1,
                      max_size=4),
       cut=st.one_of(st.none(), st.integers(0, 10**7)),
       field=st.one_of(st.none(), st.tuples(st.sampled_from(
           ["prompt", "prompt_ids", "settings", "model", "passes", "interventions"]), json_values)))
def test_damaged_run_files(tmp_path_factory, saved_run, flips, cut, field):
    """Bytes flipped, the file cut, or a field of the description replaced by any JSON:
    read whole or refused in one line."""
    import struct

    from explorer.core.playground.run_file import read_run

    data = bytearray(saved_run)
    if field is not None:  # a well-formed file whose description lies
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        run = json.loads(header["__metadata__"]["run"])
        run[field[0]] = field[1]
        header["__metadata__"]["run"] = json.dumps(run)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        data = bytearray(struct.pack("<Q", len(text)) + text + data[8 + n:])
    else:
        for at, mask in flips:
            data[at % len(data)] ^= mask
        if cut is not None:
            data = data[:cut % (len(data) + 1)]
    path = tmp_path_factory.mktemp("run") / "run.gbrun"
    path.write_bytes(bytes(data))
    if field is not None:  # its checksum written again: the description's rules answer
        from explorer.core.playground.run_file import seal
        seal(path)
    expect_boundary(lambda: read_run(path))


@pytest.fixture(scope="module")
def saved_run_with_tensors(tmp_path_factory):
    """A genuine saved run of the tiny model: the prompt pass and two steps, tensors kept."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from tests.core.playground.test_run_file import make_run
    from explorer.core.playground.run_file import save_run

    path = tmp_path_factory.mktemp("run") / "run.gbrun"
    return save_run(path, make_run(build_model(preset("tiny"), seed=2), 2), 10**6)


def _node(run, i, j):
    nodes = run["passes"][i % len(run["passes"])]["nodes"]
    return i % len(run["passes"]), j % len(nodes), nodes[j % len(nodes)]


def _break(rule: str, run: dict, tensors: dict, i: int, j: int, x: int) -> str:
    """Break one rule of docs/RUN_FORMAT.md in pass ``i`` / node ``j`` of a genuine run;
    the words the refusal must say."""
    import math

    from explorer.core.playground.run_checks import SCALARS
    passes = run["passes"]
    step = 1 + i % (len(passes) - 1)  # a generated step
    if rule == "token id":
        passes[i % len(passes)]["ids"][0] = 50257 + x
        return "token ids below 50,257"
    if rule == "probability":
        passes[step]["prob"] = [-1.0 - x, 1.5 + x, float(x) + 1.01][x % 3]
        return "prob must be a probability"
    if rule == "step order":
        passes[step]["step"] = passes[step]["step"] + 1 + x
        return "not the prompt's then steps 0, 1, 2"
    if rule == "foreign block":
        _, _, node = _node(run, i, j)
        node[0] = f"trf_blocks.{2 + x}.att"
        return "a node the saved 2-block model does not have"
    if rule == "shape":
        _, _, node = _node(run, i, j)
        node[1][-1] += 1 + x
        # a node that keeps its tensor: the kept tensor no longer fits the shape it names
        return "the saved model gives" if node[3] is None else "keeps a tensor of shape"
    if rule == "kept shape":
        _, _, node = _node(run, i, j)
        node[3] = [*node[1][:-1], node[1][-1] + 1 + x]
        return "keeps a tensor of shape"
    p, n, node = _node(run, i, j)
    key = f"p{p}.n{n}"
    size = math.prod(node[1])
    if rule == "count":
        tensors[f"{key}.scalars"][SCALARS.index("count")] = [math.nan, -1.0 - x, size - 1][x % 3]
        return "'s count is" if x % 3 < 2 else f"counts {size - 1:,} values; its node has {size:,}"
    if rule == "top_dims":
        tensors[f"{key}.top_dims"][0] = node[1][-1] + x
        return "top_dims must be distinct positions below"
    if rule == "bins":
        tensors[f"{key}.hist"] = torch.zeros(10_001 + x, dtype=torch.int64)
        return "bins; at most 10,000"
    if rule == "settings":
        run["settings"]["temperature"] = -1.0 - x
        return "its generation settings are wrong"
    assert rule == "switch"
    run["interventions_on"] = ["false", 0, None][x % 3]
    return "interventions_on must be true or false"


RULES = ["token id", "probability", "step order", "foreign block", "shape", "kept shape",
         "count", "top_dims", "bins", "settings", "switch"]


@FUZZ
@given(rule=st.sampled_from(RULES), i=st.integers(0, 50), j=st.integers(0, 50),
       x=st.integers(0, 1000))
@example(rule="foreign block", i=0, j=5, x=3)  # the attention pattern's node (4-d) renamed
@example(rule="shape", i=0, j=17, x=0)  # the prompt's pattern given one key more than tokens
def test_each_rule_broken_alone_is_refused_naming_it(tmp_path_factory, saved_run_with_tensors,
                                                      rule, i, j, x):
    """One rule of docs/RUN_FORMAT.md broken at a time, anywhere in a genuine run, its
    checksum written again: refused in one line that names the file and the field."""
    from explorer.core.playground.run_file import RunFileError, read_run
    from tests.core.playground.run_edit import opened, written
    meta, run, tensors = opened(saved_run_with_tensors.read_bytes())  # a path: prints short
    words = _break(rule, run, tensors, i, j, x)
    path = tmp_path_factory.mktemp("run") / "run.gbrun"
    written(path, meta, run, tensors)
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    said = str(caught.value)
    assert words in said and "\n" not in said and said.startswith(str(path)), (rule, said)
