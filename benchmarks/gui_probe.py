"""GUI responsiveness probe: Run N steps in the real window and measure what a user would feel.

Reports, in one run on the same machine:
- worst event-loop lateness: how late a 10 ms QTimer fired while generating (target <= 50 ms);
- GUI decode tokens/s (wall clock from Run to Stopped, so every signal and redraw is included) next to
  headless `main.py trace` tokens/s with the same prompt and settings (target ratio >= 0.9);
- time spent in redraws (median / worst), how many there were and how many of them were frames during the run (each redraws every view);
- frames per second during the run (frames drawn / the run's wall time) and the GUI thread's CPU per frame: the
  views' refresh (the scheduler's redraw, which also lets the plots' scenes mark what changed) plus the window's
  paint that follows it (Qt paints on the next UpdateRequest, after the redraw has returned: timed here);
- a paced playback (--paced: tokens per second, over --paced-steps steps): its frames per second (one frame per
  revealed step is the aim) and the same per-frame CPU.
GUI runs alternate with headless runs (each GUI run is compared with the mean of the headless runs just
before and after it): these shared machines drift by 10-20 % within a minute.

    python benchmarks/gui_probe.py [--steps 100] [--repeats 5] [--paced 8,30] [--paced-steps 40]
        [--json benchmarks/results/gui_probe/<machine>_<date>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import results  # noqa: E402  (benchmarks/results/: where --json writes)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PROMPT = "Once upon a time, in a small village by the sea,"


def headless_tokens_per_s(steps: int, dtype: str) -> float:
    out = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--prompt", PROMPT, "--greedy",
                          "--max-new-tokens", str(steps), "--dtype", dtype], capture_output=True, text=True,
                         check=True)
    stop = json.loads(out.stdout.strip().splitlines()[-1])
    return stop["decode_tokens_per_s"], stop["n_generated"]


def open_window(steps: int, dtype: str):
    """The real main window with the model loaded, greedy, `steps` new tokens, PROMPT in the box."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from gui.app import tune_process
    from gui.main_window import MainWindow
    from gui.theme import Appearance

    app = QApplication.instance() or QApplication([])  # Qt needs the application alive while we run
    tune_process()  # as the app runs: the switch interval, Qt's thread pool, the engine's spin count
    appearance = Appearance()
    appearance.apply()
    settings = QSettings(str(Path(os.environ.get("TMPDIR", "/tmp")) / "tokenstep-probe.ini"), QSettings.IniFormat)
    settings.clear()
    window = MainWindow(settings=settings, appearance=appearance, dtype=dtype)
    window.resize(1600, 1000)
    window.show()
    wait(lambda: window.controller.info is not None)
    window.controls.greedy.setChecked(True)
    window.controls.max_new.setValue(steps)
    window.controls.prompt.setPlainText(PROMPT)
    return app, window


def wait(predicate, timeout=600.0, poll_ms=5, signal=None):
    """Run the real event loop (as app.exec does) until predicate() holds: checked every poll_ms, and at
    each emission of `signal` (a GUI-thread signal that says when it may have come true)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    poll = QTimer()

    def check():
        if predicate():
            loop.quit()

    poll.timeout.connect(check)
    if signal is not None:
        signal.connect(check)
    poll.start(poll_ms)
    deadline = QTimer(singleShot=True)
    deadline.timeout.connect(loop.quit)
    deadline.start(int(timeout * 1000))
    if not predicate():
        loop.exec()
    poll.stop()
    if signal is not None:
        signal.disconnect(check)
    if not predicate():
        raise TimeoutError("the window did not get there in time")


class PaintMeter:
    """The GUI-thread CPU of the window's paints: each UpdateRequest (Qt's 'paint what is marked now') delivered
    to the window is timed, from an event filter that delivers it itself. The views' refresh only marks what
    changed (their labels, and the plots' scenes in paint_together); the pixels are drawn here, later. The
    first paint after a redraw is that frame's paint; the others paint what changed between frames (the status
    bar, the buttons)."""

    def __init__(self, window):
        from PySide6.QtCore import QCoreApplication, QEvent, QObject

        meter, scheduler = self, window.controller.scheduler

        class Filter(QObject):
            def eventFilter(self, obj, event) -> bool:
                if event.type() != QEvent.UpdateRequest or meter.delivering:
                    return False
                meter.delivering = True
                started = time.thread_time()
                try:
                    QCoreApplication.sendEvent(obj, event)
                finally:
                    meter.delivering = False
                ms = (time.thread_time() - started) * 1000
                if scheduler.frames != meter.last_frame:
                    meter.last_frame = scheduler.frames
                    meter.frame_paint_ms.append(ms)
                else:
                    meter.other_paint_ms.append(ms)
                return True

        self.delivering, self.last_frame = False, scheduler.frames
        self.frame_paint_ms: list[float] = []
        self.other_paint_ms: list[float] = []
        self.filter = Filter()
        window.installEventFilter(self.filter)

    def take(self) -> tuple[list[float], list[float]]:
        """The frames' paints and the other paints since the last take (ms of GUI-thread CPU each)."""
        out = self.frame_paint_ms, self.other_paint_ms
        self.frame_paint_ms, self.other_paint_ms = [], []
        return out


