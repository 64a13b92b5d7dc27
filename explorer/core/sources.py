"""Where a model comes from, in one grammar for the CLI, the dialogs and the engine:

    default          the GPT-2 last downloaded, else GPT-2 small (or the smallest GPT-2)
                     in the Hugging Face cache, else an untrained gpt2-small, labelled so
    preset:NAME      a seeded random initialisation of a preset (Pre-LN or Post-LN)
    hf:NAME          a GPT-2 in the local Hugging Face cache (gpt2, gpt2-medium, or a
                     repository id such as openai-community/gpt2)
    PATH             a checkpoint file or folder (checkpoints.py: Hugging Face, the book's
                     .pth, OpenAI's TensorFlow folder, the explorer's own format)
    mutation:NAME    a change of another model (divergence.py), not a model by itself

``ModelSpec`` is a parsed model source plus where it runs; ``open_model`` loads one.
Cached weights are checked against their published sha256 before they are used
(hub.verified). Loads through checkpoints.py; fetches nothing.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import torch

from .weights import hub
from .base import state
from .base.cancel import check
from .base.outputs import shown
from .weights.checkpoints import CheckpointError, LoadedModel, load_checkpoint
from .weights.keymaps import all_finite
from .weights.tokenizers_files import tokenizer_for
from .base.devices import check_memory
from .gpt.config import GPTConfig, preset
from .base.devices import resolve_device, resolve_dtype
from .gpt.build import build_model
from .gpt.sizes import count_parameters, describe_size
from .gpt.tokenizer import Tokenizer, gpt2_tokenizer

NO_TRAINED_MODEL = ("no trained GPT-2 found in the Hugging Face cache ({cache}); using a "
                    "random initialisation. Get one with `gpt-explorer download gpt2`, "
                    "File ▸ Get GPT-2…, or open the book's gpt2/124M folder")


def random_model(preset_name: str = "gpt2-small", seed: int = 0, device: str = "cpu",
                 dtype: str | torch.dtype = "float32", should_stop=None,
                 **overrides: Any) -> LoadedModel:
    """A seeded GPT-2 initialisation of a preset: it runs, but it was never trained."""
    cfg = preset(preset_name, **{k: v for k, v in overrides.items()
                                 if not (k == "norm_position" and v is None)})
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    need = count_parameters(cfg).total * torch.tensor([], dtype=dt).element_size()
    check_memory(need, dev, f"{preset_name} in {str(dt).replace('torch.', '')}")
    check(should_stop)
    model = build_model(cfg, device=dev, dtype=dt, seed=seed, should_stop=should_stop)
    check(should_stop)
    placed = ("" if cfg.norm_position == preset(preset_name).norm_position
              else f" · {cfg.norm_position.title}")  # a placement other than the preset's
    label = f"{preset_name}{placed} · random init (seed {seed}) · UNTRAINED: output is noise"
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


def trained_here(notices: list[str]) -> list[tuple[state.TrainedModel, str]]:
    """The models remembered as trained here, each with the label its run's own
    trainer.json gives ("trained here: mini, 200 steps, validation loss 5.83 (folder)"),
    never the remembered entry's words; an entry whose file is not a training run's
    model is skipped with a notice."""
    from .experiments.snapshots import trained_label

    found = []
    for run in state.trained_models(notices):
        label = trained_label(run.path)
        if label is None:
            notices.append(f"skipped the model remembered as trained here at {shown(run.path)}: "
                           "it is not a training run's model (no trainer.json beside it)")
            continue
        found.append((run, shown(label)))
    return found


def load_default_model(device: str = "cpu", dtype: str | torch.dtype = "float32",
                       cache: str | os.PathLike | None = None, should_stop=None) -> LoadedModel:
    """The last downloaded GPT-2, else the smallest one in the cache, else the model
    trained here last, else an untrained gpt2-small. Works offline; a file that fails its
    check is skipped, said why."""
    notices: list[str] = []
    for cached in default_candidates(cache):
        try:
            loaded = load_cached(cached, device, dtype, should_stop)
        except (CheckpointError, hub.HubError, OSError, RuntimeError) as exc:
            notices.append(f"skipped {cached.repo_id} in the cache: {exc}")
            continue
        loaded.notices[:0] = notices
        return loaded
    for run, label in trained_here(notices):
        try:
            loaded = load_checkpoint(run.path, device=device, dtype=dtype, should_stop=should_stop)
        except (CheckpointError, OSError, RuntimeError, ValueError) as exc:
            notices.append(f"skipped the model trained here at {shown(run.path)}: {exc}")
            continue
        loaded.label = label
        loaded.notices[:0] = notices
        return loaded
    loaded = random_model("gpt2-small", seed=0, device=device, dtype=dtype, should_stop=should_stop)
    loaded.notices.extend(notices)
    loaded.notices.append(NO_TRAINED_MODEL.format(cache=cache or hub.cache_dir()))
    return loaded


@dataclass(frozen=True)
class ModelSpec:
    """Which model to load and where: a checkpoint path (or ``hf:NAME``), a preset, or
    neither for the default."""

    checkpoint: str | None = None
    preset: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    norm_position: str | None = None  # for a preset; None: the preset's own
    own_tokenizer: bool = False  # refuse a model read with a tokenizer not its own

    def __post_init__(self) -> None:
        if self.checkpoint and self.preset:
            raise ValueError("give either a checkpoint or a preset, not both")

    @classmethod
    def parse(cls, text: str, **where: Any) -> "ModelSpec":
        """``default``, ``preset:NAME``, ``hf:NAME`` or a path (see the module doc);
        ``where`` sets device, dtype, seed, norm_position."""
        text = (text or "").strip()
        if not text:
            raise ValueError("an empty model source; use default, preset:NAME, hf:NAME or a path")
        if text == "default":
            return cls(**where)
        if text.startswith("preset:"):
            name = text[len("preset:"):]
            if not name:
                raise ValueError("preset: needs a name, e.g. preset:gpt2-small")
            preset(name)  # an unknown name is said here, before anything loads
            return cls(preset=name, **where)
        if text.startswith("mutation:"):
            raise ValueError(f"{text!r} changes another model; it is not a model by itself")
        if text == "hf:":
            raise ValueError("hf: needs a name, e.g. hf:gpt2")
        return cls(checkpoint=text, **where)

    def source(self) -> str:
        """The spec's source in the grammar (parse's inverse, without device and dtype)."""
        if self.preset:
            return f"preset:{self.preset}"
        return self.checkpoint or "default"

    def known_tokenizer(self) -> Tokenizer | None:
        """The tokenizer the model will read text with, when known before it loads:
        GPT-2's for a preset or the default, the tokenizer.json beside a local checkpoint
        (GPT-2's without one); None for a Hub name."""
        if not self.checkpoint:
            return gpt2_tokenizer()
        if self.checkpoint.startswith("hf:"):
            return None
        return tokenizer_for(self.checkpoint)

    def describe(self) -> str:
        return self.checkpoint or (f"{self.preset} (random init)" if self.preset else "default model")

    def to_dict(self) -> dict[str, Any]:
        """The spec as settings and run files keep it: a local path made absolute and
        resolved, so that it names the same file from any folder the app starts in."""
        return dataclasses.asdict(self.resolved())

    def resolved(self) -> "ModelSpec":
        """This spec with a local checkpoint's path absolute (``RUN@stepN``: its folder's)."""
        ck = self.checkpoint
        if not ck or ck.startswith("hf:"):
            return self
        folder, at, step = ck.rpartition("@step")
        if at and folder and step.isdigit():
            return dataclasses.replace(self, checkpoint=f"{Path(folder).resolve()}@step{step}")
        return dataclasses.replace(self, checkpoint=str(Path(ck).expanduser().resolve()))

    @classmethod
    def from_dict(cls, data: Any) -> "ModelSpec":
        """From saved settings; a field of the wrong type or an unknown one is an error."""
        if not isinstance(data, dict):
            raise ValueError("a saved model is not a mapping")
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = set(data) - set(types)
        if unknown:
            raise ValueError(f"unknown saved model fields: {', '.join(sorted(map(str, unknown)))}")
        for key, value in data.items():
            want = (int,) if key == "seed" else (bool,) if key == "own_tokenizer" else \
                (str, type(None))
            if not isinstance(value, want) or (isinstance(value, bool) and want != (bool,)):
                raise ValueError(f"the saved model's {key} is {value!r}")
        return cls(**data)


@dataclass(frozen=True)
class ModelInfo:
    """A loaded model as the app shows it (no tensors): what it is, its shape, where."""

    label: str
    size: str  # from the config: '12 blocks · 768 wide · 12 heads · 124.4M parameters'
    config: GPTConfig
    trained: bool
    device: str
    dtype: str
    notices: tuple[str, ...]
    spec: ModelSpec
    record: bool = False  # a saved run's model: its structure shown, its weights not loaded
    # what its text is read and written with (the model's own, or GPT-2's)
    tokenizer: Tokenizer = field(default_factory=gpt2_tokenizer, compare=False, repr=False)

    @classmethod
    def of(cls, loaded: LoadedModel, spec: ModelSpec) -> "ModelInfo":
        return cls(label=loaded.label, size=loaded.size, config=loaded.config,
                   trained=loaded.trained, device=str(loaded.device),
                   dtype=str(loaded.dtype).replace("torch.", ""),
                   notices=tuple(loaded.notices), spec=spec, tokenizer=loaded.tokenizer)

    @classmethod
    def of_record(cls, label: str, config: GPTConfig, spec: ModelSpec,
                  tokenizer: Tokenizer | None = None) -> "ModelInfo":
        """The model of a saved run opened read-only: drawn with its own blocks and
        widths, computed by nothing (its weights are not here); ``tokenizer`` shows the
        run's tokens (a vocabulary of its own, as saved)."""
        return cls(label=f"{label} (saved run, read-only)", size=describe_size(config),
                   config=config, trained=True, device="not loaded", dtype="saved statistics",
                   notices=(), spec=spec, record=True, tokenizer=tokenizer or gpt2_tokenizer())


@dataclass(frozen=True)
class Mutation:
    """``mutation:NAME``: a change of a loaded model, made in one block."""

    name: str
    layer: int = 0


def parse_source(text: str, layer: int = 0, **where: Any) -> ModelSpec | Mutation:
    """A model source in the grammar: a ModelSpec, or a Mutation of another model."""
    text = (text or "").strip()
    if text.startswith("mutation:"):
        from .gpt.mutations import MUTATIONS, known
        name = text[len("mutation:"):]
        if not known(name):
            raise ValueError(f"unknown mutation {name!r}; choose one of {', '.join(MUTATIONS)} "
                             "(ff-N for any width N)")
        return Mutation(name, layer)
    return ModelSpec.parse(text, **where)


def open_model(spec: ModelSpec | None = None, should_stop=None) -> LoadedModel:
    """The CLI's and the app's one way to get a model; weights that are not finite in
    the loaded dtype are refused (they would make every view NaN)."""
    spec = spec or ModelSpec()
    loaded = _open_model(spec, should_stop)
    if not spec.preset or spec.checkpoint:  # a file's weights: a seeded preset is finite
        check_finite(loaded.model, loaded.label, str(loaded.dtype).replace("torch.", ""))
    return loaded


def check_finite(model, label: str, dtype: str) -> None:
    """One pass over the weights: the first tensor with inf or NaN and how many there
    are, or — for float16/bfloat16 — the advice that the values overflow that dtype."""
    bad = []
    for name, param in model.named_parameters():
        if all_finite(param.detach()):
            continue
        count = int((~torch.isfinite(param.detach())).sum())
        if count:
            bad.append((name, count))
    if not bad:
        return
    name, count = bad[0]
    total = sum(c for _, c in bad)
    advice = (f"; values beyond {dtype}'s range (±65,504 for float16) become inf: load it in "
              "float32 (--dtype float32, or float32 in Choose model)" if dtype in ("float16", "bfloat16")
              else "; the file holds inf or NaN, or values beyond float32's range")
    raise ValueError(f"{label}: {total:,} weight value{'s' * (total != 1)} are not finite in "
                     f"{dtype}, the first {count:,} in {name}{advice}. Every output would be NaN.")


def _open_model(spec: ModelSpec, should_stop=None) -> LoadedModel:
    device, dtype = spec.device, spec.dtype
    if spec.checkpoint:
        if spec.checkpoint.startswith("hf:"):
            want = spec.checkpoint[3:]
            try:
                cached = hub.find_repo(want)
            except hub.HubError as exc:
                raise ValueError(str(exc)) from None
            if cached is None:
                raise ValueError(f"{want!r} is not in the Hugging Face cache at {hub.cache_dir()}; "
                                 f"get it with `gpt-explorer download {want}`")
            return load_cached(cached, device, dtype, should_stop)
        from .experiments.snapshots import resolve, run_folder_of, snapshot_label, trained_label
        from .experiments.train_files import MODEL_FILE
        path = resolve(spec.checkpoint)
        if Path(path).is_dir() and run_folder_of(path) is not None:  # a run's folder: its model
            path = str(Path(path) / MODEL_FILE)
        loaded = load_checkpoint(path, device=device, dtype=dtype, should_stop=should_stop,
                                 own_tokenizer=spec.own_tokenizer)
        # which run, which step, how far it got (and a tokenizer not its own, still said)
        named = snapshot_label(path) or trained_label(path)
        if named:
            loaded.label = named + (f" · {loaded.tokenizer_note}" if loaded.tokenizer_note else "")
        return loaded
    if spec.preset:
        return random_model(spec.preset, seed=spec.seed, device=device, dtype=dtype,
                            should_stop=should_stop, norm_position=spec.norm_position)
    return load_default_model(device=device, dtype=dtype, should_stop=should_stop)


def model_for(source: ModelSpec | Mutation, base: LoadedModel, should_stop=None):
    """The BlockModel a source names, next to a loaded ``base`` (on its device): a mutation
    of it, or another model loaded."""
    if isinstance(source, Mutation):
        from .experiments.divergence import mutate
        return mutate(base.model, source.name, layer=source.layer)
    spec = dataclasses.replace(source, device=str(base.device))
    return open_model(spec, should_stop).model
