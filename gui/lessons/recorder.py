"""Video export: what the window shows, frame by frame, as an MP4 (H.264, yuv420p, PyAV) or a GIF (Pillow).

Two ways in:
- File → Record (`HandRecorder`): grabs the window at a fixed rate on the real clock until stopped; a red
  "● REC" marker shows in the window meanwhile, hidden while each frame is grabbed, so it is not filmed.
- `main.py --record OUT.mp4 --script LESSON.json` (`ScriptRecording`): plays the lesson on a virtual
  clock. Before each frame the app is let run (in real time) until only time passing can change what it
  shows: the engine has answered, the script waits (`wait`, a paced gap) and a paced Run's next step is
  due later (playback.py). Then every view redraws, the window is grabbed, and the virtual clock moves on
  by 1/fps. A prefill or a step therefore takes no time in the video, and the same lesson gives the same
  frames, at the same times, on any machine (only measured times, in Timing, differ).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from gui.link.playback import DEFAULT_PACE, VirtualClock
from gui.state.i18n import number, translate

# A GIF's frames stay in memory until it is written (Pillow writes them all at once): distinct frames (a still
# window is kept once) beyond this many bytes stop the recording. 960x540 frames: about 1000, 100 s at 10 fps.
GIF_MAX_BYTES = 512 << 20
GIF_MAX_WIDTH = 960  # a GIF keeps its frames in memory until it is written (a still one once): this wide
TAIL_S = 1.5  # the last frame held this long after the script ends (its last caption read)
STUCK_S = 600.0  # real seconds the app may take to settle before a recording gives up


def image_to_rgb(image: QImage) -> np.ndarray:
    """An (height, width, 3) uint8 copy of `image`."""
    image = image.convertToFormat(QImage.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    data = np.frombuffer(image.constBits(), np.uint8, count=stride * h).reshape(h, stride)
    return data[:, :w * 3].reshape(h, w, 3).copy()


class RecordingFull(ValueError):
    """A GIF that would keep more than GIF_MAX_BYTES of frames: what was kept can still be written."""


class VideoWriter:
    """Frames in, a file out: .mp4 (H.264, yuv420p, even sizes: the frame is cropped by a pixel where
    odd) or .gif. `frames` counts what was written."""

    def __init__(self, path: str | Path, fps: int):
        if "://" in str(path) or re.match(r"^[a-z][a-z0-9+.-]+:", str(path), re.I):  # FFmpeg would open a URL
            raise ValueError(translate("Recorder", "{path}: a recording is written to a local file, not to a URL")
                             .format(path=path))
        self.path, self.fps = Path(path), int(fps)
        self.kind = self.path.suffix.lower().lstrip(".")
        if self.kind not in ("mp4", "gif"):
            raise ValueError(translate("Recorder", "{file}: a recording is an .mp4 or a .gif").format(file=self.path.name))
        package, module = ("av", "av") if self.kind == "mp4" else ("pillow", "PIL")
        if importlib.util.find_spec(module) is None:
            raise ValueError(translate("Recorder", "recording an .{kind} needs the package {package} (pip install "
                                       "{package})").format(kind=self.kind, package=package))
        self.frames = 0
        self._file = self._container = self._stream = None
        self._gif: list = []
        self._gif_bytes = 0  # what the kept GIF frames hold

    def write(self, rgb: np.ndarray) -> None:
        if self.kind == "mp4":
            self._write_mp4(rgb)
        else:
            self._write_gif(rgb)
        self.frames += 1

    def _write_mp4(self, rgb: np.ndarray) -> None:
        import av  # lazy: optional and heavy (FFmpeg), needed only when an MP4 is written

        h, w = rgb.shape[0] // 2 * 2, rgb.shape[1] // 2 * 2
        if self._container is None:
            self._file = open(self.path, "wb")  # a local file, whatever FFmpeg would make of the name
            self._container = av.open(self._file, "w", format="mp4")
            self._stream = self._container.add_stream("libx264", rate=self.fps)
            self._stream.width, self._stream.height = w, h
            self._stream.pix_fmt = "yuv420p"
            self._stream.time_base = Fraction(1, self.fps)
            self._stream.options = {"crf": "23", "preset": "veryfast"}
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:h, :w]), format="rgb24")
        frame = frame.reformat(width=self._stream.width, height=self._stream.height, format="yuv420p")
        frame.pts = self.frames
        frame.time_base = Fraction(1, self.fps)
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def _write_gif(self, rgb: np.ndarray) -> None:
        from PIL import Image  # lazy: optional, needed only when a GIF is written

        image = Image.fromarray(rgb)
        if image.width > GIF_MAX_WIDTH:
            image = image.resize((GIF_MAX_WIDTH, round(image.height * GIF_MAX_WIDTH / image.width)),
                                 Image.Resampling.LANCZOS)
        image = image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        if self._gif and self._gif[-1][0].tobytes() == image.tobytes() \
                and self._gif[-1][0].getpalette() == image.getpalette():
            self._gif[-1][1] += 1  # a still window: the frame before, shown one frame longer (kept once)
        else:
            if self._gif_bytes + image.width * image.height > GIF_MAX_BYTES:
                seconds = self.frames / self.fps
                raise RecordingFull(translate("Recorder", "a GIF keeps every frame in memory until it is written: "
                                              "stopped at {seconds} s ({limit} MB of frames); record an .mp4 for "
                                              "longer").format(seconds=number(seconds), limit=GIF_MAX_BYTES >> 20))
            self._gif_bytes += image.width * image.height
            self._gif.append([image, 1])

    def close(self) -> None:
        if self._container is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
            self._container.close()
            self._file.close()
            self._container = self._file = None
        if self._gif:
            (first, _), *rest = self._gif
            first.save(self.path, save_all=True, append_images=[image for image, _ in rest], loop=0, optimize=False,
                       duration=[round(n * 1000 / self.fps) for _, n in self._gif])
            self._gif = []


def grab(window: QWidget, hide: QWidget | None = None) -> np.ndarray:
    """The window as it shows now (its child `hide`, a marker, left out)."""
    shown = hide is not None and hide.isVisible()
    if shown:
        hide.hide()
    image = window.grab().toImage()
    if shown:
        hide.show()
    return image_to_rgb(image)


class RecMarker(QLabel):
    """"● REC" at the window's top right while recording by hand."""

    def __init__(self, window: QWidget):
        super().__init__("● REC", window)
        self.setObjectName("rec_marker")
        self.setStyleSheet("QLabel#rec_marker { color: white; background: #c62828; border-radius: 6px; "
                           "padding: 3px 10px; font-weight: bold; }")
        self.setAttribute(Qt.WA_TransparentForMouseEvents, True)
        self.hide()

    def show_over(self) -> None:
        self.adjustSize()
        window = self.parentWidget()
        self.move(window.width() - self.width() - 12, 4)
        self.show()
        self.raise_()


