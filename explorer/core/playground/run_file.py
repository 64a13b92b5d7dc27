"""A run saved to one file and read back: the prompt, the model's identity (where it came
from and the sha256 of its weights), the generation settings, the interventions, every
pass (the prompt's and each generated step's: its token, its top candidates, the logits
it was drawn from) and every node's statistics; optionally the tensors in float16 up to
a size the user sets.

Format, version 1: a safetensors file (docs/RUN_FORMAT.md). ``__metadata__`` holds
``format`` ("gpt-block-explorer run"), ``version`` ("1") and ``run``, a JSON object;
the numbers are tensors named ``p{pass}.logits`` and ``p{pass}.n{node}.{field}``. It is
read under the rules for checkpoints: the header is checked entry by entry and the
file's size against memory before anything is allocated, the JSON's depth and numbers
bounded, every field's type, shape and range checked, and nothing in it is executed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from ..base.devices import check_memory
from ..base.outputs import atomic_output
from ..base.validate import parse_json, regular_file
from ..experiments.interventions import MAX_INTERVENTIONS
from ..experiments.interventions import from_dict as intervention_from_dict
from ..gpt.config import GPT2_VOCAB, LIMITS, NORM_POSITIONS, GPTConfig
from ..gpt.nodes import all_hook_names, layer_of, node_for_hook, order_of
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer
from ..run.capture import NodeView
from ..run.generation import MAX_PROMPT_CHARS, RUN_STEPS, GenerationSettings
from ..run.passes import Pass
from ..weights.hf_files import read_safetensors
from .run_agrees import check_agrees
from .run_branches import SavedBranch, branch_entries, saved_branches, shown_line, split_steps
from .run_tokens import recorded_tokenizer, spelled_ids
from .run_pack import check_header, pack_pass, unknown_tensors, unpack_pass
from .run_checks import (CHECKSUM, PLACEHOLDER, RunFileError, check_shape, check_sum, in_words,
                         kept_tensor, node_stats, seal)

FORMAT, VERSION = "gpt-block-explorer run", "2"
BRANCHED = "3"  # version 2 and the lines besides the one shown (run_branches.py)
NO_CONFIG = ("saved without its model's config (an early version 1 file): read as GPT-2's, its "
             "nodes' shapes not checked against a model")
READS = ("1", VERSION, BRANCHED)  # version 1: five tensors a node (docs/RUN_FORMAT.md)
MAX_PASSES = RUN_STEPS + 1  # the prompt's pass and every generated step's
MAX_NODES, MAX_IDS = 10_000, 1_000_000
MAX_FILE_BYTES = 16 * 2**30


@dataclass
class SavedRun:
    prompt: str
    prompt_ids: list[int]
    model: dict  # label, source (a ModelSpec's fields), sha256, config
    settings: GenerationSettings
    passes: list[Pass]  # the prompt pass, then one per generated step
    interventions: list[dict] = field(default_factory=list)
    interventions_on: bool = True
    config: GPTConfig | None = None  # the saved model's, read back (None when not saved)
    notice: str = ""  # what the reader could not check (an older file without a checksum)
    # the model's tokenizer when written; read back, the pieces of the ids the run holds
    tokenizer: Tokenizer = field(default_factory=gpt2_tokenizer, repr=False)
    branches: list[SavedBranch] = field(default_factory=list)  # the other lines
    label: str = "the run"  # the shown line's name, and its place among them all
    shown: int = 0

    def every_pass(self) -> list[Pass]:
        return [*self.passes, *(p for b in self.branches for p in b.passes)]

    @property
    def tokens(self) -> list[int]:
        return [p.token_id for p in self.passes[1:]]


def weights_sha256(model: torch.nn.Module) -> str:
    """The sha256 of every parameter's name, shape, dtype and bytes, in order."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


# ---------------------------------------------------------------------- writing

