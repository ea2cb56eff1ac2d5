"""plotting.Label, plotting.StyledBars and WrapLabel: the light replacements of pyqtgraph's and Qt's items
that a Run's frames redraw, checked against what they replace."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter
from PySide6.QtWidgets import QLabel

from gui.theme import Appearance
from gui.widgets.plotting import Bars, Label, StyledBars
from gui.widgets.wrap_label import WrapLabel


@pytest.fixture
def appearance(qapp):
    return Appearance()


def test_a_label_sits_where_it_was_last_shown_even_after_being_hidden(appearance):
    label = Label(appearance)
    label.show_text("a", 1.0, 2.0)
    assert (label.pos().x(), label.pos().y()) == (1.0, 2.0)
    label.show_text("")  # hidden: an empty label moves nowhere
    label.show_text("b", 0.0, 0.0)
    assert (label.pos().x(), label.pos().y()) == (0.0, 0.0)
    label.show_text("", 5.0, 5.0)
    label.show_text("c", 5.0, 5.0)
    assert (label.pos().x(), label.pos().y()) == (5.0, 5.0)
    assert label.toPlainText() == "c"


@pytest.mark.parametrize("anchor", [(0, 0.5), (1, 0.5), (0.5, 0), (0.5, 0.5)])
def test_a_labels_box_is_its_text_plus_the_margin_around_the_anchor(appearance, anchor):
    label = Label(appearance, anchor=anchor)
    label.show_text("0.069 → ×\n−50.2%", 0.3, 4.0)
    size = QFontMetricsF(appearance.font(0.85)).boundingRect(QRectF(0, 0, 1e6, 1e6), Qt.AlignLeft | Qt.AlignTop,
                                                             "0.069 → ×\n−50.2%").size()
    box = label.boundingRect()
    assert box.width() == pytest.approx(size.width() + 2 * Label.MARGIN)
    assert box.height() == pytest.approx(size.height() + 2 * Label.MARGIN)
    assert -box.left() == pytest.approx(anchor[0] * box.width())  # the anchor's point of the box at pos
    assert -box.top() == pytest.approx(anchor[1] * box.height())
    label.show_text("")
    assert label.boundingRect().isEmpty()


def test_a_label_ignores_the_plots_zoom(appearance):
    """In a plot, the text keeps its pixel size whatever the axes' ranges (as pg.TextItem's)."""
    plot = pg.PlotWidget()
    plot.resize(400, 300)
    label = Label(appearance)
    plot.addItem(label)
    label.show_text("text", 5.0, 5.0)
    widths = []
    for span in (10.0, 1000.0):
        plot.setXRange(0, span, padding=0)
        plot.setYRange(0, span, padding=0)
        view = plot.getPlotItem().getViewBox()
        view.updateMatrix()  # pyqtgraph applies a new range at the next paint
        on_screen = label.deviceTransform(plot.viewportTransform()).mapRect(label.boundingRect())
        widths.append(on_screen.width())
        assert view.mapSceneToView(label.mapToScene(0, 0)).x() == pytest.approx(5.0)
    assert widths[0] == pytest.approx(widths[1]) == pytest.approx(label.boundingRect().width())


def render(item, size=(120, 60), view=(0, 0, 12, 6)) -> QImage:
    plot = pg.PlotWidget()
    plot.resize(*size)
    plot.addItem(item)
    plot.setXRange(view[0], view[2], padding=0)
    plot.setYRange(view[1], view[3], padding=0)
    plot.getPlotItem().hideAxis("left")
    plot.getPlotItem().hideAxis("bottom")
    image = QImage(*size, QImage.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    plot.render(painter)
    painter.end()
    return image


def test_styled_bars_draw_as_bar_graph_item_with_a_brush_and_pen_per_bar(qapp):
    """The same bars, pixel for pixel, drawn one style at a time."""
    x = np.arange(1, 11, dtype=float)
    height = np.linspace(1, 5, 10)
    styles = [0, 1, 1, 2, 1, 0, 2, 2, 1, 0]
    fills = [QColor("#3366cc"), QColor("#dc3912"), QColor("#109618")]
    pens = [None, pg.mkPen("#000000", width=1), pg.mkPen(fills[2], width=1)]
    styled = StyledBars(x=[], height=[], width=0.7)
    styled.set_bars(styles, list(zip(pens, fills)), x=x, height=height, width=0.7)
    plain = pg.BarGraphItem(x=x, height=height, width=0.7, brushes=[fills[s] for s in styles],
                            pens=[pens[s] if pens[s] is not None else pg.mkPen(None) for s in styles])
    a, b = render(styled), render(plain)
    assert a == b
    assert a != render(pg.BarGraphItem(x=x, height=height, width=0.7, brush=fills[0], pen=None))  # it draws


def test_bars_bounds_follow_the_bars_and_the_view(qapp):
    bars = Bars(x=[1.0], height=[2.0], width=0.5)
    plot = pg.PlotWidget()
    plot.resize(200, 200)
    plot.addItem(bars)
    first = bars.boundingRect()
    assert first.contains(QRectF(0.75, 0, 0.5, 2.0))
    bars.setOpts(x=[4.0], height=[3.0], width=0.5)
    assert bars.boundingRect().contains(QRectF(3.75, 0, 0.5, 3.0))
    plain = pg.BarGraphItem(x=[4.0], height=[3.0], width=0.5)
    plot.addItem(plain)
    plot.setXRange(0, 100, padding=0)  # the pixel padding changes with the view
    plot.getPlotItem().getViewBox().updateMatrix()
    assert bars.boundingRect() == plain.boundingRect()


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


def test_a_labels_text_measured_before_is_measured_again_in_another_font(qapp):
    small, large = Appearance(), Appearance(presentation=True)
    label, other = Label(small), Label(small)
    label.show_text("3e-5 → 3e-5", 0.1, 1.0)
    other.show_text("3e-5 → 3e-5", 0.2, 2.0)  # the same text: the same box
    assert other.boundingRect().size() == label.boundingRect().size()
    other.restyle(large)
    assert other.boundingRect().width() > label.boundingRect().width()
    metrics = QFontMetricsF(large.font(0.85)).boundingRect(QRectF(0, 0, 1e6, 1e6), Qt.AlignLeft | Qt.AlignTop,
                                                          "3e-5 → 3e-5")
    assert other.boundingRect().width() == metrics.width() + 2 * Label.MARGIN
