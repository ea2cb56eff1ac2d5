"""GUI responsiveness probe: Run N steps in the real window and measure what a user would feel.

Reports, in one run on the same machine:
- worst event-loop lateness: how late a 10 ms QTimer fired while generating (target <= 50 ms);
- GUI decode tokens/s (wall clock from Run to Stopped, so every signal and redraw is included) next to
  headless `main.py trace` tokens/s with the same prompt and settings (target ratio >= 0.9);
- time spent in redraws (median / worst), how many there were and how many of them were frames during the run (each redraws every view).
GUI runs alternate with headless runs (each GUI run is compared with the mean of the headless runs just
before and after it): these shared machines drift by 10-20 % within a minute.

    python benchmarks/gui_probe.py [--steps 100] [--repeats 5] [--json benchmarks/results/gui_probe/<machine>_<date>.json]
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


def gui_run(window) -> dict:
    """Prefill, then Run until the step limit, timing it and the event loop's lateness meanwhile."""
    from PySide6.QtCore import QElapsedTimer, QTimer

    c = window.controller
    window.prefill()
    wait(lambda: c.prefilled and not c.busy)
    c.scheduler.redraw_ms.clear()
    turns_before = c.scheduler.turns_taken
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
    tick.stop()
    redraws = list(c.scheduler.redraw_ms)
    n = len(c.steps)
    worst = max(range(len(lateness)), key=lateness.__getitem__) if lateness else 0
    return {"steps": n, "gui_tokens_per_s": n / elapsed, "worst_lateness_ms": max(lateness),
            # when the worst tick came, from Run (0) to the end of the run (1): start-up, steady state, end
            "worst_lateness_at": (stamps[worst] - started) / elapsed if stamps else 0.0,
            "p99_lateness_ms": sorted(lateness)[int(len(lateness) * 0.99) - 1] if lateness else 0.0,
            "redraws": len(redraws), "run_frames": c.scheduler.turns_taken - turns_before,
            "redraw_ms_median": statistics.median(redraws) if redraws else 0.0,
            "redraw_ms_worst": max(redraws) if redraws else 0.0,
            "gui_thread_cpu_ms_per_step": gui_cpu * 1000 / max(n, 1),
            "gui_process_cpu_ms_per_step": process_cpu * 1000 / max(n, 1),
            "session_tokens_per_s": c.stopped.decode_tokens_per_s, "stop": c.stopped.reason}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5,
                        help="GUI runs, each between two headless runs (the machine's speed drifts)")
    parser.add_argument("--dtype", default="auto")
    results.json_option(parser, "gui_probe")
    args = parser.parse_args()
    _app, window = open_window(args.steps, args.dtype)
    headless = [headless_tokens_per_s(args.steps, args.dtype)[0]]
    runs = []
    for _ in range(args.repeats):
        run = gui_run(window)
        headless.append(headless_tokens_per_s(args.steps, args.dtype)[0])
        run["headless_tokens_per_s"] = (headless[-2] + headless[-1]) / 2  # the runs just before and after
        run["ratio_gui_to_headless"] = run["gui_tokens_per_s"] / run["headless_tokens_per_s"]
        runs.append(run)
        print(f"run {len(runs)}: {run['steps']} steps ({run['stop']}), GUI {run['gui_tokens_per_s']:.1f} tokens/s, "
              f"headless {run['headless_tokens_per_s']:.1f}, ratio {run['ratio_gui_to_headless']:.3f}; "
              f"worst lateness {run['worst_lateness_ms']:.0f} ms at {run['worst_lateness_at']:.2f} of the run (p99 {run['p99_lateness_ms']:.0f}); "
              f"{run['redraws']} redraws, {run['run_frames']} frames during the run; GUI thread CPU "
              f"{run['gui_thread_cpu_ms_per_step']:.2f} ms per step", flush=True)
    window.close()
    ratios = [r["ratio_gui_to_headless"] for r in runs]
    summary = {"steps": args.steps, "repeats": args.repeats, "runs": runs,
               "worst_lateness_ms": max(r["worst_lateness_ms"] for r in runs),
               "ratio_gui_to_headless_median": statistics.median(ratios),
               "ratio_gui_to_headless_min": min(ratios),
               "gui_thread_cpu_ms_per_step_median": statistics.median(r["gui_thread_cpu_ms_per_step"] for r in runs)}
    print(f"worst event-loop lateness over all runs  {summary['worst_lateness_ms']:.0f} ms   (target <= 50)")
    print(f"GUI tokens/s / headless tokens/s         median {summary['ratio_gui_to_headless_median']:.3f}, "
          f"lowest {summary['ratio_gui_to_headless_min']:.3f}   (target >= 0.9)")
    results.write(args.json, "gui_probe", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
