"""Issue 20's soak: 2000 steps through the engine process, a Reset every 50, the resident memory of the GUI
side and of the engine sampled every 100 steps. Neither may grow by more than 50 MB after the first 100
steps (the warm-up: the kernels' buffers, the first kept logits), and closing leaves no thread or process."""

import multiprocessing
import threading
from dataclasses import replace

import pytest

from app_driver import wait_until
from gui.link.controller import Controller
from inference.settings import GenerationSettings

STEPS, RESET_EVERY, SAMPLE_EVERY = 2000, 50, 100
GROWTH_LIMIT_MB = 50


def _rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.mark.slow
def test_two_thousand_steps_with_resets_keep_both_processes_flat(qapp):
    threads_before = {t.ident for t in threading.enumerate()}
    settings = GenerationSettings()
    settings = replace(settings, max_new_tokens=RESET_EVERY + 10, sampler=replace(settings.sampler, greedy=True))
    c = Controller(settings)
    try:
        c.load("default", "cpu", "float32")
        wait_until(lambda: c.info is not None and not c.loading)
        c.prefill("Count from 1 to 1000: 1, 2, 3,", chat=False)
        wait_until(lambda: c.prefilled and not c.busy)
        engine = c.worker.process.pid
        samples: list[tuple[int, float, float]] = []
        first_run: list[int] | None = None
        done = 0
        while done < STEPS:
            c.run(RESET_EVERY)
            wait_until(lambda: len(c.steps) == RESET_EVERY and not c.busy and not c.running)
            ids = [s.token.id for s in c.steps]
            first_run = first_run or ids
            assert ids == first_run  # greedy after a reset: the same tokens every time
            done += RESET_EVERY
            if done % SAMPLE_EVERY == 0:
                samples.append((done, _rss_mb(), _rss_mb(engine)))
            c.reset()
            wait_until(lambda: not c.steps and not c.busy)
        assert c.worker.process.pid == engine  # one engine all along
    finally:
        assert c.shutdown()
    table = "\n".join(f"{n:5d} steps: gui {gui:7.1f} MB, engine {eng:7.1f} MB" for n, gui, eng in samples)
    print(table)
    _, gui0, engine0 = samples[0]
    assert max(s[1] for s in samples) - gui0 <= GROWTH_LIMIT_MB, table
    assert max(s[2] for s in samples) - engine0 <= GROWTH_LIMIT_MB, table
    assert not multiprocessing.active_children()
    wait_until(lambda: {t.ident for t in threading.enumerate()} <= threads_before, 5000)