class HandRecorder(QObject):
    """File → Record: the window, `fps` frames a second of real time, until `stop`."""

    stopped = Signal(str, int, str)  # path, frames written, why it stopped by itself ('' when asked to)

    def __init__(self, window: QWidget, fps: int = 15):
        super().__init__(window)
        self.window, self.fps = window, fps
        self.marker = RecMarker(window)
        self.writer: VideoWriter | None = None
        self._started = 0.0
        self._timer = QTimer(self, interval=round(1000 / fps))
        self._timer.setTimerType(Qt.PreciseTimer)
        self._timer.timeout.connect(self._frame)

    @property
    def recording(self) -> bool:
        return self.writer is not None

    def start(self, path: str) -> None:
        self.writer = VideoWriter(path, self.fps)  # a wrong suffix raises before anything shows
        self.marker.show_over()
        self._started = time.monotonic()
        self._frame()
        self._timer.start()

    def _frame(self) -> None:
        """Grab the window; where the GUI was late (a long paint, a busy machine), the frame stands for the
        ones missed too, so that the video keeps the real time."""
        if self.writer is None:
            return
        frame = grab(self.window, self.marker)
        due = int((time.monotonic() - self._started) * self.fps) + 1
        try:
            for _ in range(min(max(due - self.writer.frames, 1), self.fps)):
                self.writer.write(frame)
        except RecordingFull as full:
            self.stop(str(full))

    def stop(self, why: str = "") -> None:
        if self.writer is None:
            return
        self._timer.stop()
        self.marker.hide()
        writer, self.writer = self.writer, None
        writer.close()
        self.stopped.emit(str(writer.path), writer.frames, why)