def gui_run(window, meter: PaintMeter, pace: float = 0.0) -> dict:
    """Prefill, then Run until the step limit (at `pace` tokens/s, 0: as fast as possible), timing it, its
    frames and the event loop's lateness meanwhile."""
    from PySide6.QtCore import QElapsedTimer, QTimer

    c = window.controller
    c.pacer.set_pace(pace)
    window.prefill()
    wait(lambda: c.prefilled and not c.busy)
    settle_ms(300)  # the prefill's own frame painted before the run's are counted
    c.scheduler.redraw_ms.clear()
    c.scheduler.redraw_cpu_ms.clear()
    meter.take()
    turns_before, frames_before = c.scheduler.turns_taken, c.scheduler.frames
    lateness: list[float] = []
    clock = QElapsedTimer()
    tick = QTimer()
    tick.setInterval(10)

    stamps: list[float] = []

    def on_tick():
        lateness.append(max(clock.restart() - 10, 0))
        stamps.append(time.perf_counter())

    tick.timeout.connect(on_tick)
    clock.start()
    tick.start()
    cpu_started, process_cpu_started = time.thread_time(), time.process_time()
    started = time.perf_counter()
    window.run()
    # told by the controller when the run ends, with a slow poll behind it: the probe's own wake-ups (a
    # 10 ms poll took ~0.2 ms of GUI CPU a step) must not be what it measures
    wait(lambda: c.stopped is not None and not c.running, poll_ms=250, signal=c.state_changed)
    elapsed = time.perf_counter() - started
    gui_cpu = time.thread_time() - cpu_started
    process_cpu = time.process_time() - process_cpu_started  # GUI thread + worker thread (not the engine)
    frames = c.scheduler.frames - frames_before  # every redraw since Run, the one after the end included
    tick.stop()
    c.pacer.set_pace(0.0)
    redraws = list(c.scheduler.redraw_ms)
    refresh_cpu = list(c.scheduler.redraw_cpu_ms)
    frame_paints, other_paints = meter.take()
    n = len(c.steps)
    worst = max(range(len(lateness)), key=lateness.__getitem__) if lateness else 0
    # a fast run's frames are those the scheduler let through while the run was on (turns); a paced run
    # draws one per revealed step and is not budgeted, so all its redraws count
    run_frames = c.scheduler.turns_taken - turns_before if not pace else frames
    return {"steps": n, "pace_tokens_per_s": pace, "wall_s": elapsed,
            "gui_tokens_per_s": n / elapsed, "worst_lateness_ms": max(lateness),
            # when the worst tick came, from Run (0) to the end of the run (1): start-up, steady state, end
            "worst_lateness_at": (stamps[worst] - started) / elapsed if stamps else 0.0,
            "p99_lateness_ms": sorted(lateness)[int(len(lateness) * 0.99) - 1] if lateness else 0.0,
            "redraws": len(redraws), "run_frames": run_frames, "frames_per_s": run_frames / elapsed,
            "redraw_ms_median": statistics.median(redraws) if redraws else 0.0,
            "redraw_ms_worst": max(redraws) if redraws else 0.0,
            # GUI-thread CPU: each redraw's refresh, the window's paint that follows it, their sum per frame
            # (mean); and the paints between frames (status bar, buttons), per step
            "refresh_cpu_ms_median": statistics.median(refresh_cpu) if refresh_cpu else 0.0,
            "frame_paint_cpu_ms_median": statistics.median(frame_paints) if frame_paints else 0.0,
            "frame_cpu_ms": (sum(refresh_cpu) + sum(frame_paints)) / max(len(refresh_cpu), 1),
            "other_paints": len(other_paints), "other_paint_cpu_ms_per_step": sum(other_paints) / max(n, 1),
            "gui_thread_cpu_ms_per_step": gui_cpu * 1000 / max(n, 1),
            "gui_process_cpu_ms_per_step": process_cpu * 1000 / max(n, 1),
            "session_tokens_per_s": c.stopped.decode_tokens_per_s, "stop": c.stopped.reason}


