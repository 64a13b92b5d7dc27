"""GUI responsiveness: how late the GUI thread's event loop runs once the window is shown
(its first views built, the vocabulary read and pyqtgraph imported on a thread, gpt2-small
loading), runs a 1024-token prompt, generates 64 tokens, and generates them again while
the Sampling tab's temperature slider is dragged. Budget (DESIGN.md): no GUI-thread slot
over 50 ms. Two probes, every 5 ms:

- input: another process writes the time each probe was due into a pipe that a
  QSocketNotifier on the GUI thread reads; the way keyboard and mouse events arrive
  (a file descriptor, dispatched with the posted events, from outside the process), so
  its lateness is how long a key press would wait;
- timer: a QTimer on the GUI thread. Qt's glib event loop runs timers at idle priority
  once they have fired, so while queued events keep arriving (a view's repaints, one
  after another) timers wait for all of them: this lateness is a stricter bound.

    python benchmarks/bench_gui_latency.py [--preset gpt2-small] [--tab attention]

--tab shows a view first (its key: attention, gelu, distributions, lens, explain,
ln_compare, ...), in its workspace, so its redraw is measured too; by default the tensor
inspector (Look) is in front. The last phase visits every workspace and every tab for the
first time, each view built as it is first shown.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QSocketNotifier, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from benchmarks.app_window import open_window, waiter  # noqa: E402
from benchmarks.common import machine_line  # noqa: E402
from explorer.core.base.resources import resource_path  # noqa: E402

PERIOD_MS = 5
WRITER = f"""
import os, struct, time
due = time.monotonic()
while True:
    due += {PERIOD_MS} / 1000
    delay = due - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    os.write(1, struct.pack("d", due))
