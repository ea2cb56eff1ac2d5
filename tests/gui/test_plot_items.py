"""WrapLabel and plotting.text_size: the light replacements of Qt's label and text measure that a Run's frames
redraw, checked against what they replace."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QLabel

from gui.theme import Appearance
from gui.widgets.plotting import text_size
from gui.widgets.wrap_label import WrapLabel


def test_a_wrap_label_asks_for_the_height_qlabel_would_at_every_width(qapp):
    text = ("<b>46,080 bytes per token</b> = 2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 B (float32)<br>"
            "<b>now</b> 73 tokens → <b>3.36 MB</b> used of 3.36 MB allocated")
    ours, theirs = WrapLabel(text), QLabel(text)
    theirs.setWordWrap(True)
    for width in (120, 300, 640):
        assert ours.heightForWidth(width) == theirs.heightForWidth(width)
    ours.setText(text + " and more words to wrap onto one more line at least")
    theirs.setText(text + " and more words to wrap onto one more line at least")
    assert ours.heightForWidth(300) == theirs.heightForWidth(300)  # the cache follows the text
    assert ours.sizeHint().height() == theirs.heightForWidth(ours.sizeHint().width())
    assert ours.minimumSizeHint().height() >= ours.fontMetrics().lineSpacing()


def test_a_text_measured_before_is_measured_again_in_another_font(qapp):
    """text_size keeps one measure per text and font (a painted chart's labels mostly repeat their texts)."""
    small, large = Appearance().font(0.85), Appearance(presentation=True).font(0.85)
    assert text_size(small, "3e-5 → 3e-5") == text_size(small, "3e-5 → 3e-5")
    measured = QFontMetricsF(large).boundingRect(QRectF(0, 0, 1e6, 1e6), Qt.AlignLeft | Qt.AlignTop, "3e-5 → 3e-5")
    assert text_size(large, "3e-5 → 3e-5") == measured.size()
    assert text_size(large, "3e-5 → 3e-5").width() > text_size(small, "3e-5 → 3e-5").width()
