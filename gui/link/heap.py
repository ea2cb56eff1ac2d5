"""The GUI process's Python heap, kept out of a Run's frames.

Python's cyclic garbage collector visits every object it tracks in a full (oldest-generation) collection. With
a model loaded and a few hundred steps in the history that is ~120,000 objects and took 70-94 ms of the GUI thread
(measured with gc.callbacks, AMD EPYC), at a moment set by how much was allocated: in the middle of a Run, one
frame 70-118 ms late. So whenever the app has been quiet (no Run, no request on its way) for IDLE_MS, `tidy`
collects what is new and freezes the survivors (gc.freeze: left out of later collections); a Run's collections
then visit only what was made since, about a millisecond. Frozen objects are still freed when nothing refers to
them any more; only garbage in reference cycles among them waits for a full tidy (unfreeze, collect everything,
freeze), at most every FULL_EVERY_S, on a quiet moment too.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Slot

IDLE_MS = 250  # quiet this long (nothing running or on its way) before the heap is tidied (a few ms)
FULL_EVERY_S = 60.0  # and at most this often every object is collected (the tidy then takes ~70-90 ms)


class HeapTidy(QObject):
    def __init__(self, busy: Callable[[], bool], parent: QObject | None = None):
        super().__init__(parent)
        self.busy = busy
        self.tidied = 0  # collections done (for tests)
        self._full_at: float | None = None  # when every object was last collected (the first tidy does)
        self._timer = QTimer(self, singleShot=True, interval=IDLE_MS)
        self._timer.timeout.connect(self._tidy)

    @Slot()
    def changed(self) -> None:
        """Something happened (a Run started or ended, a prompt was read): tidy once it has been quiet a while."""
        self._timer.start()

    @Slot()
    def _tidy(self) -> None:
        if self.busy():
            self._timer.start()  # not quiet yet: look again later
            return
        now = time.monotonic()
        if self._full_at is None or now - self._full_at >= FULL_EVERY_S:
            self._full_at = now
            gc.unfreeze()  # what died since, cycles among the frozen objects included
        gc.collect()
        gc.freeze()
        self.tidied += 1

    def release(self) -> None:
        """The window closes: every object back under the collector (what it held can go with it)."""
        self._timer.stop()
        gc.unfreeze()