def save_run(path: str | os.PathLike, run: SavedRun, tensor_bytes: int = 0) -> Path:
    """Write ``run``; node tensors are kept in float16 while they fit ``tensor_bytes``.
    A run whose header the reader would refuse is refused before anything is written."""
    if len(run.prompt) > MAX_PROMPT_CHARS:  # the reader would refuse it
        raise RunFileError(path, f"not saved: the prompt has {len(run.prompt):,} characters; "
                                 f"a run keeps at most {MAX_PROMPT_CHARS:,}")
    tensors, metadata = run_tensors(run, tensor_bytes)
    check_header(path, tensors, metadata)
    from safetensors.torch import save_file

    with atomic_output(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
        seal(Path(tmp))
    return Path(path)


def run_tensors(run: SavedRun, tensor_bytes: int = 0) -> tuple[dict[str, torch.Tensor], dict]:
    """What a run file of ``run`` holds: its tensors and its header's metadata."""
    tensors: dict[str, torch.Tensor] = {}
    passes, names, dtypes = [], {}, {}
    budget = tensor_bytes
    firsts = {len(run.passes) + sum(len(b.passes) for b in run.branches[:n])
              for n in range(len(run.branches))}  # each branch's first pass keeps its ids
    every = run.every_pass()
    for i, p in enumerate(every):
        p.complete()  # statistics left for later are computed now
        packed, budget = pack_pass(i, p, names, dtypes, budget)
        tensors.update(packed)
        if p.next_logits is not None:
            tensors[f"p{i}.logits"] = torch.tensor(np.array(p.next_logits, np.float32))
        d = {"step": p.step, "ids": list(map(int, p.ids)), "token_id": p.token_id,
             "prob": p.prob, "top_ids": list(p.top_ids), "top_probs": list(p.top_probs)}
        if p.whole:  # a step that ran its whole context again (Recompute all)
            d["whole"] = True
        elif i and i not in firsts and p.step is not None and \
                d["ids"] == [*every[i - 1].ids, p.token_id]:
            del d["ids"]  # the pass before's and its own token: the reader makes them again
        passes.append(d)
    meta = {"prompt": run.prompt, "prompt_ids": list(map(int, run.prompt_ids)),
            "model": run.model, "settings": asdict(run.settings),
            "interventions": run.interventions, "interventions_on": run.interventions_on,
            "node_names": list(names), "dtypes": list(dtypes), "passes": passes}
    if run.branches:
        meta.update(label=run.label, shown=run.shown, branches=[
            {"label": b.label, "at": b.at, "passes": len(b.passes)} for b in run.branches])
    if run.tokenizer is not gpt2_tokenizer():  # a vocabulary of its own: its pieces kept
        meta["token_bytes"] = spelled_ids(run)
    return tensors, {"format": FORMAT, "version": BRANCHED if run.branches else VERSION,
                     "run": json.dumps(meta),
                     CHECKSUM: PLACEHOLDER}


# ---------------------------------------------------------------------- reading

def read_run(path: str | os.PathLike) -> SavedRun:
    """The run in ``path``, checked whole; ``RunFileError`` (one line) when anything in
    it is not what the format says."""
    p = regular_file(path)
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise RunFileError(p, f"{size:,} bytes, over the {MAX_FILE_BYTES:,} a run file may have")
    check_memory(3 * size, torch.device("cpu"), f"reading the run file {p.name}")
    try:
        tensors, meta = read_safetensors(p)
    except ValueError as exc:
        raise RunFileError(p, f"not a run file ({str(exc).split(': ', 1)[-1]})") from None
    if meta.get("format") != FORMAT:
        raise RunFileError(p, "not a run file of GPT Block Explorer (no 'format' that says so)")
    if meta.get("version") not in READS:
        raise RunFileError(p, f"run file version {meta.get('version')!r}; this explorer "
                              f"reads versions {' and '.join(READS)}")
    unknown = sorted(set(meta) - {"format", "version", "run", CHECKSUM})
    if unknown:
        raise RunFileError(p, f"damaged: its header names {ascii(unknown[0])[:40]}, which a run "
                              "file does not have")
    notice = check_sum(p, meta)
    run = parse_json(meta.get("run", ""), p, "the run's description")
    try:
        saved = _run(p, run, tensors, meta["version"])
    except RunFileError:
        raise
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, OverflowError) as exc:
        # a field of the wrong kind met on the way (a list as config, a node of 3 fields)
        raise RunFileError(p, f"damaged: {in_words(exc)}") from None
    if saved.config is None:  # a version 1 file of the earliest explorers
        notice = "; ".join(filter(None, (notice, NO_CONFIG)))
    saved.notice = notice
    return saved


