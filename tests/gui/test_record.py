"""Video export (issue 18): `main.py --record OUT --script LESSON` writes what the window shows, on a virtual
clock at a fixed fps; File → Record films the window by hand with a REC marker that is not in the frames.

The lesson is resources/lessons/paced_run.json (a few seconds); 5 fps keeps each recording short on 2 cores.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import av  # the app's own dependency (MP4 export): a missing one is a broken install, not a skip
import numpy as np

from app_driver import wait_until, window_fixture

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "resources" / "lessons" / "paced_run.json"
FPS = 5


def record(out: Path, *extra: str) -> str:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "--record", str(out), "--script", str(LESSON),
                           "--fps", str(FPS), *extra], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.is_file() and out.stat().st_size > 0
    return done.stdout


def reported(stdout: str) -> tuple[int, float]:
    """The frame count and the seconds the recorder says it wrote."""
    m = re.search(r": (\d+) frames, ([\d.]+) s at (\d+) fps", stdout)
    assert m, stdout
    assert int(m.group(3)) == FPS
    return int(m.group(1)), float(m.group(2))


def caption_shown(frame: np.ndarray) -> bool:
    """The caption banner (a dark box, 80 % of the window wide, with white text, at the bottom centre) is in
    the frame: rows of it are dark across the middle of the window, which the light theme's views never
    are, and there is white text between them."""
    h, w, _ = frame.shape
    band = frame[int(h * 0.6):int(h * 0.97), int(w * 0.3):int(w * 0.7)].astype(int)
    dark_rows = ((band.max(axis=2) < 90).mean(axis=1) > 0.98).sum()
    white = (band.min(axis=2) > 220).any(axis=1)
    return dark_rows >= 8 and white.sum() >= 8


def assert_lesson_frames(frames: list[np.ndarray], n: int, seconds: float) -> None:
    from gui.lessons.recorder import TAIL_S
    from gui.lessons.script_player import CAPTION_HOLD_S

    assert len(frames) == n == round(seconds * FPS)
    # the lesson: 3.4 s of waits, 2 steps 0.25 s apart, a paced run of the 6 tokens left (1.5 s at 4 tokens/s):
    # 5.15 s; its last caption, shown at 2.9 s, is read CAPTION_HOLD_S, then goes: 6.9 s; then the last frame
    # is held TAIL_S, and what waits on the clock waits for the next frame (0.2 s) to see it
    assert 2.9 + CAPTION_HOLD_S + TAIL_S <= seconds <= 2.9 + CAPTION_HOLD_S + TAIL_S + 0.8
    changes = [float(np.abs(a.astype(int) - b).mean()) for a, b in zip(frames, frames[1:])]
    assert sum(c > 0.05 for c in changes) >= 8  # it moves: the steps come frame after frame
    assert float(np.abs(frames[0].astype(int) - frames[-1]).mean()) > 1.0
    # the lesson waits 0.4 s (2 frames) before its first caption; from then on a caption is shown until the
    # last one has been read: the held frames at the end show none
    tail = round(TAIL_S * FPS)
    assert [caption_shown(f) for f in frames] == [False] * 2 + [True] * (n - 2 - tail) + [False] * tail
    bottom = slice(int(frames[0].shape[0] * 0.6), None)
    assert frames[2][bottom].tobytes() != frames[-tail - 1][bottom].tobytes()  # another caption at the end


def test_record_mp4_is_h264_at_the_fps_with_the_captions(tmp_path):
    out = tmp_path / "lesson.mp4"
    n, seconds = reported(record(out))
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and stream.codec_context.pix_fmt == "yuv420p"
        assert stream.width >= 1280 and stream.height >= 720 and stream.width % 2 == 0 == stream.height % 2
        assert stream.average_rate == FPS
        duration = float(stream.duration * stream.time_base)
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert abs(duration - seconds) < 1e-6
    assert_lesson_frames(frames, n, seconds)


def test_record_gif_the_same_way(tmp_path):
    from PIL import Image, ImageSequence

    out = tmp_path / "lesson.gif"
    n, seconds = reported(record(out))
    frames = []
    with Image.open(out) as gif:
        assert gif.width >= 640 and gif.info.get("loop") == 0
        for frame in ImageSequence.Iterator(gif):
            # Pillow writes a frame equal to the one before as a longer duration of that one
            repeats, rest = divmod(frame.info["duration"], 1000 // FPS)
            assert rest == 0 and repeats >= 1
            frames += [np.asarray(frame.convert("RGB"))] * repeats
    assert_lesson_frames(frames, n, seconds)


def test_record_refuses_without_a_script_or_with_another_suffix(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    bad = tmp_path / "bad.json"
    bad.write_text('{"prompt": "x", "actions": [{"step": 1},]}')
    for args in (["--record", str(tmp_path / "a.mp4")], ["--record", str(tmp_path / "a.avi"), "--script", str(LESSON)],
                 ["--record", str(tmp_path / "a.mp4"), "--script", str(bad)]):
        done = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
        assert not list(tmp_path.glob("a.*"))
    assert "bad.json: not valid JSON" in done.stderr


window = window_fixture("record")


def reddish(rgb: np.ndarray) -> np.ndarray:
    return (rgb[..., 0] > 160) & (rgb[..., 1] < 90) & (rgb[..., 2] < 90)


def test_record_by_hand_shows_rec_in_the_window_but_not_in_the_frames(window, tmp_path):
    from gui.lessons.recorder import image_to_rgb

    out = tmp_path / "hand.mp4"
    window.toggle_recording(str(out))
    recorder = window.recorder
    assert recorder.recording and recorder.marker.isVisible() and window.actions["record"].isChecked()
    r = recorder.marker.geometry()
    seen = image_to_rgb(window.grab().toImage())[r.top():r.bottom(), r.left():r.right()]
    assert reddish(seen).mean() > 0.3  # the person at the window sees ● REC
    wait_until(lambda: recorder.writer.frames >= 5)
    window.toggle_recording()
    assert not recorder.recording and not recorder.marker.isVisible() and not window.actions["record"].isChecked()
    assert "Recorded" in window.status.state.text() and str(out) in window.status.state.text()
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) >= 5
    assert frames[0].shape[:2] == (window.height() // 2 * 2, window.width() // 2 * 2)
    assert all(reddish(f[r.top():r.bottom(), r.left():r.right()]).mean() < 0.05 for f in frames)


def test_a_recording_is_a_local_file_never_a_url(tmp_path):
    from gui.lessons.recorder import VideoWriter

    for url in ("tcp://127.0.0.1:9/lesson.mp4", "udp://127.0.0.1:9/x.mp4", "http://example.invalid/x.gif",
                "pipe:1.mp4", "concat:a.mp4|b.mp4"):
        try:
            VideoWriter(url, 10)
        except ValueError as e:
            assert "a recording is written to a local file, not to a URL" in str(e)
        else:
            raise AssertionError(f"{url} was accepted")
    local = VideoWriter(tmp_path / "a:b.mp4", 10)  # a colon inside a local name is no protocol
    local.write(np.zeros((16, 16, 3), np.uint8))
    local.close()
    assert (tmp_path / "a:b.mp4").stat().st_size > 0


def test_a_gif_stops_at_its_memory_budget_and_keeps_what_it_holds(tmp_path, monkeypatch):
    from PIL import Image

    from gui.lessons import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "GIF_MAX_BYTES", 2 * 32 * 32)  # two distinct 32x32 frames
    writer = recorder_module.VideoWriter(tmp_path / "long.gif", 10)
    frames = [np.full((32, 32, 3), 40 * i, np.uint8) for i in range(3)]
    writer.write(frames[0])
    writer.write(frames[0])  # a still window: kept once, costs nothing more
    writer.write(frames[1])
    try:
        writer.write(frames[2])
    except recorder_module.RecordingFull as full:
        assert "record an .mp4 for longer" in str(full)
    else:
        raise AssertionError("a third distinct frame was kept")
    writer.close()
    assert Image.open(tmp_path / "long.gif").n_frames == 2 and writer.frames == 3


def test_a_gif_by_hand_that_fills_its_budget_stops_itself_and_says_why(window, tmp_path, monkeypatch):
    from gui.lessons import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "GIF_MAX_BYTES", 1)  # not even the first frame fits
    recorder = window.recorder
    window.toggle_recording(str(tmp_path / "long.gif"))
    wait_until(lambda: not recorder.recording)
    text = window.status.state.text()
    assert "record an .mp4 for longer" in text and "long.gif" in text and not window.actions["record"].isChecked()


def test_a_recording_is_filmed_in_the_language_its_lesson_declares(tmp_path):
    """The Chinese lesson says "language": "zh_CN": `--record` without --lang films the Chinese window, --lang
    still wins, a lesson without one keeps the default, and a language the app lacks is one line and exit 2."""
    from gui.app import lesson_language, parse_args

    chinese = ROOT / "resources" / "lessons" / "capital_of_france.zh-CN.json"
    args = parse_args(["--record", str(tmp_path / "a.mp4"), "--script", str(chinese)])
    assert lesson_language(args) == 0 and args.lang == "zh_CN"
    args = parse_args(["--record", str(tmp_path / "a.mp4"), "--script", str(chinese), "--lang", "en"])
    assert lesson_language(args) == 0 and args.lang == "en"
    args = parse_args(["--record", str(tmp_path / "a.mp4"), "--script", str(LESSON)])
    assert lesson_language(args) == 0 and args.lang is None
    klingon = tmp_path / "tlh.json"
    klingon.write_text('{"language": "tlh", "prompt": "x", "actions": [{"prefill": true}]}')
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "--record", str(tmp_path / "a.mp4"), "--script",
                           str(klingon)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert "'tlh'" in done.stderr and not list(tmp_path.glob("a.*"))