"""


class Probe:
    """Both probes; ``take()`` returns their lateness (ms) since the last take."""

    def __init__(self) -> None:
        self.timer_late: list[float] = []
        self.input_late: list[float] = []
        self.last = time.perf_counter()
        self.timer = QTimer()
        self.timer.setInterval(PERIOD_MS)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        # The writer is another process, so it never waits for this one's GIL; it writes
        # the time each probe was due (CLOCK_MONOTONIC, shared by both processes).
        self.writer = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE)
        self.read_fd = self.writer.stdout.fileno()
        os.set_blocking(self.read_fd, False)
        self.pending = b""
        self.notifier = QSocketNotifier(self.read_fd, QSocketNotifier.Read)
        self.notifier.activated.connect(self.read)

    def tick(self) -> None:
        now = time.perf_counter()
        self.timer_late.append(max(0.0, (now - self.last) * 1000 - PERIOD_MS))
        self.last = now

    def read(self) -> None:
        now = time.monotonic()
        try:
            self.pending += os.read(self.read_fd, 1 << 16)
        except BlockingIOError:
            return
        whole = len(self.pending) // 8 * 8
        for (due,) in struct.iter_unpack("d", self.pending[:whole]):
            self.input_late.append(max(0.0, (now - due) * 1000))
        self.pending = self.pending[whole:]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        out = np.asarray(self.input_late), np.asarray(self.timer_late)
        self.input_late, self.timer_late = [], []
        return out

    def close(self) -> None:
        self.timer.stop()
        self.notifier.setEnabled(False)
        self.writer.kill()
        self.writer.wait()


class Drag:
    """The Sampling tab in front (Play) and its temperature slider moved one notch every
    20 ms, back and forth, as a hand dragging it (each move reshapes and redraws)."""

    def __init__(self, window, app) -> None:
        self.slider = window.view("sampling").temperature
        self.moves, self.direction = 0, 1
        self.timer = QTimer(interval=20)
        self.timer.timeout.connect(self.move)
        self.timer.start()

    def move(self) -> None:
        slider = self.slider
        if not slider.minimum() < slider.value() + self.direction < slider.maximum():
            self.direction = -self.direction
        slider.setValue(slider.value() + 5 * self.direction)
        self.moves += 1


def visit_every_tab(window, wait, probe: Probe) -> tuple[dict[str, float], tuple]:
    """Each workspace, then each of its tabs, for the first time: the views built as the
    user first shows them. Returns each tab's largest input lateness (ms) and the whole
    visit's lateness (``Probe.take``'s)."""
    from explorer.ui.views.registry import WORKSPACES, in_workspace
    worst, inputs, timers = {}, [], []
    for ws in WORKSPACES:
        window.workspaces.show(ws.key)
        for spec in in_workspace(ws.key):
            window.show_view(spec.key)
            pause = time.perf_counter()
            wait(lambda: time.perf_counter() - pause > 0.15)
            inp, tim = probe.take()
            inputs.append(inp)
            timers.append(tim)
            worst[spec.key] = float(inp.max()) if len(inp) else 0.0
    return worst, (np.concatenate(inputs), np.concatenate(timers))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt2-small")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--tab", default=None, help="a right-hand tab to show, e.g. attention")
    ap.add_argument("--training", type=int, default=0, metavar="STEPS",
                    help="also train the mini model this many steps in the Train tab, Follow "
                         "training on (each snapshot loaded and the prompt run on it), until "
                         "the trained model is loaded and its pass drawn")
    ap.add_argument("--no-follow", action="store_true",
                    help="with --training: Follow training off (the snapshots not loaded)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for the engine (default: the app's own choice)")
    args = ap.parse_args()
    app = QApplication([])
    probe = Probe()

    wait = waiter(app)

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        window = open_window(args.preset, tmp)  # built and shown: bench_first_paint's part
        built = time.perf_counter() - start
        probe.take()
        start = time.perf_counter()
        wait(lambda: time.perf_counter() - start > 1.5)
        phases = {"start-up, once shown (1.5 s)": probe.take()}
        wait(lambda: window.session.model is not None)
        phases["model load"] = probe.take()
        if args.threads:
            done = []
            window.engine.submit(lambda ctx: torch.set_num_threads(args.threads), "threads",
                                 finished=done.append)
            wait(lambda: bool(done))
        if args.tab:
            from explorer.ui.views.registry import BY_KEY
            if args.tab not in BY_KEY:
                raise SystemExit(f"no view {args.tab!r}; one of {', '.join(BY_KEY)}")
            window.show_view(args.tab)
            app.processEvents()
        text = resource_path("the-verdict.txt").read_text(encoding="utf-8")[:6000]
        window.prompt.prompt.setPlainText(text)  # over 1024 tokens: cropped to the context
        window.prompt.max_tokens.setValue(1)
        app.processEvents()
        probe.take()
        window.prompt.request_run()
        wait(lambda: not window.running)
        phases["1024-token prompt pass"] = probe.take()
        window.prompt.prompt.setPlainText("Every effort moves you")
        window.prompt.max_tokens.setValue(args.new_tokens)
        app.processEvents()
        probe.take()
        window.prompt.request_run()
        wait(lambda: not window.running)
        phases[f"prompt + {args.new_tokens} generated tokens"] = probe.take()
        window.show_view("sampling")  # Play, built and drawn before the phase begins
        pause = time.perf_counter()
        wait(lambda: time.perf_counter() - pause > 1.0)
        drag = Drag(window, app)  # the Sampling tab in front, its slider moving
        probe.take()
        window.prompt.request_run()
        wait(lambda: not window.running)
        drag.timer.stop()
        phases["same, dragging temperature"] = probe.take()
        print(f"the sampling view reshaped {drag.moves} times while dragging")
        if args.training:
            window.show_view("train")
            panel = window.view("train")
            panel.out_dir.setText(os.path.join(tmp, "run"))
            panel.steps.setValue(args.training)
            panel.follow.setChecked(not args.no_follow)
            app.processEvents()
            probe.take()
            panel.start()
            wait(lambda: panel.job is None)
            # the hand-over: the trained model loaded, the prompt run on it and drawn
            session = window.session
            wait(lambda: session.model is not None and session.prompt is not None
                 and session.model.spec.checkpoint == panel.checkpoint and not window.running)
            pause = time.perf_counter()
            wait(lambda: time.perf_counter() - pause > 0.5)
            how = "not followed" if args.no_follow else "followed"
            phases[f"training mini, {args.training} steps, {how}"] = probe.take()
            print(f"training: {panel.status.text()[:90]}")
        probe.take()
        worst, phases["every tab shown the first time"] = visit_every_tab(window, wait, probe)
        print(f"generated: {len(window.session.steps)} tokens; {window.status_text.text()}")
        window.close()
    probe.close()
    print(f"machine: {machine_line()}")
    print(f"window built and shown in {1000 * built:.0f} ms (before the probes' first turn)")
    tab = f", {args.tab} tab in front" if args.tab else ""
    print(f"GUI event-loop lateness with {args.preset}{tab} (probes every {PERIOD_MS} ms; "
          "budget 50 ms):")
    print(f"  {'':34s} {'input probe':>25s}   {'timer probe':>25s}")
    for name, (inp, tim) in phases.items():
        if not len(inp) or not len(tim):  # over before a probe came
            print(f"  {name:34s} (no probe in this phase)")
            continue
        print(f"  {name:34s} max {inp.max():6.1f} ms  p99 {np.percentile(inp, 99):5.1f} ms   "
              f"max {tim.max():6.1f} ms  p99 {np.percentile(tim, 99):5.1f} ms")
    slowest = sorted(worst.items(), key=lambda kv: -kv[1])[:6]
    print("  the tabs shown first with the largest input lateness: "
          + ", ".join(f"{key} {ms:.0f} ms" for key, ms in slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
