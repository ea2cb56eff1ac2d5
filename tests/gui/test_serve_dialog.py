"""Generation → Serve several requests…: the defaults serve at one click, bad input is one line and nothing is sent."""

from PySide6.QtWidgets import QTableWidgetItem

from gui.dialogs.serve_dialog import ServeDialog
from inference.settings import GenerationSettings, SamplerSettings


def test_the_defaults_are_four_staggered_chat_requests_sharing_a_system_prompt(qtbot):
    base = GenerationSettings(SamplerSettings(temperature=0.8), seed=7, max_new_tokens=64)
    dialog = ServeDialog(None, base)
    qtbot.addWidget(dialog)
    dialog._accept()
    requests, block_tokens, n_blocks, budget = dialog.chosen
    assert dialog.result() == ServeDialog.Accepted and block_tokens == 16 and n_blocks == 0 and budget == 48
    assert len(requests) == 4 and len({r.system for r in requests}) == 1 and requests[0].system
    assert [r.arrive_at_step for r in requests] == [0, 0, 2, 5] and all(r.chat for r in requests)
    assert [r.settings.seed for r in requests] == [7, 8, 9, 10]  # one seed each: different answers
    assert all(r.settings.sampler == base.sampler and r.settings.max_new_tokens == 24 for r in requests)
    assert [dialog.table.verticalHeaderItem(i).text() for i in range(4)] == ["0", "1", "2", "3"]


def test_bad_input_is_one_line_and_the_dialog_stays(qtbot):
    dialog = ServeDialog()
    qtbot.addWidget(dialog)
    dialog.table.setItem(1, 0, QTableWidgetItem("  "))
    dialog._accept()
    assert dialog.chosen is None and dialog.error.text() == "Request 1's prompt is empty."
    dialog.table.setItem(1, 0, QTableWidgetItem("Hello"))
    dialog.table.setItem(2, 1, QTableWidgetItem("soon"))
    dialog._accept()
    assert dialog.chosen is None and "Request 2 arrives at step 'soon'" in dialog.error.text()
    dialog.table.setItem(2, 1, QTableWidgetItem("3"))
    dialog.shared.setChecked(False)
    dialog._accept()
    assert dialog.chosen is not None and all(r.system == "" for r in dialog.chosen[0])
    while dialog.table.rowCount():
        dialog.remove_row()
    dialog.chosen = None
    dialog._accept()
    assert dialog.chosen is None and dialog.error.text() == "Add a request: there is nothing to serve."
