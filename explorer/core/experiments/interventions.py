"""What if: interventions on any node — zero it, mean-ablate it, scale it, add a steering
vector, patch it from another prompt, knock out attention heads, remove a shortcut, swap
the GELU — applied through temporary forward hooks, in the prompt pass and at every
decoding step alike (positions are counted from the KV cache's length).

``Intervention`` is the description (what the user chose; saved as JSON); ``resolve``
runs the model on the prompts an intervention needs (the mean to ablate with, the two
prompts of a steering vector, the prompt to patch from) and gives ``Resolved`` ones;
``applied(model, resolved)`` is the context that hooks them in and removes every hook
in ``finally``. Enter it before a capture: the capture then sees the changed values.
In eval mode a node that outputs another's tensor (dropout, the feed-forward's output)
is changed where that tensor is made, so every view of it agrees. Qt-free."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from ..gpt.config import GPTConfig
from ..gpt.hooks import Hook, hooks, shortcut_removed
from ..gpt.block_model import BlockModel
from ..gpt.nodes import (Width, ATTENTION, Kind, activation_label, all_hook_names, block_hook_name,
                         eval_source, node_for_hook, order_of, parse_hook, residual_branches, role, Role)
from ..gpt.tokenizer import tokenizer_of
from ..base.outputs import atomic_output, check_output
from ..base.validate import read_json
from .changes import FIELDS, FUNCTIONS, KINDS, Change  # noqa: F401 (this module's words)

K_MOST = 1e6  # |k|: a scale or steer past this overflows float32 downstream (NaN output)
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Intervention:
    kind: str
    node: str  # hook name
    k: float = 1.0  # scale factor, or the steering vector's strength
    heads: tuple[int, ...] = ()  # "heads"
    positions: tuple[int, ...] | None = None  # None: every position
    prompt: str | None = None  # "patch": the prompt patched from; "steer": prompt A
    prompt_b: str | None = None  # "steer": prompt B
    function: str | None = None  # "activation": relu | identity
    vector: tuple[float, ...] | None = None  # "steer": a vector given as it is
    experts: tuple[int, ...] = ()  # "force-expert": the one; "ban-experts": those banned

    def __post_init__(self) -> None:
        if isinstance(self.kind, str) and self.kind in KINDS:  # an unknown one: check() names it
            object.__setattr__(self, "kind", Change(self.kind))

    def describe(self) -> str:
        at = "" if self.positions is None else f" at positions {list(self.positions)}"
        what = {Change.ZERO: "zero", Change.MEAN: "mean-ablate",
                Change.SCALE: f"scale ×{self.k:g}",
                Change.STEER: (f"steer {self.k:g} × ({self.prompt!r} − {self.prompt_b!r})"
                          if self.vector is None else f"steer {self.k:g} × a given vector"),
                Change.PATCH: f"patch from {self.prompt!r}",
                Change.HEADS: f"knock out heads {list(self.heads)}",
                Change.NO_SHORTCUT: "remove the shortcut",
                Change.ACTIVATION: f"{activation_label(parse_hook(self.node)[1])} → {self.function}",
                Change.FORCE: f"force expert {self.experts[0] if self.experts else '?'}",
                Change.BAN: f"ban experts {list(self.experts)}"}[self.kind]
        return f"{self.node}: {what}{at}"

    def to_dict(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if v not in (None, ())}
        for key in ("heads", "positions", "vector", "experts"):
            if key in data:
                data[key] = list(data[key])
        return data

    def check(self, cfg: GPTConfig) -> None:
        """One clear ValueError for anything that cannot apply to this model."""
        where = f"intervention on {self.node!r}"
        if self.kind not in KINDS:
            raise ValueError(f"unknown intervention {self.kind!r}; choose one of {', '.join(KINDS)}")
        if self.node not in all_hook_names(cfg, inside=True):  # attention's steps too
            raise ValueError(f"{where}: no such node in this model (e.g. trf_blocks.0.att)")
        order = order_of(cfg)
        node = node_for_hook(self.node, order)
        if not isinstance(self.k, (int, float)) or isinstance(self.k, bool) or not math.isfinite(self.k) \
                or abs(self.k) > K_MOST:
            raise ValueError(f"{where}: k must be a finite number from −{K_MOST:,.0f} to {K_MOST:,.0f} "
                             f"(beyond, the output overflows to NaN), got {self.k!r}"[:200])
        if node.width == Width.CTX and self.kind not in (Change.ZERO, Change.SCALE):  # T × T
            what = "the attention pattern" if node.kind == Kind.PATTERN else "a score matrix"
            raise ValueError(f"{where}: {what} (a row per query, a column per key) can be "
                             "zeroed or scaled only")
        if self.kind == Change.HEADS:
            if parse_hook(self.node)[1] != ATTENTION:
                raise ValueError(f"{where}: heads are knocked out at an attention node (….att)")
            if not self.heads or any(not isinstance(h, int) or isinstance(h, bool)  # true is not 1
                                     or not 0 <= h < cfg.n_heads for h in self.heads):
                raise ValueError(f"{where}: heads must be numbers 0..{cfg.n_heads - 1}, got {list(self.heads)}")
        if self.kind == Change.NO_SHORTCUT and parse_hook(self.node)[1] not in residual_branches(order):
            raise ValueError(f"{where}: a shortcut is removed at a block's add (add1 or add2)")
        if self.kind == Change.ACTIVATION:
            at = role(order, Role.ACTIVATION)
            if parse_hook(self.node)[1] != at:
                raise ValueError(f"{where}: the activation is swapped at the "
                                 f"{activation_label(at)} ({at})")
            if self.function not in FUNCTIONS:
                raise ValueError(f"{where}: function must be relu or identity, got {self.function!r}")
        self._check_experts(cfg, where)
        if self.positions is not None and any(
                not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < cfg.context_length
                for p in self.positions):
            raise ValueError(f"{where}: positions must be whole numbers 0..{cfg.context_length - 1}")
        if self.kind == Change.PATCH and not self.prompt:
            raise ValueError(f"{where}: a patch needs the prompt to patch from")
        if self.kind == Change.STEER and self.vector is None and not (self.prompt and self.prompt_b):
            raise ValueError(f"{where}: a steering vector needs two prompts (A and B) or a vector")
        if self.vector is not None and len(self.vector) != (width := node.shape(cfg, 1, 1)[-1]):
            raise ValueError(f"{where}: the steering vector has {len(self.vector)} values; "
                             f"this node has {width}")


    def _check_experts(self, cfg: GPTConfig, where: str) -> None:
        """Force one expert at a mixture's weights, ban some at its router; no other kind
        takes experts."""
        if self.kind not in (Change.FORCE, Change.BAN):
            return
        order, key = order_of(cfg), parse_hook(self.node)[1]
        at = role(order, Role.ROUTING if self.kind == Change.FORCE else Role.ROUTER)
        if at is None or key != at:
            raise ValueError(f"{where}: {self.kind} applies to a mixture of experts' "
                             + ("weights (….ff.routing)" if self.kind == Change.FORCE
                                else "router (….ff.gate)"))
        n, k = cfg.n_experts, cfg.experts_per_token
        if not self.experts or any(not isinstance(e, int) or isinstance(e, bool) or not 0 <= e < n
                                   for e in self.experts):
            raise ValueError(f"{where}: experts must be numbers 0..{n - 1}, got {list(self.experts)}")
        if self.kind == Change.FORCE and len(self.experts) != 1:
            raise ValueError(f"{where}: force one expert, got {list(self.experts)}")
        if self.kind == Change.BAN and len(set(self.experts)) > n - k:
            raise ValueError(f"{where}: a token goes to {k} experts, so at most {n - k} of the "
                             f"{n} can be banned")


def allowed_kinds(node: str, order="pre") -> list[Change]:
    """The kinds of intervention that fit a node of a block of this order."""
    key, found = parse_hook(node)[1], node_for_hook(node, order)
    if found.width == Width.CTX:  # the scores, the masked scores, the pattern: T × T
        return [Change.ZERO, Change.SCALE]
    kinds = [Change.ZERO, Change.MEAN, Change.SCALE, Change.STEER, Change.PATCH]
    if key == ATTENTION:
        kinds.append(Change.HEADS)
    if key in residual_branches(order) and parse_hook(node)[0] is not None:
        kinds.append(Change.NO_SHORTCUT)
    if key == role(order, Role.ACTIVATION):
        kinds.append(Change.ACTIVATION)
    if key == role(order, Role.ROUTING):
        kinds.append(Change.FORCE)
    if key == role(order, Role.ROUTER):
        kinds.append(Change.BAN)
    return kinds


def from_dict(data: dict) -> Intervention:
    if not isinstance(data, dict):
        raise ValueError(f"an intervention is an object with kind and node, got {data!r}"[:200])
    unknown = set(data) - set(Intervention.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown intervention field(s): {', '.join(sorted(unknown))}")
    if not isinstance(data.get("kind"), str) or not isinstance(data.get("node"), str):
        raise ValueError("an intervention needs a kind and a node (text)")
    if data["kind"] in KINDS:
        defaults = {k: f.default for k, f in Intervention.__dataclass_fields__.items()}
        foreign = sorted(k for k, v in data.items() if k not in ("kind", "node", "positions",
                                                                 *FIELDS[Change(data["kind"])])
                         and v not in (None, [], ()) and v != defaults.get(k))  # k 1.0 is written
        if foreign:
            raise ValueError(f"a {data['kind']} intervention takes no {', '.join(foreign)} "
                             f"(it reads {', '.join(FIELDS[Change(data['kind'])]) or 'only its node'}"
                             " and positions)")
    args = dict(data)
    for key in ("heads", "positions", "vector", "experts"):
        if args.get(key) is not None:
            if not isinstance(args[key], list):
                raise ValueError(f"{key} must be a list, got {args[key]!r}"[:200])
            args[key] = tuple(args[key])
    for key in ("prompt", "prompt_b", "function"):
        if args.get(key) is not None and not isinstance(args[key], str):
            raise ValueError(f"{key} must be text, got {args[key]!r}"[:200])
    if args.get("vector") is not None and not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in args["vector"]):
        raise ValueError("a steering vector holds finite numbers only")
    return Intervention(**args)


MAX_INTERVENTIONS = 256  # each one is a hook on every forward


def load_file(path: str | Path, cfg: GPTConfig) -> tuple[list[Intervention], bool]:
    """Interventions from a JSON file ({"enabled": …, "interventions": [...]} or a list),
    each checked against the model, and whether the file has them switched on; one clear
    ValueError and nothing applied when any is wrong."""
    path = Path(path)
    if path.exists() and path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB, not an intervention file")
    data = read_json(path, "an intervention file")  # kind, size, depth and numbers checked
    items = data.get("interventions") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected {{\"interventions\": [...]}}")
    enabled = data.get("enabled", True) if isinstance(data, dict) else True
    if not isinstance(enabled, bool):
        raise ValueError(f"{path}: \"enabled\" must be true or false, got {enabled!r}"[:200])
    if len(items) > MAX_INTERVENTIONS:
        raise ValueError(f"{path}: {len(items):,} interventions; at most {MAX_INTERVENTIONS} at once")
    found = []
    for i, item in enumerate(items):
        try:
            one = from_dict(item)
            one.check(cfg)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}, intervention {i + 1}: {exc}") from None
        found.append(one)
    return found, enabled


def save_file(path: str | Path, interventions: list[Intervention], enabled: bool = True) -> None:
    """The list and its switch as JSON, written under a temporary name and renamed."""
    text = json.dumps({"enabled": enabled, "interventions": [i.to_dict() for i in interventions]},
                      indent=2) + "\n"
    with atomic_output(check_output(path)) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


@dataclass
class Resolved:
    """An intervention with what it needs computed: ``tensor`` is the mean (C,), the
    steering vector (C,) or the patch source (…, T_source, C)."""
    spec: Intervention
    tensor: torch.Tensor | None = None
    notes: list[str] = field(default_factory=list)


def activations(model: BlockModel, prompt: str | list[int], nodes) -> dict[str, torch.Tensor]:
    """Copies of the named nodes' outputs for a prompt (text or ids), in one forward
    without interventions."""
    ids = tokenizer_of(model).encode(prompt) if isinstance(prompt, str) else list(prompt)
    if not ids:
        raise ValueError("an intervention's prompt is empty")
    if len(ids) > model.cfg.context_length:  # cut, it would be another prompt than the one given
        raise ValueError(f"an intervention's prompt has {len(ids):,} tokens; the model reads "
                         f"at most {model.cfg.context_length:,}")
    got = {}
    keep = [(_where(model, name), lambda m, i, out, n=name: got.__setitem__(n, out.detach().clone()))
            for name in set(nodes)]
    device = next(model.parameters()).device
    with hooks(model, keep), torch.inference_mode():
        model(torch.tensor([ids], device=device))
    return got


def _where(model: BlockModel, name: str) -> str:
    """The module whose output is this node's tensor (in eval mode, a dropout's is its
    source's)."""
    return name if model.training else eval_source(name, order_of(model.cfg))


