"""Attention, rebuilt (issue 15, part 2): the prefill's whole triangle per layer and head, a decode step's
row, grouped-query heads, and the dock that draws them (on tiny random models: fast, and with GQA)."""

import re

import numpy as np
import pytest
import torch

from inference.attention import kept_positions, kv_groups
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from tiny import make_hf_model, save_hf_model
from app_driver import prefill, settle, step, wait_until

PROMPT = [5, 77, 200, 31, 9, 140]  # six tokens
GREEDY = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4)
SIX_TOKENS = "abcdef"  # the tiny byte-level tokenizer: six tokens


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("attn"))  # 4 heads, 2 K/V


@pytest.fixture(scope="module")
def tiny(tiny_folder):
    return load_model(tiny_folder, device="cpu", dtype="float32")


def reference_attention(folder, ids):
    """transformers' eager attention weights: softmax(QK^T / sqrt(d) + causal mask), (layers, H, T, T)."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])


def test_prefill_captures_every_layer_and_heads_triangle_equal_to_transformers(tiny, tiny_folder):
    session = Session(tiny, GREEDY, capture_attention=True)
    prefill = session.prefill(PROMPT)
    prompt = prefill.prompt_attention
    c = tiny.config
    assert prompt.packed.shape == (c.n_layers, c.n_heads, 6 * 7 // 2) and prompt.packed.dtype == np.float16
    reference = reference_attention(tiny_folder, PROMPT)  # (layers, heads, 6, 6)
    for layer in range(c.n_layers):
        for head in range(c.n_heads):
            ours = prompt.matrix(layer, head)
            assert np.isnan(ours).sum() == 15 and np.isnan(ours[np.triu_indices(6, 1)]).all()
            np.testing.assert_allclose(np.nan_to_num(ours), reference[layer, head], atol=2e-3)
        np.testing.assert_allclose(np.nan_to_num(prompt.matrix(layer)), reference[layer].mean(0), atol=2e-3)
    # the last row is today's row too, in float32
    np.testing.assert_allclose(prefill.attention, reference[:, :, -1, :], atol=1e-5)


def test_long_prompt_triangle_is_assembled_from_chunks(tiny, monkeypatch):
    import inference.session.session as session_module

    monkeypatch.setattr(session_module, "PREFILL_CHUNK", 4)
    ids = list(range(10, 40))
    chunked = Session(tiny, GREEDY, capture_attention=True).prefill(ids).prompt_attention
    monkeypatch.setattr(session_module, "PREFILL_CHUNK", 512)
    whole = Session(tiny, GREEDY, capture_attention=True).prefill(ids).prompt_attention
    np.testing.assert_allclose(chunked.packed.astype(np.float32), whole.packed.astype(np.float32), atol=2e-3)
    rows = np.nansum(whole.matrix(1, 3), axis=1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-2)


def test_a_decode_step_reports_one_row_over_every_cached_position(tiny):
    session = Session(tiny, GREEDY, capture_attention=True)
    session.prefill(PROMPT)
    list(session.step())
    pending = session.preview()
    assert pending.attention.shape == (tiny.config.n_layers, tiny.config.n_heads, 7)
    np.testing.assert_allclose(pending.attention.sum(-1), 1.0, atol=1e-5)
    step2 = next(e for e in session.step())
    assert step2.attention is pending.attention


def test_recapture_equals_what_was_recorded_and_changes_nothing(tiny):
    recorded = Session(tiny, GREEDY, capture_attention=True)
    prefill = recorded.prefill(PROMPT)
    list(recorded.step())
    row = recorded.preview().attention
    session = Session(tiny, GREEDY)  # not recording: a view opened later asks
    session.prefill(PROMPT)
    step1 = next(e for e in session.step())
    count = session.forward_count
    again = session.attention_of(0)
    np.testing.assert_allclose(again.prompt.packed.astype(np.float32),
                               prefill.prompt_attention.packed.astype(np.float32), atol=2e-3)
    np.testing.assert_allclose(session.attention_of(step1.node).attention, row, atol=1e-5)
    assert session.forward_count == count + 2  # its own scratch passes only
    step2 = next(e for e in session.step())  # the session's cache and pending logits are as they were
    assert step2.index == 2


def test_the_cap_keeps_a_complete_top_left_square():
    assert kept_positions(2, 4, 700) == 700
    assert 700 < kept_positions(30, 9, 5000) < 1024  # the default model: 700+ positions within the bytes cap
    assert kept_positions(2, 4, 5000) == 1024


def test_kv_groups():
    assert kv_groups(9, 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert kv_groups(4, 4) == [[0], [1], [2], [3]]


# --- the dock --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def window(qapp, tiny_folder, tmp_path_factory):
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.theme import Appearance

    settings = QSettings(str(tmp_path_factory.mktemp("attn-gui") / "tokenstep.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), model=str(tiny_folder))
    win.resize(1400, 900)
    win.show()
    wait_until(lambda: win.controller.info is not None)
    yield win
    win.close()


def show_attention(win):
    win.docks["attention"].show()
    win.docks["attention"].raise_()
    settle(win)
    return win.views["attention"]


def test_opened_after_prefill_it_recomputes_and_draws_the_masked_triangle(window):
    window.docks["attention"].hide()
    prefill(window, SIX_TOKENS, greedy=True)
    assert window.controller.prefill_event.prompt_attention is None  # not recorded: the dock was closed
    view = show_attention(window)
    assert view.stack.currentWidget() is view.placeholder or view.grid is not None  # never an empty frame
    wait_until(lambda: view.grid is not None)
    image = view.plot.image.image
    assert image.shape == (6, 6) and view.grid.shape == (6, 6)
    masked = np.isnan(view.grid)
    assert masked.sum() == 15 and masked[np.triu_indices(6, 1)].all()
    np.testing.assert_allclose(np.nansum(view.grid, axis=1), 1.0, atol=1e-2)
    assert "ONE parallel pass" in view.caption.text() and "causal mask" in view.caption.text()


def test_prefill_with_the_dock_open_and_a_decode_row_after_a_step(window):
    view = show_attention(window)
    prefill(window, SIX_TOKENS, greedy=True)
    c = window.controller
    prompt = c.prefill_event.prompt_attention
    assert prompt is not None and view.grid.shape == (6, 6)
    step(window)  # step 1 (drawn from the prefill) is shown: still the triangle
    assert view.grid.shape == (6, 6)
    c.select(None)  # the pending step 2: the decode pass that fed step 1's token
    settle(window)
    assert view.grid.shape == (1, 7) and not np.isnan(view.grid).any()
    np.testing.assert_allclose(view.grid.sum(), 1.0, atol=1e-5)
    step(window)
    c.select(2)
    settle(window)
    layer, head = view.picker.current
    np.testing.assert_allclose(view.grid[0], c.steps[1].attention[layer].mean(0), atol=1e-6)
    assert "position 6" in view.caption.text()


def test_layer_and_head_choose_the_captured_matrix(window):
    view = show_attention(window)
    prefill(window, SIX_TOKENS, greedy=True)
    prompt = window.controller.prefill_event.prompt_attention
    for layer, head in ((0, 3), (1, 0), (0, None)):
        view.picker.select(layer, head)
        settle(window)
        np.testing.assert_array_equal(view.grid, prompt.matrix(layer, head))
    assert not np.array_equal(prompt.matrix(0, 3), prompt.matrix(0, 2))


def test_grouped_heads_are_drawn_and_a_click_highlights_both_tokens_in_context(window, qtbot):
    from PySide6.QtCore import Qt

    view = show_attention(window)
    prefill(window, SIX_TOKENS, greedy=True)
    text = re.sub("<[^>]+>", "", view.picker.groups.text()).replace("&nbsp;", " ").replace("\u2060", "")
    assert "share 2 K/V heads" in text and "K/V head 0:" in text and "K/V head 1:" in text
    assert text.index("q1") < text.index("K/V head 1:") < text.index("q2")  # q0 q1 | q2 q3
    view.picker.select(1, 2)
    settle(window)
    assert "q2 (K/V head 1)" in view.caption.text()
    view._hover(4, 1)
    assert "query 4 'e' → key 1 'b'" in view.hover_text.text() and "weight 0." in view.hover_text.text()
    view._hover(1, 4)
    assert "masked" in view.hover_text.text()
    viewport = view.plot.viewport()
    qtbot.mouseClick(viewport, Qt.LeftButton, pos=view.plot.mapFromScene(view.plot.scene_pos(4, 1)))
    assert window.views["context"].canvas.highlighted == {4, 1}


def test_opened_after_steps_it_recomputes_the_shown_decode_row(window):
    window.docks["attention"].hide()
    prefill(window, SIX_TOKENS, greedy=True)
    step(window, 2)
    c = window.controller
    assert c.steps[1].attention is None  # taken while the dock was closed
    view = show_attention(window)
    wait_until(lambda: view.grid is not None)
    assert view.grid.shape == (1, 7)
    recomputed = c.history.attention[c.steps[1].parent].attention
    layer, head = view.picker.current
    expected = recomputed[layer].mean(0) if head is None else recomputed[layer, head]
    np.testing.assert_allclose(view.grid[0], expected, atol=1e-6)
