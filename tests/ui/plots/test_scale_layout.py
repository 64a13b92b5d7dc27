"""Matrices to scale: the boxes keep their proportions, and no label touches a box or
another label, for the blocks of GPT-2 small, SmolLM2-135M, Llama 3.2 1B and the tiny
preset, in a laptop's dock and a wide one."""

import pytest

from explorer.ui.plots.scale_layout import GAP, PAD, _extent, scale_layout

# (rows, columns) as stored: W_query, W_key, W_value, out_proj, Linear 1 (2, 3), Linear 2
BLOCKS = {
    "gpt2-small": [(768, 768)] * 4 + [(3072, 768), (768, 3072)],
    "smollm2-135m": [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576),
                     (1536, 576), (576, 1536)],
    "llama3.2-1b": [(2048, 2048), (512, 2048), (512, 2048), (2048, 2048), (8192, 2048),
                    (8192, 2048), (2048, 8192)],
    "tiny": [(32, 32)] * 4 + [(128, 32), (32, 128)],
}
LABEL = (68.0, 34.0)  # "out_proj\n3,072 × 768" in the window's font, about


def boxes(shapes, labels, drawn):
    """Each box's and each label's rectangle in pixels: (left, top, right, bottom)."""
    s, out, words = drawn.scale, [], []
    for (rows, cols), (w, h), x, y in zip(shapes, labels, drawn.xs, drawn.label_ys):
        out.append((x * s, 0.0, (x + cols) * s, rows * s))
        words.append((x * s, y * s, x * s + w, y * s + h))
    return out, words


def apart(a, b) -> bool:
    """At least PAD px between the rectangles, on some side."""
    return a[2] + PAD <= b[0] + 1e-6 or b[2] + PAD <= a[0] + 1e-6 or \
        a[3] + PAD <= b[1] + 1e-6 or b[3] + PAD <= a[1] + 1e-6


@pytest.mark.parametrize("block", list(BLOCKS))
@pytest.mark.parametrize("size", [(470, 480), (1000, 700), (300, 200)])
def test_labels_never_touch_a_box_or_each_other_and_all_fit(block, size):
    shapes = BLOCKS[block]
    labels = [LABEL] * len(shapes)
    drawn = scale_layout(shapes, labels, *size)
    rects, words = boxes(shapes, labels, drawn)
    for i, word in enumerate(words):
        assert all(apart(word, r) for r in rects), (block, i)
        assert all(apart(word, w) for j, w in enumerate(words) if j != i), (block, i)
    for i, (rect, word) in enumerate(zip(rects, words)):
        assert word[0] == rect[0] and word[1] >= rect[3] + PAD - 1e-6  # under its own box
        if i + 1 < len(rects):
            assert rects[i + 1][0] == pytest.approx(rect[2] + GAP)
    right = max(max(r[2] for r in rects), max(w[2] for w in words))
    bottom = max(max(r[3] for r in rects), max(w[3] for w in words))
    assert right <= size[0] + 1e-6 and bottom <= size[1] + 1e-6
    # to scale: every box's pixels per row and per column are the same
    for (rows, cols), r in zip(shapes, rects):
        assert r[2] - r[0] == pytest.approx(cols * drawn.scale)
        assert r[3] - r[1] == pytest.approx(rows * drawn.scale)
    # the largest scale that fits: 1% more and something is cut
    bigger = drawn.scale * 1.01
    wider = _extent(shapes, labels, bigger)
    assert wider.width * bigger > size[0] or wider.height * bigger > size[1]