def _mean(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).mean(dim=0)  # (C,) over the prompt's tokens


def resolve(model: BlockModel, interventions: list[Intervention], prompt_ids: list[int]) -> list[Resolved]:
    """Compute what the interventions need, from the model without interventions."""
    out = []
    for spec in interventions:
        spec.check(model.cfg)
        r = Resolved(spec)
        if spec.kind == Change.MEAN:
            r.tensor = _mean(activations(model, prompt_ids, [spec.node])[spec.node])
        elif spec.kind == Change.STEER:
            if spec.vector is not None:
                r.tensor = torch.tensor(spec.vector, dtype=next(model.parameters()).dtype)
            else:
                r.tensor = (_mean(activations(model, spec.prompt, [spec.node])[spec.node])
                            - _mean(activations(model, spec.prompt_b, [spec.node])[spec.node]))
            width = node_for_hook(spec.node, order_of(model.cfg)).shape(model.cfg, 1, 1)[-1]
            if r.tensor.numel() != width:
                raise ValueError(f"intervention on {spec.node!r}: the steering vector has "
                                 f"{r.tensor.numel()} values; this node has {width}")
        elif spec.kind == Change.PATCH:
            r.tensor = activations(model, spec.prompt, [spec.node])[spec.node]
        out.append(r)
    return out


