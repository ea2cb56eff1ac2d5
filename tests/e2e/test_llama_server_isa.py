"""How llama_server.py chooses the instruction set it builds llama.cpp for, and what happens when the built
binary cannot start: fast, with stub binaries in place of llama-server and no real build (that one is
test_llama_server.py's)."""

from __future__ import annotations

import signal
import sys

import pytest

import llama_server

# /proc/cpuinfo flags (the ISA ones) of three CPUs: an AMX Xeon (Sapphire Rapids), an AVX2 desktop (Haswell)
# and a Xeon Phi (Knights Landing: AVX-512 F and CD, none of VL/DQ/BW that ggml's AVX512 also compiles for)
SAPPHIRE_RAPIDS = set("sse4_2 avx avx2 fma f16c bmi2 avx_vnni avx512f avx512cd avx512vl avx512dq avx512bw "
                      "avx512vbmi avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 amx_bf16".split())
HASWELL = set("sse4_2 avx avx2 fma f16c bmi2".split())
KNIGHTS_LANDING = set("sse4_2 avx avx2 fma f16c bmi2 avx512f avx512cd avx512er avx512pf".split())
NO_EXTENSION = {"GGML_NATIVE": False, **dict.fromkeys(llama_server.X86_OPTIONS, False),
                **dict.fromkeys(llama_server.ALWAYS_OFF, False)}


def on(isa: dict[str, bool]) -> set[str]:
    return {option for option, enabled in isa.items() if enabled}


