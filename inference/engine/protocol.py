"""The typed, versioned messages between a front-end (the GUI's worker thread) and the engine process.

Every message is a frozen dataclass sent inside an `Envelope` that carries `PROTOCOL_VERSION`, so a
front-end and an engine from different versions refuse each other's messages with a clear error
instead of misreading them. Commands go down, replies come up; replies hold the session's frozen
events (numpy arrays and Python scalars, never tensors).

`tag` is the front-end's label for one generation (a load, a prefill or a reset starts a new one): the
engine echoes the tag of the generation it is serving on every reply about it, so a front-end can drop
answers to a generation it has since replaced.

Each side reads the pipe with `receive`, which unpickles admitting only these messages' own classes (in the
modules MESSAGE_MODULES) and numpy's array rebuilders: a crashed or compromised peer's bytes can make no
function run on this side.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass

from inference.attention import AttentionOf
from inference.events import (BlocksReport, ModelInfo, Pending, PrefillDone, RequestDone, Rewound, ScheduleDone,
                              SessionStatus, StepDone, Stopped, Switched, Verified)
from inference.messages import Message
from inference.settings import GenerationSettings

PROTOCOL_VERSION = 7  # 2: the branch moves (Rewind, Force, Switch); 3: the logit lens (CaptureLens); 4: Restore;
# 5: Pause/Abort at the step a paced front-end shows (Retracted); 6: many requests at once (Serve, MeasureBatch);
# 7: Failed / LoadFailed / SessionStatus.blocked carry the sentence's code and values (inference.messages)


# --- commands: front-end -> engine ---------------------------------------------------------------------
class Command:
    """Base of every command."""


@dataclass(frozen=True)
class Load(Command):
    spec: str  # "default", an HF folder or a .gguf file
    device: str
    dtype: str
    tag: int


@dataclass(frozen=True)
class Prefill(Command):
    prompt: str
    chat: bool
    system: str
    settings: GenerationSettings
    tag: int
    ids: tuple[int, ...] = ()  # exact token ids to read instead of encoding `prompt` (a replayed trace)


@dataclass(frozen=True)
class Restore(Command):
    """Load `spec` again and rebuild a session a dead engine held: the prompt `ids` read, the branch tree
    `nodes` ((id, parent, token id) of every node after the prompt) and `node` current, its path re-read in
    one pass. Answered by Status and the pending step only: the front-end kept the events (draws depend on
    (seed, step) alone, so the steps that follow are the ones the lost engine would have drawn)."""

    spec: str
    device: str
    dtype: str
    ids: tuple[int, ...]
    prompt_text: str
    nodes: tuple[tuple[int, int, int], ...]
    node: int
    settings: GenerationSettings
    tag: int


@dataclass(frozen=True)
class Step(Command):
    """Draw one token (answered by its StepDone, the next Pending, and a Stopped when it ends)."""


@dataclass(frozen=True)
class Run(Command):
    """Step until a stop rule fires, Pause or Abort arrives, or `max_steps` were taken (0 = no limit).

    The first step comes back at once (the first token is seen as soon as it is drawn), the others in batches
    at most `batch_s` apart (0: each at once): a front-end that redraws a few times a second needs one wake-up
    per batch, not per token.
    """

    max_steps: int = 0
    batch_s: float = 0.0


@dataclass(frozen=True)
class Pause(Command):
    """End a Run after the current step; the generation can go on.

    `at_step`: the steps the front-end shows (a paced playback shows fewer than the engine took). The
    steps after it were never seen: they are taken back (`Retracted`), and the generation goes on from
    there. None: wherever the engine is.
    """

    at_step: int | None = None


@dataclass(frozen=True)
class Abort(Command):
    """End this generation now, as `aborted` (Reset or Prefill starts again); at `at_step` as Pause says."""

    at_step: int | None = None


@dataclass(frozen=True)
class Reset(Command):
    """Back to the prompt (its cache kept), re-seeded from `settings.seed`."""

    settings: GenerationSettings
    tag: int


@dataclass(frozen=True)
class Rewind(Command):
    """Back to just before step `to_step` (answered by RewoundReply and the pending step)."""

    to_step: int


@dataclass(frozen=True)
class Force(Command):
    """Take this token (an id, or a text: its tokens one step each) instead of drawing."""

    token: int | str


@dataclass(frozen=True)
class Switch(Command):
    """Make another node of the branch tree current (answered by SwitchedReply and the pending step)."""

    node: int


@dataclass(frozen=True)
class Configure(Command):
    """New settings for the next draw; the pending distribution is reported again (no forward pass)."""

    settings: GenerationSettings


@dataclass(frozen=True)
class CaptureAttention(Command):
    on: bool


@dataclass(frozen=True)
class Recapture(Command):
    """Recompute the attention of the pass that fed `node` (0: the prefill), which ran unrecorded."""

    node: int


@dataclass(frozen=True)
class CaptureLens(Command):
    """Report each step's logit lens (lens.py) from now on; turned on, the pending step's too (a preview)."""

    on: bool


@dataclass(frozen=True)
class KvCache(Command):
    """Decode with the KV cache (on) or re-read the whole prefix every pass (off); kept for new sessions."""

    on: bool


@dataclass(frozen=True)
class CheckWeights(Command):
    """Hash the weights again (answered by WeightsChecked); also done whenever a generation ends."""


@dataclass(frozen=True)
class Cancel(Command):
    """Cancel a download, conversion or long prefill in progress (checked between its chunks)."""


@dataclass(frozen=True)
class ServeRequest:
    """One request of a Serve: its prompt (encoded as Prefill encodes one), settings and arrival step."""

    prompt: str
    chat: bool = False
    system: str = ""
    settings: GenerationSettings = GenerationSettings()
    arrive_at_step: int = 0
    ids: tuple[int, ...] = ()  # exact token ids to read instead of encoding `prompt`


@dataclass(frozen=True)
class Serve(Command):
    """Run these requests together through the batch scheduler (session/batch.py) until all have finished, or
    Pause, Abort or Cancel arrives (between two scheduler steps). Answered by ServeStarted, then every scheduler
    step's events in `Served` batches at most `batch_s` apart. The single session is left unprefilled (a new
    prompt starts again): the front-end keeps the requests' events."""

    requests: tuple[ServeRequest, ...]
    tag: int
    block_tokens: int = 16
    n_blocks: int = 0  # the pool; 0: enough for every request at its worst case at once
    token_budget: int = 256
    batch_s: float = 0.0
    max_steps: int = 0  # scheduler steps to run now (0: until all finished); ServeMore goes on


