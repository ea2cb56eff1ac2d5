"""A frame's GUI CPU, this tree against a reference commit, side by side in one run.

Two windows (1600x1000, the default model, --steps sampled steps, 60 unless asked, seed 7), one per tree, each in
its own process, take turns: one draws --frames frames while the other waits, then the other, --turns times each. A
frame shows the next step as a paced playback reveals it (the history holds the later steps back) and costs the GUI
thread's CPU from the redraw to the end of the events it set off (every view's refresh, the window's paint, the
layouts asked). These machines drift by 10-30 % within a minute; taking turns, both trees see the same drift, and
the ratio holds where the absolute figures do not.

    python benchmarks/frame_ab.py --ref 054291b [--turns 20] [--frames 41] [--steps 60]
        [--json benchmarks/results/frames/<name>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import results  # noqa: E402  (benchmarks/results/: where --json writes)
import turns  # noqa: E402


def child(side: turns.Side, n_turns: int, frames: int, steps: int) -> None:
    """One window of one tree: draw `frames` frames at each of its turns; print what each cost."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, side.tree)
    os.chdir(side.tree)
    from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSettings
    from PySide6.QtWidgets import QApplication

    from gui.app import tune_process
    from gui.main_window import MainWindow
    from gui.theme import Appearance
    from gui.views.base import View

    app = QApplication.instance() or QApplication([])
    tune_process()
    appearance = Appearance()
    appearance.apply()
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "frame_ab.ini"), QSettings.IniFormat)
    window = MainWindow(settings=settings, appearance=appearance, language="en")
    window.resize(1600, 1000)
    window.show()
    c = window.controller

    def wait(predicate) -> None:
        deadline = time.monotonic() + 600
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("the window did not get there in time")
            app.processEvents()
            time.sleep(0.005)

    wait(lambda: c.info is not None)
    controls = window.controls
    controls.greedy.setChecked(False)
    controls.seed.setValue(7)
    controls.max_new.setValue(steps)
    controls.prompt.setPlainText("Once upon a time, in a small village by the sea,")
    window.prefill()
    wait(lambda: c.prefilled and not c.busy)
    window.run()
    wait(lambda: c.stopped is not None and not c.running)
    history, n = c.history, len(c.steps)

    def show_upto(m: int) -> None:
        """The first m steps, as a paced playback shows them: the log as far as step m's event."""
        history.select(None)
        history.horizon = m
        step = history._path[m - 1]
        history._log_cut = next(i + 1 for i, event in enumerate(history._log) if event is step)

    refresh: dict[str, list[float]] = defaultdict(list)
    for view in [v for v in window.findChildren(View) if v.isVisible()]:
        def timed(original=view.refresh, name=type(view).__name__):
            started = time.thread_time()
            original()
            refresh[name].append((time.thread_time() - started) * 1000)
        view.refresh = timed
    paint = [0.0]

    class Paints(QObject):
        def eventFilter(self, obj, event) -> bool:
            if event.type() != QEvent.Paint:
                return False
            started = time.thread_time()
            obj.event(event)
            paint[0] += (time.thread_time() - started) * 1000
            return True

    def frame(m: int) -> float:
        show_upto(m)
        started = time.thread_time()
        c.scheduler.redraw_now(force=True)
        QCoreApplication.sendPostedEvents()
        app.processEvents()
        return (time.thread_time() - started) * 1000

    for k in range(frames):  # a first pass: every text and layout seen once, in both trees alike
        frame(n - frames + 1 + k)
    refresh.clear()
    paints = Paints()
    app.installEventFilter(paints)
    side.ready()
    costs = []
    for _ in side.turns(n_turns):
        costs += [frame(n - frames + 1 + k) for k in range(frames)]
    app.removeEventFilter(paints)
    print(json.dumps({"frames_ms": costs, "paint_ms_per_frame": paint[0] / len(costs),
                      "refresh_ms_median": {k: statistics.median(v) for k, v in sorted(refresh.items())}}), flush=True)
    window.close()


def summary(costs: list[float]) -> dict:
    ordered = sorted(costs)
    quarter = len(ordered) // 4
    return {"median": statistics.median(ordered), "middle_half_mean": statistics.mean(ordered[quarter:-quarter])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", help="the reference commit (checked out in a temporary worktree)")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--frames", type=int, default=41, help="frames per turn (each a step of the last ones)")
    parser.add_argument("--steps", type=int, default=60, help="steps each window holds (more: a longer context)")
    turns.child_option(parser)
    results.json_option(parser, "frames")
    args = parser.parse_args()
    if args.child:
        child(turns.Side(*args.child), args.turns, args.frames, args.steps)
        return 0
    if not args.ref:
        parser.error("--ref is needed")
    out = turns.run(__file__, args.ref, ["--turns", str(args.turns), "--frames", str(args.frames), "--steps",
                                         str(args.steps)])
    report = {"ref": args.ref, "turns": args.turns, "frames_per_turn": args.frames, "steps": args.steps}
    for name in ("this", "reference"):
        s = summary(out[name]["frames_ms"])
        report[name] = {**s, "paint_ms_per_frame": out[name]["paint_ms_per_frame"],
                        "refresh_ms_median": out[name]["refresh_ms_median"], "n": len(out[name]["frames_ms"])}
        views = " ".join(f"{k.removesuffix('View')} {v:.2f}" for k, v in out[name]["refresh_ms_median"].items())
        print(f"{name:9s} frame median {s['median']:.2f} ms (middle half mean {s['middle_half_mean']:.2f}); paint "
              f"{out[name]['paint_ms_per_frame']:.2f} ms a frame; refresh medians: {views}")
    report["ratio_median"] = report["this"]["median"] / report["reference"]["median"]
    print(f"this / reference: {report['ratio_median']:.3f} (median frame)")
    results.write(args.json, "frames", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
