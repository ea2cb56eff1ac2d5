"""WrapLabel and plotting.text_size: the light replacements of Qt's label and text measure that a Run's frames
redraw, checked against what they replace."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from gui.theme import Appearance
from gui.widgets.plotting import text_size
from gui.widgets import markup
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


TEXTS = [  # the markup the views write (bold, colours, <br>, entities), plain text with a line break, Chinese, and
    # markup outside that subset (QTextDocument's path)
    ("<b>46,080 bytes per token</b> = 2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 B (float32)<br><b>now</b> "
     "73 tokens → <b>3.36 MB</b> used of 3.36 MB allocated", Qt.AutoText),
    ("<b style='color:#7a5af8'>Prefill</b>: 5 positions in one pass, 36.1 ms = <b>138 tokens/s</b> &nbsp; "
     "<span style='color:#667085'>x &lt; y, <i>in italics</i></span><br><br>after an empty line", Qt.RichText),
    ("Step 60 drew “·only” (rank 8, u = 0.7279) · T 1 · top-k 50 · top-p 1 · entropy 3.15 nats\nsecond line",
     Qt.PlainText),
    ("预填充：<b>5 个位置</b>一次前向，36.1 ms<br>每个词元 46,080 字节", Qt.RichText),
    ("<small>small</small> and <a href='x'>a link</a> <b>bold</b>", Qt.RichText),
]


@pytest.mark.parametrize("text, text_format", TEXTS)
def test_a_wrap_label_paints_the_pixels_qlabel_paints(qapp, text, text_format):
    """Laid out by markup.py (or a document of its own for other markup), the label paints what QLabel paints, at
    every width, and asks for the same height."""
    for width in (150, 320, 700):
        ours, theirs = WrapLabel(), QLabel()
        for label in (ours, theirs):
            label.setWordWrap(True)
            label.setTextFormat(text_format)
            label.setAlignment(Qt.AlignLeft | Qt.AlignTop)
            label.setText(text)
        height = theirs.heightForWidth(width)
        assert ours.heightForWidth(width) == height
        ours.resize(width, height)
        theirs.resize(width, height)
        assert ours.grab().toImage() == theirs.grab().toImage()
    assert (ours._laid is None) == ("<a " in text)  # only the markup outside the subset takes a document


def test_markup_reads_the_views_subset_and_leaves_the_rest_to_qt():
    marked = markup.parse("a <b>b <span style='color:#123456'>c</span></b> &amp;&nbsp;d<br>e")
    assert marked.text == "a b c &\u00a0d\u2028e"
    assert marked.runs == (markup.Run(2, 2, True, False, None), markup.Run(4, 1, True, False, "#123456"))
    assert [p.text for p in markup.paragraphs(marked)] == ["a b c &\u00a0d", "e"]
    for other in ("<a href='x'>x</a>", "<b onclick='y'>x</b>", "<span style='color:red; font-size:9pt'>x</span>",
                  "<b><i>x</b></i>"):
        assert markup.parse(other) is None


def test_a_changed_text_keeps_the_layout_of_its_unchanged_lines(qapp):
    label = WrapLabel("<b>first</b> line<br>step 1")
    first = label._laid.pieces[0]
    label.setText("<b>first</b> line<br>step 2")
    assert label._laid.pieces[0] is first and label._laid.text == "first line\u2028step 2"


def test_a_selectable_wrap_label_copies_the_text_as_it_reads(qapp):
    label = WrapLabel("<b>46,080 bytes</b> per token<br>now &lt;b&gt; 3 tokens")
    label.copy_text()
    assert QApplication.clipboard().text() == "46,080 bytes per token\nnow <b> 3 tokens"


def test_a_wrap_label_has_a_height_for_its_width_before_and_after_a_text(qapp):
    """Layouts give a wrapped label the height of its width only when it says it has one (QLabel says so for a
    text label only)."""
    label = WrapLabel()
    assert label.hasHeightForWidth()
    label.setText("<b>now</b> a text")
    assert label.hasHeightForWidth()


def test_a_changed_line_is_all_a_wrap_label_paints_again_and_the_screen_shows_the_new_text(qapp):
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtGui import QImage

    class Regions(QObject):
        def __init__(self):
            super().__init__()
            self.rects = []

        def eventFilter(self, obj, event) -> bool:
            if event.type() == QEvent.Paint:
                self.rects.append(event.rect())
            return False

    def settle():
        for _ in range(4):
            QApplication.processEvents()

    def screen(label):
        window = label.window().screen().grabWindow(label.window().winId()).toImage()
        return window.copy(label.geometry()).convertToFormat(QImage.Format_RGB32)

    label = WrapLabel("<b>Prefill</b>: 5 positions<br><b>Decode</b>: 20 tokens, 18.9 ms<br>"
                      "<span style='color:#667085'>Below the steps: every pass</span>")
    label.setAlignment(Qt.AlignLeft | Qt.AlignTop)
    holder = QWidget()  # in a layout, as in the views: it tells the label's height to the layout
    QVBoxLayout(holder).addWidget(label)
    holder.resize(320, 120)
    holder.show()
    settle()
    regions = Regions()
    label.installEventFilter(regions)
    label.setText("<b>Prefill</b>: 5 positions<br><b>Decode</b>: 21 tokens, 19.0 ms<br>"
                  "<span style='color:#667085'>Below the steps: every pass</span>")
    settle()
    assert regions.rects and all(r.height() < label.height() / 2 for r in regions.rects)
    assert screen(label) == label.grab().toImage().convertToFormat(QImage.Format_RGB32)
    label.setText("<b>Prefill</b>: 5 positions<br><b>Decode</b>: 21 tokens, 19.0 ms, and a line long enough to wrap "
                  "onto a second one<br><span style='color:#667085'>Below the steps: every pass</span>")
    settle()
    assert screen(label) == label.grab().toImage().convertToFormat(QImage.Format_RGB32)
    holder.close()