class _Offset:
    """The absolute position of a forward's first token: the KV cache's length."""
    value = 0


def _edit(r: Resolved, offset: _Offset):
    spec = r.spec

    def hook(module, inputs, out):
        t = out.shape[-2] if out.dim() >= 2 else 1
        start = offset.value
        if spec.positions is None:
            local = list(range(t))
        else:
            local = [p - start for p in spec.positions if start <= p < start + t]
        if spec.kind == Change.ACTIVATION:
            x = inputs[0]
            return F.relu(x) if spec.function == "relu" else x
        if not local:
            return None
        new = out.clone()
        index = torch.tensor(local, device=out.device)
        sel = new.index_select(-2, index)
        if spec.kind == Change.ZERO:
            sel = torch.zeros_like(sel)
        elif spec.kind == Change.SCALE:
            sel = sel * spec.k
        elif spec.kind == Change.MEAN:
            sel = r.tensor.to(sel.dtype).expand_as(sel).clone()
        elif spec.kind == Change.STEER:
            sel = sel + spec.k * r.tensor.to(sel.device, sel.dtype)
        elif spec.kind == Change.FORCE:  # one expert, the whole weight
            sel = torch.zeros_like(sel)
            sel[..., spec.experts[0]] = 1.0
        elif spec.kind == Change.BAN:  # the router's logits: never among the k largest
            sel = sel.clone()
            sel[..., list(spec.experts)] = float("-inf")
        elif spec.kind == Change.PATCH:
            src = r.tensor.to(sel.device, sel.dtype)
            keep = [i for i, p in enumerate(local) if start + p < src.shape[-2]]
            if not keep:
                return None
            index = index[keep]
            sel = src.index_select(-2, torch.tensor([start + local[i] for i in keep],
                                                    device=src.device)).expand(
                *new.shape[:-2], len(keep), new.shape[-1])
        new.index_copy_(-2, index, sel)
        return new

    return hook


