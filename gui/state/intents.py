"""What a view may read about the link to the engine and ask of it: the narrow face of the controller
(gui/link/controller.py) that views and widgets are given, so that they never import the link.

A declaration only (a `typing.Protocol`), free of Qt: the controller implements it. What the engine reported
lives in `history` (history.py); the read-only shortcuts below read it. The four signals say when to look
again; they are Qt signals, which the views (Qt widgets) connect to.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from inference.events import ModelInfo, Pending, PrefillDone, StepDone, Stopped
from inference.settings import GenerationSettings

from gui.state.history import History, Shown
from gui.state.serving import Serving


class Pace(Protocol):
    """Paced playback of a Run (gui/link/playback.py): the paces offered, the one chosen."""

    paces: tuple[float, ...]  # tokens per second; 0: as fast as possible
    pace_changed: Any  # Signal(float)

    def set_pace(self, tokens_per_s: float) -> None: ...


class Intents(Protocol):
    # --- the state the views draw (reported by the engine) ------------------------------------------------
    history: History
    serving: Serving  # many requests at once (a Serve), and the measured batch curve
    showing_request: int | None  # the served request whose steps the history holds (None: a generation of its own)
    info: ModelInfo | None
    epoch: int  # the newest generation asked for: a view's cache key
    steps: list[StepDone]
    prefill_event: PrefillDone | None
    pending: Pending | None
    stopped: Stopped | None
    shown: Callable[[], Shown | None]

    # --- what the user asked for, and what may be asked now ------------------------------------------------
    settings: GenerationSettings
    kv_cache: bool
    loading: bool
    prefilled: bool
    prefilling: bool  # the prompt is being read
    prefilled_prompt: tuple[str, bool, str] | None  # (prompt, chat, system) of the last prefill asked for
    busy: bool  # a gated request is on its way
    running: bool
    run_horizon: int | None
    can_step: bool
    can_move: bool  # a rewind, a switch or a fork may be asked for
    pacer: Pace

    # --- when to look again (Qt signals) ----------------------------------------------------------------
    scheduler: Any  # its `redraw`: every visible view redraws, from the same state
    redraw: Any
    state_changed: Any  # what can be done now changed
    model_changed: Any
    progress: Any  # Signal(str, int, int): stage, done, total

    # --- what a view may ask --------------------------------------------------------------------------
    def select(self, index: int | None) -> None: ...  # show step `index` (None: the pending one)

    def take(self, token_id: int) -> None: ...  # take this token at the shown step (a fork if past)

    def switch(self, node_id: int) -> None: ...  # make another branch current

    def set_kv_cache(self, on: bool) -> None: ...

    def request_attention(self, node: int) -> bool: ...  # recompute a pass's attention once

    def show_request(self, index: int | None, scheduler_step: int | None = None) -> None: ...  # the views show
    # this served request's steps (and the block grid the pool at that scheduler step)

    def measure_batch(self, sizes: tuple[int, ...] = ..., steps: int = ...) -> bool: ...  # the batch curve

    def stop_serving(self) -> None: ...  # end a serve or a measurement between two steps

    def serve_more(self, max_steps: int = 0) -> bool: ...  # go on with a serve stopped before its end

    can_serve_more: bool
