"""The GUI's heap is collected and frozen only when the app is idle (gui/link/heap.py): a Run's frames never
pay for a full collection of every object the app holds."""

from __future__ import annotations

import gc
import weakref

from gui.link.heap import HeapTidy


class Node:
    pass


def test_the_heap_is_tidied_once_quiet_and_never_while_busy(qtbot):
    busy = [True]
    tidy = HeapTidy(lambda: busy[0])
    tidy._timer.setInterval(20)
    try:
        node = Node()
        node.me = node  # a cycle: only the collector frees it
        gone = weakref.ref(node)
        del node
        tidy.changed()
        qtbot.wait(150)
        assert tidy.tidied == 0 and gc.get_freeze_count() == 0  # a Run is on: nothing collected, nothing frozen
        busy[0] = False
        qtbot.waitUntil(lambda: tidy.tidied == 1, timeout=3000)
        assert gone() is None  # the cycle was collected
        assert gc.get_freeze_count() > 1000  # the survivors (modules, Qt wrappers...) are out of later collections
        node = Node()
        node.me = node
        gone = weakref.ref(node)
        del node
        tidy.changed()
        qtbot.waitUntil(lambda: tidy.tidied == 2, timeout=3000)  # each quiet moment: what is new, collected
        assert gone() is None
    finally:
        tidy.release()
    assert gc.get_freeze_count() == 0  # a closed window leaves every object to the collector
