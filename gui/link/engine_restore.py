"""Carrying on after the engine process died: the steps stay, the next action brings the model back.

When the engine process is lost (killed, out of memory, a crash in native code), the controller keeps its
history: every step it was told of stays on screen. The next action restarts the engine and, before the
action itself, sends one `Restore`: the same model loaded again, the prompt read, the branch tree put back
and the current step's path re-read in one pass. Draws depend on (seed, step) alone, so the steps that
follow are the ones the lost engine would have drawn. The action waits (`deferred`) until the Restore is
answered, and is dropped if the restore failed, so a failure is reported once.

Free of Qt: the controller owns the signals; this keeps the bookkeeping.
"""

from __future__ import annotations

from inference.engine import protocol as p
from inference.settings import GenerationSettings

from gui.state.history import History
from gui.state.i18n import translate


class EngineRestore:
    def __init__(self):
        self.loaded: tuple[str, str, str] | None = None  # (spec, device, dtype) of the model the engine holds
        self._asked: tuple[str, str, str] | None = None  # a load on its way
        self.lost = False  # the engine process died and has not been given its session back
        self.restoring = False  # a Restore is on its way
        self.failed = False  # ... and it has failed
        self.deferred: list[p.Command] = []  # actions waiting for the Restore's answer

    # --- the model the engine holds -------------------------------------------------------------------
    def load_asked(self, spec: str, device: str, dtype: str) -> None:
        self._asked = (spec, device, dtype)

    def load_done(self) -> None:
        self.loaded, self.lost = self._asked, False

    # --- losing and restoring -------------------------------------------------------------------------
    def engine_lost(self, loading: bool) -> str:
        """Mark the engine lost; what the message adds about what happens next."""
        self.lost, self.restoring, self.failed = True, False, False
        self.deferred.clear()
        during = translate("Engine", " while loading {model}").format(model=_name(self._asked[0])) \
            if loading and self._asked is not None else ""
        if self.loaded is None:
            return during + translate("Engine", "; load a model to start it again")
        return during + translate("Engine", "; the steps so far are kept, and {model} is loaded again at your next "
                                  "action").format(model=_name(self.loaded[0]))

    def begin(self, action: p.Command, history: History, settings: GenerationSettings, tag: int) -> p.Restore | None:
        """A fresh engine is started for `action`: the Restore to send before it (None for a Load, or when
        no model was loaded); the actions after it wait for its answer."""
        self.lost = False
        if self.loaded is None or isinstance(action, p.Load):
            return None
        self.restoring, self.failed = True, False
        spec, device, dtype = self.loaded
        prefill = history.prefill
        if any(node.step is not None and node.step.shift is not None for node in history.nodes.values()):
            prefill = None  # a context shift dropped positions a re-read would bring back: the model alone
        if prefill is None:
            return p.Restore(spec, device, dtype, (), "", (), 0, settings, tag)
        nodes = tuple((node.id, node.parent.id, node.token_id) for node in history.nodes.values()
                      if node.step is not None and node.parent is not None)
        return p.Restore(spec, device, dtype, tuple(token.id for token in prefill.tokens), prefill.prompt_text,
                         nodes, history.current.id, settings, tag)

    def defer(self, command: p.Command) -> bool:
        """Hold `command` until the Restore is answered (True when held)."""
        if self.restoring and not isinstance(command, (p.Load, p.Cancel)):
            self.deferred.append(command)
            return True
        return False

    def finished(self) -> list[p.Command]:
        """The Restore is answered: the actions to send now (none if it failed: the engine stays lost)."""
        self.restoring = False
        held, self.deferred = self.deferred, []
        if self.failed:
            self.lost = True
            return []
        return held


def _name(spec: str) -> str:
    return translate("Engine", "the default model") if spec == "default" else spec
