"""Two snapshots of a training run side by side on one prompt: every node's std at each,
in forward order, and each one's next-token candidates — what changed between step 0
and step 200, node by node (as the Branches tab compares two branches)."""

from __future__ import annotations

from dataclasses import dataclass

from ..gpt.nodes import all_hook_names
from ..run.passes import STATISTICS, run_prompt
from ..weights.checkpoints import load_checkpoint
from .snapshots import Snapshot

CANDIDATES = 5


@dataclass(frozen=True)
class SnapshotComparison:
    steps: tuple[int, int]
    rows: list[tuple[str, float, float]]  # hook name, std at the first, at the second
    candidates: tuple[list[tuple[str, float]], list[tuple[str, float]]]  # (piece, prob)

    def largest_change(self) -> tuple[str, float]:
        """The node whose std changed most, as a ratio (second / first)."""
        name, a, b = max(self.rows, key=lambda r: abs(_log_ratio(r[1], r[2])))
        return name, (b / a if a else float("inf"))


def _log_ratio(a: float, b: float) -> float:
    import math
    return math.log((b + 1e-12) / (a + 1e-12))


def compare_snapshots(first: Snapshot, second: Snapshot, ids: list[int],
                      should_stop=None) -> SnapshotComparison:
    """Each snapshot loaded from its file (never the model that trains) and run on
    ``ids``; its statistics read node by node."""
    runs = []
    for snap in (first, second):
        loaded = load_checkpoint(snap.path, should_stop=should_stop)
        run = run_prompt(loaded.model, ids, STATISTICS, should_stop)
        runs.append((loaded.config, run))
        del loaded
    cfg = runs[0][0]
    if runs[1][0] != cfg:
        raise ValueError(f"step {first.step} and step {second.step} are snapshots of "
                         "different models; compare two of one run")
    rows = [(name, float(runs[0][1].views[name].stats.std), float(runs[1][1].views[name].stats.std))
            for name in all_hook_names(cfg, include_pattern=False)
            if name in runs[0][1].views and name in runs[1][1].views]
    candidates = tuple([(piece, float(p)) for piece, p in
                        zip(run.top_pieces[:CANDIDATES], run.top_probs[:CANDIDATES])]
                       for _cfg, run in runs)
    return SnapshotComparison((first.step, second.step), rows, candidates)