@dataclass(frozen=True)
class AddRequests(Command):
    """More requests join the serve under way (continuous batching), at the next scheduler step or their
    `arrive_at_step` if later; nothing runs (answered by RequestsAdded)."""

    requests: tuple[ServeRequest, ...]


@dataclass(frozen=True)
class ServeMore(Command):
    """Go on with the serve under way: `max_steps` scheduler steps (0: until all finished), answered as Serve is."""

    tag: int
    max_steps: int = 0
    batch_s: float = 0.0


@dataclass(frozen=True)
class MeasureBatch(Command):
    """Time decode steps of 1, 2, 4 ... requests decoding together on this machine (session/batch_curve.py), and
    the weights-read floor: answered by BatchFloor, then a BatchPoint per size as it is measured. Pause, Abort
    or Cancel ends it between two sizes."""

    sizes: tuple[int, ...] = (1, 2, 4, 8, 16)
    steps: int = 6  # timed scheduler steps per size


@dataclass(frozen=True)
class Quit(Command):
    pass


# --- replies: engine -> front-end ----------------------------------------------------------------------
class Reply:
    """Base of every reply."""


@dataclass(frozen=True)
class Ready(Reply):
    cuda: bool  # whether this engine can use a CUDA device


@dataclass(frozen=True)
class Progress(Reply):
    stage: str  # download / hash / dequantise / write / load / prefill
    done: int
    total: int


@dataclass(frozen=True)
class ModelLoaded(Reply):
    info: ModelInfo
    tag: int


@dataclass(frozen=True)
class ModelInfoChanged(Reply):
    """The loaded model's facts changed under the same session: its decode kernels finished building in the
    background and decode runs on them now (info.decode_path), or their build failed."""

    info: ModelInfo


@dataclass(frozen=True)
class LoadFailed(Reply):
    message: str  # "" when cancelled on purpose; the previous model stays loaded
    said: Message | None = None  # `message` as a code and values, for a front-end to word (None: English only)


@dataclass(frozen=True)
class Prefilled(Reply):
    event: PrefillDone
    tag: int


@dataclass(frozen=True)
class Stepped(Reply):
    events: tuple[StepDone | Verified, ...]  # one step, or a Run's batch, in order (a verify pass first)
    tag: int


@dataclass(frozen=True)
class PendingStep(Reply):
    event: Pending
    tag: int


@dataclass(frozen=True)
class RewoundReply(Reply):
    """A rewind, or a reset (event.reset): the steps from event.to_step on left the current branch."""

    event: Rewound
    tag: int


@dataclass(frozen=True)
class Retracted(Reply):
    """Pause or Abort at a step before the engine's newest: the steps after `event.to_step - 1` were taken
    back. `dropped`: the branch-tree nodes that left the tree with them (made by the run, never shown)."""

    event: Rewound
    dropped: tuple[int, ...]
    tag: int


@dataclass(frozen=True)
class SwitchedReply(Reply):
    event: Switched
    tag: int