def settle_ms(ms: int) -> None:
    """Let the event loop run for `ms` (pending paints, the worker's last replies)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def describe(run: dict) -> str:
    return (f"{run['frames_per_s']:.1f} frames/s ({run['run_frames']} frames in {run['wall_s']:.2f} s), GUI CPU per frame "
            f"{run['frame_cpu_ms']:.1f} ms (refresh median {run['refresh_cpu_ms_median']:.1f}, paint median "
            f"{run['frame_paint_cpu_ms_median']:.1f}); {run['other_paints']} paints between frames, "
            f"{run['other_paint_cpu_ms_per_step']:.2f} ms per step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5,
                        help="GUI runs, each between two headless runs (the machine's speed drifts)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--paced", default="8,30",
                        help="paces (tokens/s) of the paced runs after the fast ones, comma-separated; '' for none")
    parser.add_argument("--paced-steps", type=int, default=40, help="steps of each paced run")
    results.json_option(parser, "gui_probe")
    args = parser.parse_args()
    _app, window = open_window(args.steps, args.dtype)
    meter = PaintMeter(window)
    headless = [headless_tokens_per_s(args.steps, args.dtype)[0]]
    runs = []
    for _ in range(args.repeats):
        run = gui_run(window, meter)
        headless.append(headless_tokens_per_s(args.steps, args.dtype)[0])
        run["headless_tokens_per_s"] = (headless[-2] + headless[-1]) / 2  # the runs just before and after
        run["ratio_gui_to_headless"] = run["gui_tokens_per_s"] / run["headless_tokens_per_s"]
        runs.append(run)
        print(f"run {len(runs)}: {run['steps']} steps ({run['stop']}), GUI {run['gui_tokens_per_s']:.1f} tokens/s, "
              f"headless {run['headless_tokens_per_s']:.1f}, ratio {run['ratio_gui_to_headless']:.3f}; "
              f"worst lateness {run['worst_lateness_ms']:.0f} ms at {run['worst_lateness_at']:.2f} of the run (p99 {run['p99_lateness_ms']:.0f}); "
              f"{run['redraws']} redraws, {run['run_frames']} frames during the run; GUI thread CPU "
              f"{run['gui_thread_cpu_ms_per_step']:.2f} ms per step; {describe(run)}", flush=True)
    paced = []
    window.controls.max_new.setValue(args.paced_steps)
    for pace in [float(x) for x in args.paced.split(",") if x.strip()]:
        run = gui_run(window, meter, pace)
        paced.append(run)
        print(f"paced {pace:g} tokens/s: {run['steps']} steps ({run['stop']}); {describe(run)}; worst lateness "
              f"{run['worst_lateness_ms']:.0f} ms", flush=True)
    window.close()
    ratios = [r["ratio_gui_to_headless"] for r in runs]
    summary = {"steps": args.steps, "repeats": args.repeats, "runs": runs, "paced_runs": paced,
               "worst_lateness_ms": max(r["worst_lateness_ms"] for r in runs),
               "ratio_gui_to_headless_median": statistics.median(ratios),
               "ratio_gui_to_headless_min": min(ratios),
               "gui_thread_cpu_ms_per_step_median": statistics.median(r["gui_thread_cpu_ms_per_step"] for r in runs),
               "frames_per_s_median": statistics.median(r["frames_per_s"] for r in runs),
               "frame_cpu_ms_median": statistics.median(r["frame_cpu_ms"] for r in runs + paced)}
    print(f"worst event-loop lateness over all runs  {summary['worst_lateness_ms']:.0f} ms   (target <= 30)")
    print(f"GUI tokens/s / headless tokens/s         median {summary['ratio_gui_to_headless_median']:.3f}, "
          f"lowest {summary['ratio_gui_to_headless_min']:.3f}   (target >= 0.9)")
    print(f"frames/s during a fast run               median {summary['frames_per_s_median']:.1f}   (target >= 15)")
    for run in paced:
        print(f"frames/s paced at {run['pace_tokens_per_s']:g} tokens/s             {run['frames_per_s']:.1f}   "
              f"(target: one per step, >= 30 where the pace asks for it)")
    print(f"GUI CPU per frame (refresh + paint)      median {summary['frame_cpu_ms_median']:.1f} ms   (target <= 8)")
    results.write(args.json, "gui_probe", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
