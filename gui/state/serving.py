"""Many requests at once, as the engine's scheduler reported them (a Serve, issue 39). Free of Qt: what the
Serving dock draws and what selecting a request hands to the History.

Everything here is the engine's: per scheduler step its ScheduleDone (who had rows in the pass, prompt chunks,
the pass's ms, who waits and why) and BlocksReport (every running request's block table and the positions its
blocks hold); per request its PrefillDone, StepDones, Stopped and RequestDone. What this adds is arithmetic on
them: each request's phase at each step, the pass-time axis (the passes' ms laid end to end), the block map
(owners and reference counts per block), and the live numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gui.state.i18n import translate
from inference.engine import protocol as p
from inference.events import BlocksReport, PrefillDone, RequestDone, ScheduleDone, StepDone, Stopped

# A request's phase at a scheduler step (the timeline's cells)
ABSENT, WAITING, PREFILL, DECODE, IDLE, FINISHED = "absent", "waiting", "prefill", "decode", "idle", "finished"

# Why a request waits, as the engine's scheduler says it (inference/session/batch.py; the trace keeps these words)
_WAITING = ((re.compile(r"not arrived yet"), lambda m: translate("Serving", "not arrived yet")),
            (re.compile(r"arrives at step (\d+)"),
             lambda m: translate("Serving", "arrives at step {step}").format(step=m[1])),
            (re.compile(r"behind request (\d+), which waits first"),
             lambda m: translate("Serving", "behind request {request}, which waits first").format(request=m[1])),
            (re.compile(r"the batch is full \((\d+) requests running\)"),
             lambda m: translate("Serving", "the batch is full ({n} requests running)").format(n=m[1])),
            (re.compile(r"the pool is full: (-?\d+) blocks free and not promised to running requests, (\d+) needed"),
             lambda m: translate("Serving", "the pool is full: {free} blocks free and not promised to running "
                                 "requests, {needed} needed").format(free=m[1], needed=m[2])))


def waiting_reason(reason: str) -> str:
    """The scheduler's reason a request waits, in the app's language (one it does not know: as it came)."""
    for pattern, word in _WAITING:
        m = pattern.fullmatch(reason)
        if m:
            return word(m)
    return reason


@dataclass
class Track:
    """One request of the serve."""

    index: int
    prompt_tokens: int
    max_new_tokens: int
    arrive_at_step: int
    phases: list[str] = field(default_factory=list)  # per scheduler step
    chunks: list[int] = field(default_factory=list)  # per scheduler step: its rows in the pass (0: none)
    prefill: PrefillDone | None = None
    steps: list[StepDone] = field(default_factory=list)
    step_at: list[int] = field(default_factory=list)  # the scheduler step of each of its steps
    stopped: Stopped | None = None
    done: RequestDone | None = None
    waiting_for: str = ""  # why it waits (while it does)

    @property
    def finished(self) -> bool:
        return self.done is not None

    @property
    def n_generated(self) -> int:
        return len(self.steps)

    @property
    def first_step(self) -> int | None:
        """The first scheduler step it had rows in."""
        return next((s for s, ph in enumerate(self.phases) if ph in (PREFILL, DECODE)), None)


@dataclass(frozen=True)
class BlockCell:
    """One block of the pool as the grid draws it: its owners (empty: free), and how full it is."""

    block: int
    owners: tuple[int, ...]  # the requests whose tables hold it (more than one: a shared prefix block)
    filled: int  # positions of it in use (block_tokens unless it is a request's last, partly filled block)

    @property
    def refcount(self) -> int:
        return len(self.owners)

    @property
    def free(self) -> bool:
        return not self.owners


@dataclass(frozen=True)
class Curve:
    """Decode throughput against the batch size on this machine (MeasureBatch), and the weights-read floor."""

    floor: p.BatchFloor | None = None
    points: tuple[p.BatchPoint, ...] = ()
    sizes: tuple[int, ...] = ()  # asked for
    measuring: bool = False


class Serving:
    def __init__(self):
        self.clear()
        self.curve = Curve()

    def clear(self) -> None:
        self.started: p.ServeStarted | None = None
        self.tracks: list[Track] = []
        self.schedules: list[ScheduleDone] = []
        self.starts_ms: list[float] = []  # each scheduler step's start on the pass-time axis
        self.blocks: BlocksReport | None = None  # the newest
        self.block_reports: list[BlocksReport] = []  # per scheduler step
        self.grid_step: int | None = None  # the scheduler step the block grid shows (None: the newest)
        self.selected: int | None = None  # the request shown in the other views
        self.tag = -1
        self.running = False  # the engine is serving (between ServeStarted and the Serve's Finished)

    # --- replies --------------------------------------------------------------------------------------
    def apply(self, reply: p.Reply, tag: int) -> bool:
        """Take in a serving reply about generation `tag` (others change nothing); whether anything changed."""
        match reply:
            case p.ServeStarted() if reply.tag == tag:
                self.clear()
                self.started, self.tag, self.running = reply, tag, True
                self.tracks = [Track(i, n, m, a) for i, (n, m, a) in
                               enumerate(zip(reply.prompt_tokens, reply.max_new_tokens, reply.arrive_at_step))]
                return True
            case p.RequestsAdded() if reply.tag == self.tag == tag:
                for i, (n, m, a) in enumerate(zip(reply.prompt_tokens, reply.max_new_tokens, reply.arrive_at_step)):
                    if reply.first + i == len(self.tracks):
                        self.tracks.append(Track(reply.first + i, n, m, a, [ABSENT] * self.n_steps, [0] * self.n_steps))
                return True
            case p.Served() if reply.tag == self.tag == tag:
                for event in reply.events:
                    self._event(event)
                return True
            case p.Finished() if reply.command in ("Serve", "ServeMore"):
                changed, self.running = self.running, False
                return changed
            case p.Finished() if reply.command == "MeasureBatch":
                self.curve = Curve(self.curve.floor, self.curve.points, self.curve.sizes, False)
                return True
            case p.BatchFloor():
                self.curve = Curve(reply, (), self.curve.sizes, True)
                return True
            case p.BatchPoint():
                self.curve = Curve(self.curve.floor, self.curve.points + (reply,), self.curve.sizes, True)
                return True
        return False

    def measure_asked(self, sizes: tuple[int, ...]) -> None:
        self.curve = Curve(None, (), sizes, True)

    def _event(self, event) -> None:
        if isinstance(event, ScheduleDone):
            self._schedule(event)
            return
        if isinstance(event, BlocksReport):
            self.blocks = event
            self.block_reports.append(event)
            return
        if event.request is None or not 0 <= event.request < len(self.tracks):
            return
        track = self.tracks[event.request]
        if isinstance(event, PrefillDone):
            track.prefill = event
        elif isinstance(event, StepDone):
            track.steps.append(event)
            track.step_at.append(len(self.schedules) - 1)
        elif isinstance(event, Stopped):
            track.stopped = event
        elif isinstance(event, RequestDone):
            track.done = event

    def _schedule(self, s: ScheduleDone) -> None:
        start = self.starts_ms[-1] + self.schedules[-1].forward_ms if self.schedules else 0.0
        self.schedules.append(s)
        self.starts_ms.append(start)
        for track in self.tracks:
            rows = s.prefill_chunks.get(track.index, 0)
            if track.index in s.prefill_chunks:
                phase = PREFILL
            elif track.index in s.requests:
                phase, rows = DECODE, 1
            elif track.index in s.waiting:
                phase = WAITING if track.arrive_at_step <= s.step else ABSENT
                track.waiting_for = s.waiting[track.index]
            elif track.finished:
                phase = FINISHED
            else:
                phase = IDLE  # running, but no row in this pass (the token budget went to others)
            if phase not in (WAITING, ABSENT):
                track.waiting_for = ""
            track.phases.append(phase)
            track.chunks.append(rows)

    # --- reading --------------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.started is not None

    @property
    def done(self) -> bool:
        """Every request has finished."""
        return all(t.finished for t in self.tracks)

    @property
    def n_steps(self) -> int:
        return len(self.schedules)

    @property
    def total_ms(self) -> float:
        """The pass-time axis's length: every pass's ms, end to end."""
        return self.starts_ms[-1] + self.schedules[-1].forward_ms if self.schedules else 0.0

    def span(self, step: int) -> tuple[float, float]:
        """Where scheduler step `step` lies on the pass-time axis (ms)."""
        return self.starts_ms[step], self.starts_ms[step] + self.schedules[step].forward_ms

    @property
    def n_generated(self) -> int:
        return sum(t.n_generated for t in self.tracks)

    @property
    def tokens_per_s(self) -> float:
        """Every request's tokens over the passes' time: the batch's throughput."""
        return self.n_generated / (self.total_ms / 1000) if self.total_ms > 0 else 0.0

    def request_tokens_per_s(self, track: Track) -> float:
        """Its tokens over the passes' time from its first pass to its last step (or now)."""
        first = track.first_step
        if first is None or not track.steps:
            return 0.0
        ms = self.span(track.step_at[-1])[1] - self.starts_ms[first]
        return track.n_generated / (ms / 1000) if ms > 0 else 0.0

    def ttft_ms(self, track: Track) -> float | None:
        """Time to first token: measured (RequestDone, wall clock from its arrival) once it finished; before,
        the passes' time from its arrival step to the end of the pass that drew its first token."""
        if track.done is not None:
            return track.done.ttft_ms
        if not track.steps or track.arrive_at_step >= self.n_steps:
            return None
        return self.span(track.step_at[0])[1] - self.starts_ms[track.arrive_at_step]

    def tpot_ms(self, track: Track) -> float | None:
        """Time per output token after the first: measured once finished; before, on the passes' time."""
        if track.done is not None:
            return track.done.tpot_ms
        if len(track.steps) < 2:
            return None
        return (self.span(track.step_at[-1])[1] - self.span(track.step_at[0])[1]) / (len(track.steps) - 1)

    @property
    def block_tokens(self) -> int:
        return self.started.block_tokens if self.started is not None else 16

    @property
    def n_blocks(self) -> int:
        return self.started.n_blocks if self.started is not None else 0

    @property
    def shown_blocks(self) -> BlocksReport | None:
        """The pool at the scheduler step the grid shows: a chosen one, else the newest."""
        if self.grid_step is not None and 0 <= self.grid_step < len(self.block_reports):
            return self.block_reports[self.grid_step]
        return self.blocks

    def step_of(self, track: Track, scheduler_step: int) -> int:
        """The request's own step (1-based) drawn at or before this scheduler step; 0: none yet."""
        return sum(1 for at in track.step_at if at <= scheduler_step)

    def cells(self) -> list[BlockCell]:
        """Every block of the pool (at the step the grid shows): its owners and how many of its positions are in
        use."""
        owners: dict[int, list[int]] = {}
        filled: dict[int, int] = {}
        b = self.block_tokens
        report = self.shown_blocks
        if report is not None:
            positions = report.positions or {}
            for request, table in sorted(report.per_request.items()):
                held = positions.get(request, len(table) * b)
                for i, block in enumerate(table):
                    owners.setdefault(block, []).append(request)
                    filled[block] = max(filled.get(block, 0), min(b, max(0, held - i * b)))
        return [BlockCell(k, tuple(owners.get(k, ())), filled.get(k, 0)) for k in range(self.n_blocks)]

    @property
    def blocks_used(self) -> int:
        return self.shown_blocks.allocated if self.shown_blocks is not None else 0

    @property
    def blocks_shared(self) -> int:
        return self.shown_blocks.shared if self.shown_blocks is not None else 0

    def fragmentation(self) -> int:
        """Positions allocated but unused (at the step the grid shows): the tails of the requests' last blocks."""
        report = self.shown_blocks
        if report is None or not report.positions:
            return 0
        b = self.block_tokens
        return sum(len(table) * b - report.positions.get(r, len(table) * b) for r, table in report.per_request.items())

    def context_length(self) -> int:
        """The longest context of a running request (prompt + tokens so far); none running: the longest any request
        will reach."""
        running = [t for t in self.tracks if t.phases and t.phases[-1] in (PREFILL, DECODE, IDLE)]
        if running:
            return max(t.prompt_tokens + t.n_generated for t in running)
        return max((t.prompt_tokens + t.max_new_tokens for t in self.tracks), default=0)

    def largest_batch(self) -> int:
        """Requests the pool holds at once at this context length, sharing nothing."""
        n = self.context_length()
        if n <= 0 or not self.n_blocks:
            return 0
        return self.n_blocks // -(-n // self.block_tokens)

    def track(self, index: int | None) -> Track | None:
        return self.tracks[index] if index is not None and 0 <= index < len(self.tracks) else None
