"""GUI responsiveness probe: Run N steps in the real window and measure what a user would feel.

Reports, in one run on the same machine:
- worst event-loop lateness: how late a 10 ms QTimer fired while generating (target <= 50 ms);
- GUI decode tokens/s (wall clock from Run to Stopped, so every signal and redraw is included) next to
  headless `main.py trace` tokens/s with the same prompt and settings (target ratio >= 0.9);
- time spent in redraws (median / worst) and how many there were.

    python benchmarks/gui_probe.py [--steps 100] [--json out.json]
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
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PROMPT = "Once upon a time, in a small village by the sea,"


def headless_tokens_per_s(steps: int, dtype: str) -> float:
    out = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--prompt", PROMPT, "--greedy",
                          "--max-new-tokens", str(steps), "--dtype", dtype], capture_output=True, text=True,
                         check=True)
    stop = json.loads(out.stdout.strip().splitlines()[-1])
    return stop["decode_tokens_per_s"], stop["n_generated"]


def gui_run(steps: int, dtype: str) -> dict:
    from PySide6.QtCore import QElapsedTimer, QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from gui.main_window import MainWindow
    from gui.theme import Appearance

    _app = QApplication.instance() or QApplication([])  # Qt needs the application alive while we run
    appearance = Appearance()
    appearance.apply()
    settings = QSettings(str(Path(os.environ.get("TMPDIR", "/tmp")) / "tokenstep-probe.ini"), QSettings.IniFormat)
    settings.clear()
    window = MainWindow(settings=settings, appearance=appearance, dtype=dtype)
    window.resize(1600, 1000)
    window.show()
    c = window.controller

    def wait(predicate, timeout=600.0, poll_ms=5):
        """Run the real event loop (as app.exec does) until predicate() holds (checked every poll_ms)."""
        loop = QEventLoop()
        poll = QTimer()
        poll.timeout.connect(lambda: loop.quit() if predicate() else None)
        poll.start(poll_ms)
        deadline = QTimer(singleShot=True)
        deadline.timeout.connect(loop.quit)
        deadline.start(int(timeout * 1000))
        if not predicate():
            loop.exec()
        poll.stop()
        if not predicate():
            raise TimeoutError("the window did not get there in time")

    wait(lambda: c.info is not None)
    window.controls.greedy.setChecked(True)
    window.controls.max_new.setValue(steps)
    window.controls.prompt.setPlainText(PROMPT)
    window.prefill()
    wait(lambda: c.prefilled and not c.busy)

    c.redraw_ms.clear()
    lateness: list[float] = []
    clock = QElapsedTimer()
    tick = QTimer()
    tick.setInterval(10)

    def on_tick():
        lateness.append(max(clock.restart() - 10, 0))

    tick.timeout.connect(on_tick)
    clock.start()
    tick.start()
    cpu_started, process_cpu_started = time.thread_time(), time.process_time()
    started = time.perf_counter()
    window.run()
    # a slow poll: the probe's own wake-ups must not be what it measures
    wait(lambda: c.stopped is not None and not c.running, poll_ms=10)
    elapsed = time.perf_counter() - started
    gui_cpu = time.thread_time() - cpu_started
    process_cpu = time.process_time() - process_cpu_started  # GUI thread + worker thread (not the engine)
    tick.stop()
    redraws = list(c.redraw_ms)
    n = len(c.steps)
    result = {"steps": n, "gui_tokens_per_s": n / elapsed, "worst_lateness_ms": max(lateness),
              "p99_lateness_ms": sorted(lateness)[int(len(lateness) * 0.99) - 1] if lateness else 0.0,
              "redraws": len(redraws), "redraw_ms_median": statistics.median(redraws) if redraws else 0.0,
              "redraw_ms_worst": max(redraws) if redraws else 0.0,
              "gui_thread_cpu_ms_per_step": gui_cpu * 1000 / max(n, 1),
              "gui_process_cpu_ms_per_step": process_cpu * 1000 / max(n, 1),
              "session_tokens_per_s": c.stopped.decode_tokens_per_s, "stop": c.stopped.reason}
    window.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="override sys.setswitchinterval for the GUI process (experiments)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads in the GUI process (experiments)")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    gui = gui_run(args.steps, args.dtype)
    headless, n = headless_tokens_per_s(args.steps, args.dtype)
    gui["headless_tokens_per_s"] = headless
    gui["ratio_gui_to_headless"] = gui["gui_tokens_per_s"] / headless
    print(f"steps {gui['steps']} (headless {n}), stop: {gui['stop']}")
    print(f"worst event-loop lateness  {gui['worst_lateness_ms']:7.1f} ms   (p99 {gui['p99_lateness_ms']:.1f} ms; "
          "target <= 50)")
    print(f"GUI tokens/s (wall)        {gui['gui_tokens_per_s']:7.2f}")
    print(f"engine's own tokens/s      {gui['session_tokens_per_s']:7.2f}   (the session inside the GUI's engine)")
    print(f"headless trace tokens/s    {headless:7.2f}")
    print(f"ratio GUI / headless       {gui['ratio_gui_to_headless']:7.3f}   (target >= 0.9)")
    print(f"redraws {gui['redraws']}, median {gui['redraw_ms_median']:.1f} ms, worst {gui['redraw_ms_worst']:.1f} ms; "
          f"GUI thread CPU {gui['gui_thread_cpu_ms_per_step']:.1f} ms per step, GUI process (with the worker thread) "
          f"{gui['gui_process_cpu_ms_per_step']:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(gui, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