def _ids(value, what: str, limit: int = MAX_IDS, below: int = 2**31) -> list[int]:
    """Whole numbers in [0, below): token ids (below the vocabulary's size) or lengths."""
    if not isinstance(value, list) or len(value) > limit or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < below for i in value):
        raise TypeError(f"{what} must be a list of " + (
            f"token ids below {below:,} (the vocabulary)" if below < 2**31 else "whole numbers"))
    return value


def _vocabulary(model: dict, own: bool = False) -> int:
    """The saved model's vocabulary size: GPT-2's 50,257 when the file does not say; a
    padded one may be larger (its logits are that long, its token ids GPT-2's). A model
    with a tokenizer of its own (``own``) may have fewer."""
    size, most = (model.get("config") or {}).get("vocab_size", GPT2_VOCAB), LIMITS["vocab_size"]
    least = 1 if own else GPT2_VOCAB
    if not isinstance(size, int) or isinstance(size, bool) or not least <= size <= most:
        raise TypeError(f"the model's vocab_size must be {least:,} to {most:,}")
    return size


def _unpacked(path: Path, run: dict, tensors: dict, version: str):
    """Each pass's description with its nodes, and its tensors under version 1's names."""
    if version == "1":
        yield from ((d, tensors) for d in run["passes"])
        return
    names, dtypes = run["node_names"], run["dtypes"]
    if not all(isinstance(x, list) and len(x) <= MAX_NODES and all(isinstance(n, str) for n in x)
               for x in (names, dtypes)):
        raise TypeError("node_names and dtypes must be lists of text")
    stray = unknown_tensors(tensors, len(run["passes"]))
    if stray:
        raise RunFileError(path, f"holds a tensor {stray[0][:60]!r}, which the format does not name")
    ids = []
    for i, d in enumerate(run["passes"]):
        if not isinstance(d, dict):
            raise TypeError(f"pass {i} must be an object")
        # a step's ids left out: the pass before's and its own token
        ids = [*ids, d["token_id"]] if i and "ids" not in d else d["ids"]
        nodes, own = unpack_pass(path, i, tensors, names, dtypes)
        yield {**d, "ids": ids, "nodes": nodes}, own


def _run(path: Path, run, tensors: dict[str, torch.Tensor], version: str = VERSION) -> SavedRun:
    if not isinstance(run, dict) or not isinstance(run.get("passes"), list):
        raise TypeError("the description has no list of passes")
    entries = branch_entries(run) if version == BRANCHED else []
    if not 1 <= len(run["passes"]) <= MAX_PASSES * (1 + len(entries)):
        raise RunFileError(path, f"{len(run['passes']):,} passes; a run has 1 to {MAX_PASSES:,}"
                                 + (" a line" if entries else ""))
    model = run["model"]
    if not isinstance(model, dict) or not isinstance(model.get("sha256", ""), str):
        raise TypeError("model must be an object with a sha256")
    norm = (model.get("config") or {}).get("norm_position", "pre")
    if norm not in NORM_POSITIONS:
        raise TypeError("the model's norm position must be pre or post")
    own = "token_bytes" in run  # a vocabulary of its own, not GPT-2's
    vocab = _vocabulary(model, own)
    s = _settings(path, run["settings"], vocab)
    cfg = _config(path, model)
    if cfg is None and version != "1":  # no node, shape or id could be checked without it
        raise RunFileError(path, "its model has no config: its nodes cannot be checked")
    if cfg is not None:
        norm = order_of(cfg)  # its own block's nodes (a Llama block's, say)
    tokenizer = recorded_tokenizer(run["token_bytes"], vocab, MAX_IDS) if own else gpt2_tokenizer()
    below = vocab  # every row of the model is a token it can choose
    steps = [d.get("step", "") if isinstance(d, dict) else "" for d in run["passes"]]
    own = split_steps(path, entries, steps, MAX_PASSES)
    passes = [_pass(path, i, d, own, norm, vocab, cfg, tokenizer, below)
              for i, (d, own) in enumerate(_unpacked(path, run, tensors, version))]
    if cfg is not None:  # every node one of this model's (block 40 of a 2-block model: no)
        known = set(all_hook_names(cfg, inside=True))  # opened attention is saved too
        for i, p in enumerate(passes):
            stray = sorted(set(p.views) - known)
            if stray:
                raise RunFileError(path, f"pass {i} names {stray[0][:60]!r}, a node the "
                                         f"saved {cfg.n_layers}-block model does not have")
    interventions, on = _interventions(path, run, cfg)
    if not isinstance(run["prompt"], str) or len(run["prompt"]) > MAX_PROMPT_CHARS:
        raise TypeError(f"the prompt must be text of at most {MAX_PROMPT_CHARS:,} characters")
    prompt_ids = _ids(run["prompt_ids"], "prompt_ids", below=below)
    saved = SavedRun(run["prompt"], prompt_ids, model, s, passes[:own], interventions, on, cfg,
                     tokenizer=tokenizer, branches=saved_branches(run, entries, passes[own:]))
    if entries:
        saved.label, saved.shown = shown_line(run, len(entries))
    check_agrees(path, saved)  # and its fields with each other
    return saved