def shortcut_hooks(node: str, order="pre") -> list[Hook]:
    """The hooks that take the shortcut away at the add ``node`` (trf_blocks.N.add1 or
    add2): the add returns only its branch."""
    layer, key = parse_hook(node)
    return shortcut_removed(node, block_hook_name(layer, residual_branches(order)[key]))


def _knock_heads(att, heads) -> Callable:
    """A pre-hook on attention's out_proj that zeroes the chosen heads' slices of the
    context vectors (B, T, C), the heads side by side."""
    hd, drop = att.head_dim, sorted(set(heads))

    def knock(module, args):
        ctx = args[0].clone()
        for h in drop:
            ctx[..., h * hd:(h + 1) * hd] = 0
        return (ctx,) + tuple(args[1:])
    return knock


@contextmanager
def applied(model: BlockModel, resolved: list[Resolved]):
    """Hook the interventions into the model for the duration of the context; every
    hook is removed on exit, also when the forward raised or was stopped."""
    offset = _Offset()

    def track(module, args, kwargs):
        cache = kwargs.get("cache", args[1] if len(args) > 1 else None)
        offset.value = cache.length if cache is not None else 0

    forward, pre = [], []
    for r in resolved:
        spec = r.spec
        if spec.kind == Change.HEADS:
            pre.append((f"{spec.node}.out_proj", _knock_heads(model.get_submodule(spec.node), spec.heads)))
        elif spec.kind == Change.NO_SHORTCUT:
            forward += shortcut_hooks(spec.node, order_of(model.cfg))
        else:
            name = spec.node if spec.kind == Change.ACTIVATION else _where(model, spec.node)
            forward.append((name, _edit(r, offset)))
    with hooks(model, forward, pre, pre_kwargs=[("", track)] if resolved else []):
        yield


def intervened(model: BlockModel, specs: list[Intervention], ids: list[int]):
    """The run's interventions, resolved on the prompt ``ids``, hooked in for a ``with``
    block (none hooked when there are none)."""
    return applied(model, resolve(model, specs, ids) if specs else [])
