"""First paint: from constructing the main window to the first paint of the block
graph's drawing and of the prompt's output on screen, in a fresh process each time (the
modules the window imports counted, as at a launch), the model's load not awaited. Two rows in one run, alternating: the window as it starts (the first
workspace's views built, the others when first shown), and the same window with every
view built before it is shown (what starting cost when the window built all 24).

    python benchmarks/bench_first_paint.py [--rounds 5] [--platform offscreen]

Budget (issue: workspaces): the first paint at most 600 ms, median of 5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, tempfile, time
start_imports = time.perf_counter()
from PySide6.QtCore import QEvent, QObject, QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
from explorer.core.sources import ModelSpec
from explorer.ui.window.main_window import MainWindow
from explorer.ui.views.registry import BY_KEY

class FirstPaint(QObject):
    # when the block graph's drawing and the prompt have both been painted
    at = None
    def __init__(self):
        super().__init__()
        self.painted = set()
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Paint and self.at is None and watched in self.targets:
            self.painted.add(watched)
            if len(self.painted) == len(self.targets):
                self.at = time.perf_counter()
        return False

every = sys.argv[1] == "every"
folder = tempfile.mkdtemp()
painted = FirstPaint()
start = time.perf_counter()
window = MainWindow(ModelSpec(preset="tiny"), QSettings(f"{folder}/s.ini", QSettings.IniFormat))
painted.targets = {window.graph.view.viewport(), window.prompt.output.viewport()}
for target in painted.targets:
    target.installEventFilter(painted)
if every:
    for key in BY_KEY:
        window.view(key)
built = time.perf_counter()
window.show()
while painted.at is None:
    app.processEvents()
print(json.dumps({"imports_ms": (start - start_imports) * 1000, "build_ms": (built - start) * 1000,
                  "first_paint_ms": (painted.at - start) * 1000, "views": len(window.views)}))
window.close()
os._exit(0)
"""


def once(mode: str, platform: str) -> dict:
    env = {**os.environ, "QT_QPA_PLATFORM": platform, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    line = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if not line:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(line[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--platform", default="offscreen")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.common import machine_line
    print(f"machine: {machine_line()}; Qt platform {args.platform}")
    rows: dict[str, list[dict]] = {"first workspace": [], "every view": []}
    once("first", args.platform)  # a warm-up: the files in the page cache, as at a relaunch
    for _ in range(args.rounds):
        for mode, name in (("first", "first workspace"), ("every", "every view")):
            rows[name].append(once(mode, args.platform))
    for name, runs in rows.items():
        paint = [r["first_paint_ms"] for r in runs]
        build = [r["build_ms"] for r in runs]
        print(f"{name:16s} ({runs[0]['views']:2d} views built): first paint median "
              f"{statistics.median(paint):6.0f} ms, worst {max(paint):6.0f} ms; window built "
              f"in {statistics.median(build):5.0f} ms (median)")
    ratio = statistics.median(r["first_paint_ms"] for r in rows["first workspace"]) / \
        statistics.median(r["first_paint_ms"] for r in rows["every view"])
    print(f"first workspace / every view: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