def _settings(path: Path, settings, vocab: int) -> GenerationSettings:
    """The saved generation settings, in the ranges the command line and the window's
    boxes hold (generation.BOUNDS), top-k within the saved model's vocabulary."""
    if not isinstance(settings, dict):
        raise TypeError("settings must be an object")
    unknown = sorted(set(settings) - {f.name for f in fields(GenerationSettings)})
    if unknown:  # named as Python writes them: a name with a line break stays on one line
        raise RunFileError(path, f"its generation settings are wrong (unknown: "
                                 f"{', '.join(ascii(k) for k in unknown[:5])})")
    try:
        s = GenerationSettings(**settings)
        s.validate(vocab)
    except (TypeError, ValueError) as exc:
        raise RunFileError(path, f"its generation settings are wrong ({exc})") from None
    return s


def _config(path: Path, model: dict) -> GPTConfig | None:
    """The saved model's configuration (None in a file that does not keep it)."""
    config = model.get("config")
    try:
        return GPTConfig.from_dict(config) if config is not None else None
    except (TypeError, ValueError) as exc:
        raise RunFileError(path, f"its model's config is wrong ({exc})"[:300]) from None


def _interventions(path: Path, run: dict, cfg: GPTConfig | None) -> tuple[list[dict], bool]:
    """The saved interventions, each checked as an intervention file's are (against the
    saved model's shape when the file has it), and their switch."""
    interventions = run.get("interventions", [])
    if not isinstance(interventions, list) or not all(isinstance(x, dict) for x in interventions):
        raise TypeError("interventions must be a list of objects")
    if len(interventions) > MAX_INTERVENTIONS:
        raise RunFileError(path, f"{len(interventions):,} interventions; at most "
                                 f"{MAX_INTERVENTIONS} at once")
    on = run.get("interventions_on", True)
    if not isinstance(on, bool):
        raise RunFileError(path, f"interventions_on must be true or false, got {on!r}"[:200])
    for i, item in enumerate(interventions):
        try:
            one = intervention_from_dict(item)
            if cfg is not None:
                one.check(cfg)
        except (TypeError, ValueError) as exc:
            raise RunFileError(path, f"intervention {i + 1}: {exc}"[:300]) from None
    return interventions, on


