"""Tokens as chips: each piece (of the model's tokenizer) on its own coloured background with its id, spaces
and line breaks made visible; a batch one row per prompt, padded with grey [pad] chips.
Rich text, so hundreds of chips lay out in a few milliseconds."""

from __future__ import annotations

import html

from ...core.gpt.tokenizer import gpt2_tokenizer, visible

MAX_CHIPS = 96  # chips drawn for a long prompt (the count shows them all; 200 took ~30 ms)
CHIP_COLOURS = ("#dce8fb", "#fbe8d0")
PAD = "<span style='background:#d0d0d0; color:#606060'>&nbsp;[pad]&nbsp;</span>"


def chip_row(ids: list[int], tokenizer=None) -> str:
    token_piece = (tokenizer or gpt2_tokenizer()).token_piece
    return " ".join(f"<span style='background:{CHIP_COLOURS[i % 2]}'>&nbsp;"
                    f"{html.escape(visible(token_piece(tid)))}<sub>&nbsp;{tid}</sub>&nbsp;</span>"
                    for i, tid in enumerate(ids))


def chips_html(ids: list[int], tokenizer=None) -> str:
    """A prompt's chips, the first MAX_CHIPS drawn and the rest counted."""
    more = f" … {len(ids) - MAX_CHIPS} more" if len(ids) > MAX_CHIPS else ""
    return chip_row(ids[:MAX_CHIPS], tokenizer) + more


def batch_chips_html(rows: list[list[int]], tokenizer=None) -> str:
    """One row of chips per prompt (s0, s1, …), padded to the longest."""
    width = max((len(r) for r in rows), default=0)
    per_row = max(8, 2 * MAX_CHIPS // max(1, len(rows)))  # chips drawn per prompt
    lines = []
    for b, r in enumerate(rows):
        drawn = min(len(r), per_row)
        pads = min(width - len(r), per_row - drawn)
        cut = " …" if drawn + pads < width else ""
        lines.append(f"<b>s{b}</b> " + chip_row(r[:per_row], tokenizer) + (" " + PAD) * pads + cut)
    return "<br>".join(lines)
