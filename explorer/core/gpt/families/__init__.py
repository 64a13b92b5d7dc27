"""The block families the explorer opens, listed once: each is one file of this folder
(its node table and its record, ``family.BlockFamily``), registered here. The first is
the default, a config's family when it names none (GPT-2's, chapter 4's block).

``register`` adds another at run time (a test's own family, say); ``named`` finds one by
the name a config file writes, ``for_model_type`` by a Hugging Face ``model_type``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..family import BlockFamily
from . import gemma3, gpt2, llama, olmo, olmoe, qwen3moe

# the one list of families: GPT-2's block (chapter 4), the Llama / Qwen block (the bonus
# chapters), OLMo 2 / 3's (ch05/13_olmo3), Gemma 3's (ch05/12_gemma3), Qwen3-MoE's (the
# book's Qwen3 with experts), OLMoE's; a new family is a
# file of this folder and one entry here
FAMILIES: dict[str, BlockFamily] = {f.name: f for f in (gpt2.GPT2, llama.LLAMA, olmo.OLMO,
                                                        gemma3.GEMMA3, qwen3moe.QWEN3MOE,
                                                        olmoe.OLMOE)}


def default() -> BlockFamily:
    """The family of a config that names none: the first registered."""
    return next(iter(FAMILIES.values()))


def named(name: str) -> BlockFamily:
    """The family a config calls ``name``; ``ValueError`` naming the known ones."""
    try:
        return FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {name!r}") from None


def for_model_type(model_type: object) -> BlockFamily | None:
    """The family that opens a Hugging Face config.json of this ``model_type``, or None."""
    return next((f for f in FAMILIES.values() if model_type in f.files.model_types), None)


def for_config(config: object) -> BlockFamily | None:
    """The family whose Hugging Face config.json this is (its ``model_type``, the default
    family's when it names none, and the keys the family's config.json always has), or
    None."""
    if not isinstance(config, dict):
        return None
    family = for_model_type(config.get("model_type", default().files.model_types[0]))
    if family is None or not all(k in config for k in family.files.hf_keys):
        return None
    return family


def model_types() -> tuple[str, ...]:
    """Every ``model_type`` some family opens, in the families' order."""
    return tuple(t for f in FAMILIES.values() for t in f.files.model_types)


def register(family: BlockFamily) -> BlockFamily:
    """Add a family (its name not yet taken); every other module then knows it."""
    if family.name in FAMILIES:
        raise ValueError(f"a family named {family.name!r} is registered already")
    FAMILIES[family.name] = family
    return family


def unregister(family: BlockFamily) -> None:
    if FAMILIES.get(family.name) is family:
        del FAMILIES[family.name]


@contextmanager
def registered(family: BlockFamily) -> Iterator[BlockFamily]:
    """The family registered for the block's duration."""
    register(family)
    try:
        yield family
    finally:
        unregister(family)