def _saved_node(path: Path, where: tuple[int, int], node, norm: str, cfg: GPTConfig | None,
                read: tuple[int, bool], tensors, seen) -> NodeView:
    """Node ``j`` of pass ``i`` (``where``): its name known to the block and not among
    ``seen``, its shape the block's for the tokens the pass ``read`` (how many, and
    whether every position is a row), its kept tensor and statistics read."""
    i, j = where
    name, shape, dtype, kept = node
    if not isinstance(name, str) or not isinstance(dtype, str) or len(dtype) > 40:
        raise TypeError(f"pass {i} node {j} must be [name, shape, dtype, kept shape]")
    shape = tuple(_ids(shape, "a shape", 8))
    kept = None if kept is None else tuple(_ids(kept, "a shape", 8))
    try:
        info = node_for_hook(name, norm)
    except KeyError:
        raise RunFileError(path, f"pass {i} names an unknown node {name[:60]!r}") from None
    if name in seen:
        raise RunFileError(path, f"pass {i} names {name[:60]!r} twice")
    if cfg is not None and (layer_of(name) or 0) >= cfg.n_layers:
        raise RunFileError(path, f"pass {i} names {name[:60]!r}, a node the saved "
                                 f"{cfg.n_layers}-block model does not have")
    count, full = read
    check_shape(path, f"pass {i}'s {name[:60]}", info, shape, cfg, count if full else 1,
                step=not full, read=count)
    if kept is not None and (kept[-1:] != shape[-1:] or
                             np.prod(kept, dtype=np.int64) != np.prod(shape, dtype=np.int64)):
        raise RunFileError(path, f"pass {i}'s {name[:60]} keeps a tensor of shape {kept}; "
                                 f"its node's is {shape}")
    array = kept_tensor(path, tensors, f"p{i}.n{j}.tensor", kept)
    return NodeView(name, info, shape, dtype, "saved",
                    node_stats(path, tensors, f"p{i}.n{j}", shape), array)


def _pass(path: Path, i: int, d, tensors, norm: str, vocab: int,
          cfg: GPTConfig | None = None, tokenizer: Tokenizer | None = None,
          below: int = GPT2_VOCAB) -> Pass:
    tokenizer = tokenizer or gpt2_tokenizer()
    if not isinstance(d, dict) or not isinstance(d.get("nodes"), list) or len(d["nodes"]) > MAX_NODES:
        raise TypeError(f"pass {i} must be an object with at most {MAX_NODES:,} nodes")
    step = d["step"]
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise TypeError(f"pass {i}'s step must be a whole number or null")
    ids = _ids(d["ids"], "ids", below=below)
    whole = d.get("whole", False)  # a recomputed step: every position of its context
    if not isinstance(whole, bool) or (whole and step is None):
        raise TypeError(f"pass {i}'s whole must be true or false, and only on a step")
    full = step is None or whole  # a pass over every position of its tokens
    if full and cfg is not None and len(ids) > cfg.context_length:
        raise RunFileError(path, f"its {'prompt pass' if step is None else f'step {step}'} has "
                                 f"{len(ids):,} tokens; the saved model reads at most "
                                 f"{cfg.context_length:,}")
    top_ids = _ids(d["top_ids"], "top_ids", 1000, below=below)
    top_probs = d["top_probs"]
    if not isinstance(top_probs, list) or len(top_probs) != len(top_ids) or not all(
            isinstance(x, float) and 0.0 <= x <= 1.0 for x in top_probs) or sum(top_probs) > 1.001:
        raise TypeError(f"pass {i}'s top_probs must be probabilities, one per top id, "
                        "adding up to at most 1")
    views = {}
    for j, node in enumerate(d["nodes"]):
        view = _saved_node(path, (i, j), node, norm, cfg, (len(ids), full), tensors, views)
        views[view.name] = view
    logits = tensors.get(f"p{i}.logits")
    if logits is not None and (logits.dim() != 1 or logits.dtype != torch.float32
                               or len(logits) not in (GPT2_VOCAB, vocab)):
        raise RunFileError(path, f"p{i}.logits must be a float32 vector of {vocab:,} logits")
    token = d["token_id"]
    if token is not None and (not isinstance(token, int) or isinstance(token, bool)
                              or not 0 <= token < below):
        raise TypeError(f"pass {i}'s token must be a token id below {below:,}")
    prob = d["prob"]
    if prob is not None and (not isinstance(prob, float) or not 0.0 <= prob <= 1.0):
        raise TypeError(f"pass {i}'s prob must be a probability or null")
    return Pass(ids=ids, pieces=[tokenizer.token_piece(t) for t in ids] if full else [], whole=whole,
                views=views, step=step, token_id=token,
                prob=float(prob) if isinstance(prob, (int, float)) else None,
                top_ids=tuple(top_ids), top_probs=tuple(top_probs),
                top_pieces=tuple(tokenizer.token_piece(t) for t in top_ids),
                next_logits=None if logits is None else logits.numpy())