@dataclass(frozen=True)
class Recaptured(Reply):
    event: AttentionOf
    tag: int


@dataclass(frozen=True)
class Ended(Reply):
    event: Stopped
    tag: int


@dataclass(frozen=True)
class ServeStarted(Reply):
    """A Serve's requests, encoded and checked, and its pool: what every later `Served` refers to."""

    prompt_tokens: tuple[int, ...]  # per request
    max_new_tokens: tuple[int, ...]
    arrive_at_step: tuple[int, ...]
    n_blocks: int
    block_tokens: int
    block_bytes: int  # one block's K and V over every layer
    tag: int
    token_budget: int = 0  # rows a scheduler step's pass may have


@dataclass(frozen=True)
class RequestsAdded(Reply):
    """Requests that joined the serve: their indices start at `first`; as ServeStarted gives them."""

    first: int
    prompt_tokens: tuple[int, ...]
    max_new_tokens: tuple[int, ...]
    arrive_at_step: tuple[int, ...]
    tag: int


@dataclass(frozen=True)
class Served(Reply):
    """Scheduler steps' events in order: per step a ScheduleDone, the requests' PrefillDone / StepDone / Stopped
    (with `request`), RequestDone of those that finished, and the BlocksReport."""

    events: tuple[ScheduleDone | PrefillDone | StepDone | Stopped | RequestDone | BlocksReport, ...]
    tag: int


@dataclass(frozen=True)
class BatchFloor(Reply):
    """A MeasureBatch's weights-read floor: the bytes a decode step reads over a streaming read's speed."""

    read_bytes: int
    gb_per_s: float
    ms: float


@dataclass(frozen=True)
class BatchPoint(Reply):
    """One batch size measured: the median scheduler step with every request decoding."""

    requests: int
    step_ms: float
    tokens_per_s: float


@dataclass(frozen=True)
class Status(Reply):
    """What the session can do now; sent whenever it may have changed."""

    status: SessionStatus
    tag: int


@dataclass(frozen=True)
class WeightsChecked(Reply):
    """The weights' fingerprint hashed again now, next to the one taken at load: equal, as inference
    never changes a weight."""

    at_load: str
    now: str
    ms: float


@dataclass(frozen=True)
class Failed(Reply):
    message: str  # one line a person can act on
    details: str  # the traceback, for a bug report
    expected: bool  # bad input (True) or a bug (False)
    said: Message | None = None  # `message` as a code and values, for a front-end to word (None: English only)


@dataclass(frozen=True)
class Cancelled(Reply):
    pass


@dataclass(frozen=True)
class Finished(Reply):
    """`command` (its class name) is fully answered: the front-end may send the next one."""

    command: str
    tag: int
    forward_count: int  # forward passes run so far: a preview runs none


# --- the envelope ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Envelope:
    version: int
    message: Command | Reply


def wrap(message: Command | Reply) -> Envelope:
    return Envelope(PROTOCOL_VERSION, message)


def unwrap(envelope: object, kind: type) -> Command | Reply:
    """The message inside, or a ValueError naming what is wrong with it."""
    if not isinstance(envelope, Envelope):
        raise ValueError(f"not a protocol message: {type(envelope).__name__}")
    if envelope.version != PROTOCOL_VERSION:
        raise ValueError(f"protocol version {envelope.version} (this side speaks {PROTOCOL_VERSION})")
    if not isinstance(envelope.message, kind):
        raise ValueError(f"unknown {kind.__name__.lower()}: {type(envelope.message).__name__}")
    return envelope.message


MESSAGE_MODULES = ("inference.engine.protocol", "inference.events", "inference.settings", "inference.attention",
                   "inference.messages")
# what numpy's arrays and scalars pickle as (numpy 2 names its core `numpy._core`, numpy 1 `numpy.core`)
NUMPY_REBUILDERS = {(core + module, name) for core in ("numpy._core", "numpy.core")
                    for module, name in ((".multiarray", "_reconstruct"), (".multiarray", "scalar"),
                                         (".numeric", "_frombuffer"))} | {("numpy", "ndarray"), ("numpy", "dtype")}


class _MessageUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in NUMPY_REBUILDERS:
            return super().find_class(module, name)
        if module in MESSAGE_MODULES:
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__ in MESSAGE_MODULES:  # a message class, nothing imported
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of the protocol")


def receive(connection, kind: type) -> Command | Reply:
    """The next message on a multiprocessing pipe (as `Connection.send` wrote it), read with _MessageUnpickler.
    Bytes that are no message (pickle.UnpicklingError and the like) mean the pipe cannot be trusted any more; a
    message of the wrong kind or version is a ValueError naming what is wrong with it."""
    return unwrap(_MessageUnpickler(io.BytesIO(connection.recv_bytes())).load(), kind)