def test_the_options_are_those_the_cpuinfo_flags_allow_and_amx_is_never_on():
    xeon = llama_server.isa_options(SAPPHIRE_RAPIDS, "x86_64")
    assert xeon["GGML_NATIVE"] is False  # no -march=native: it would compile AMX and AVX512-FP16 in
    assert not any(xeon[option] for option in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"))
    assert on(xeon) == {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_AVX_VNNI", "GGML_FMA", "GGML_F16C",
                        "GGML_BMI2", "GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16"}
    assert llama_server.cmake_isa_flags(xeon) == [
        "-DGGML_NATIVE=OFF", "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_AVX_VNNI=ON",
        "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=ON", "-DGGML_AVX512_VBMI=ON",
        "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF"]
    # every option is passed, off ones too: with native off, ggml's own defaults turn AVX2, FMA... on
    assert set(xeon) == {"GGML_NATIVE", *llama_server.X86_OPTIONS, *llama_server.ALWAYS_OFF}
    assert on(llama_server.isa_options(HASWELL, "x86_64")) == {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA",
                                                               "GGML_F16C", "GGML_BMI2"}
    assert on(llama_server.isa_options(KNIGHTS_LANDING | {"avx512_vnni"}, "x86_64")) == \
        {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"}  # no AVX-512 part alone
    assert llama_server.isa_options(SAPPHIRE_RAPIDS, "aarch64") == {}  # ggml's native default there
    assert llama_server.isa_options(set(), "x86_64") == {}  # no cpuinfo to read: ggml's default too


def test_the_baseline_keeps_sse_to_avx2_then_nothing_then_gives_up():
    xeon = llama_server.isa_options(SAPPHIRE_RAPIDS, "x86_64")
    baseline = llama_server.baseline_options(xeon)
    assert on(baseline) == {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C"}
    assert set(baseline) == set(xeon)  # still every option named: nothing left to ggml's defaults
    assert llama_server.baseline_options(baseline) == NO_EXTENSION
    assert llama_server.baseline_options(NO_EXTENSION) is None
    assert llama_server.baseline_options({}) == {"GGML_NATIVE": False}  # not x86: the compiler's generic target
    assert llama_server.baseline_options({"GGML_NATIVE": False}) is None


def test_each_isa_has_its_own_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path))
    xeon = llama_server.isa_options(SAPPHIRE_RAPIDS, "x86_64")
    folders = {llama_server.server_dir(isa) for isa in (xeon, llama_server.baseline_options(xeon), NO_EXTENSION, {})}
    assert len(folders) == 4 and all(f.parent == tmp_path / "llama-server" for f in folders)
    assert llama_server.server_dir(dict(xeon)) == llama_server.server_dir(xeon)


def stub(tmp_path, name: str, body: str):
    """An executable that stands in for llama-server."""
    path = tmp_path / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def dies_with_sigill(tmp_path):
    return stub(tmp_path, "sigill", "#!/bin/sh\nkill -ILL $$\n")


def healthy(tmp_path):
    """Answers /health as a started llama-server does, on the port it is given."""
    return stub(tmp_path, "healthy", f"""#!{sys.executable}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{{"status": "ok"}}')
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
""")


def test_a_binary_killed_while_starting_is_one_line_naming_the_signal_and_the_log(tmp_path):
    server = llama_server.LlamaServer(dies_with_sigill(tmp_path), tmp_path / "model.gguf")
    with pytest.raises(llama_server.ServerDied) as died:
        server.start(timeout=30)
    assert died.value.signal == signal.SIGILL
    assert str(died.value) == \
        f"llama-server died with SIGILL (illegal instruction) while starting; log: {server.log_path}"
    server = llama_server.LlamaServer(stub(tmp_path, "exits", "#!/bin/sh\nexit 3\n"), tmp_path / "model.gguf")
    with pytest.raises(llama_server.ServerDied) as died:
        server.start(timeout=30)
    assert died.value.signal is None
    assert str(died.value) == f"llama-server exited with code 3 while starting; log: {server.log_path}"


@pytest.fixture
def builds(monkeypatch):
    """start_server on an AMX Xeon, whose builds are stubs handed out in turn: the ISA options of each
    build asked for are recorded."""
    asked: list[dict[str, bool]] = []
    binaries = []

    def build(isa, jobs, log):
        asked.append(isa)
        return binaries[len(asked) - 1]

    monkeypatch.setattr(llama_server, "cpu_flags", lambda: SAPPHIRE_RAPIDS)
    monkeypatch.setattr(llama_server.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(llama_server, "ensure_built", build)
    return asked, binaries


def test_a_binary_killed_while_starting_is_built_again_once_with_the_baseline(builds, tmp_path):
    asked, binaries = builds
    binaries += [dies_with_sigill(tmp_path), healthy(tmp_path)]
    said = []
    server = llama_server.start_server(tmp_path / "model.gguf", say=said.append)
    try:
        assert server.process.poll() is None and server.binary == binaries[1]
    finally:
        server.stop()
    xeon = llama_server.isa_options(SAPPHIRE_RAPIDS, "x86_64")
    assert asked == [xeon, llama_server.baseline_options(xeon)]
    assert on(asked[1]) == {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C"}
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("llama-server died with SIGILL (illegal instruction) while starting; log: ")
    assert said[0].endswith("; building it again for the baseline ISA (SSE42 AVX AVX2 FMA F16C)")


def test_the_baseline_dying_too_is_the_error_after_two_builds(builds, tmp_path):
    asked, binaries = builds
    binaries += [dies_with_sigill(tmp_path)] * 2
    said = []
    with pytest.raises(llama_server.ServerDied, match="SIGILL"):
        llama_server.start_server(tmp_path / "model.gguf", say=said.append)
    assert len(asked) == 2 and len(said) == 1


def test_an_exit_without_a_signal_is_the_error_at_once(builds, tmp_path):
    asked, binaries = builds
    binaries.append(stub(tmp_path, "exits", "#!/bin/sh\nexit 1\n"))
    said = []
    with pytest.raises(llama_server.ServerDied, match="exited with code 1"):
        llama_server.start_server(tmp_path / "model.gguf", say=said.append)
    assert len(asked) == 1 and said == []  # another instruction set would not change a bad argument