def settled(controller, player) -> bool:
    """Only the (virtual) clock can change what the window shows now: the next frame may be taken."""
    c = controller
    if c.info is None or c.loading:
        return False
    pacer = c.pacer
    pacer_waits = pacer.waiting_on_clock()
    if pacer.active and not pacer_waits:
        return False  # a step to reveal, or the engine's next one to wait for
    if not pacer.active and (c.busy or c.running):
        return False
    if player.script is None or player.waiting_on_clock():
        return True
    return pacer_waits  # the script waits for the paced Run to end


class ScriptRecording(QObject):
    """`main.py --record OUT --script LESSON`: the lesson played on a virtual clock, `fps` frames a second,
    then quit (exit code 0 when the file is written)."""

    def __init__(self, window, out: str, script: str, fps: int = 10, pace: float = DEFAULT_PACE):
        super().__init__(window)
        self.window, self.script, self.fps = window, script, fps
        self.writer = VideoWriter(out, fps)
        self.exit_code = 1
        c = window.controller
        self.clock = c.clock = VirtualClock()
        c.pacer.set_pace(pace)
        self._tail = 0
        self._waiting_since = time.monotonic()
        self._poll = QTimer(self, singleShot=True)
        self._poll.timeout.connect(self._tick)
        c.load_finished.connect(self._loaded)
        window.script_player.failed.disconnect()  # no dialog to wait on: one line on stderr, exit 1
        window.script_player.failed.connect(self._failed)

    def _loaded(self, ok: bool, message: str) -> None:
        if not ok:
            self._quit(f"error: {message or 'loading cancelled'}")
            return
        if self.window.play_script(self.script):
            self._poll.start(0)

    def _failed(self, message: str) -> None:
        self._quit(f"error: {message}")

    def _tick(self) -> None:
        c, player = self.window.controller, self.window.script_player
        if not settled(c, player):
            if time.monotonic() - self._waiting_since > STUCK_S:
                self._quit("error: the app did not settle; recording abandoned")
                return
            self._poll.start(5)
            return
        self._waiting_since = time.monotonic()
        c.scheduler.redraw_now(force=True)  # every view at the same step, now
        QApplication.processEvents()
        QApplication.processEvents()
        frame = grab(self.window)
        if not self.writer.frames:  # the window may not go as small as asked (its docks' minimum sizes)
            print(f"recording: {frame.shape[1]}x{frame.shape[0]} at {self.fps} fps", file=sys.stderr, flush=True)
        try:
            self.writer.write(frame)
        except Exception as e:  # noqa: BLE001 - an unwritable file or a failing encoder: say so and exit 1
            self._quit(f"error: {self.writer.path}: {e}")
            return
        if self.writer.frames % (self.fps * 5) == 0:
            print(f"recording: {self.writer.frames / self.fps:.0f} s", file=sys.stderr, flush=True)
        if player.script is None:
            self._tail += 1
            if self._tail >= round(TAIL_S * self.fps):
                self._finish()
                return
        self.clock.advance(1 / self.fps)
        self._poll.start(0)

    def _finish(self) -> None:
        try:
            self.writer.close()
        except Exception as e:  # noqa: BLE001
            self._quit(f"error: {self.writer.path}: {e}")
            return
        w = self.writer
        print(f"{w.path}: {w.frames} frames, {w.frames / w.fps:.1f} s at {w.fps} fps")
        self.exit_code = 0
        QApplication.exit(0)

    def _quit(self, message: str) -> None:
        print(message, file=sys.stderr)
        self.window.script_player.stop()
        QApplication.exit(1)
