"""The Serving dock's two painted pictures: the scheduler's timeline (a row per request over the passes' time)
and the paged KV cache's block pool (a cell per block). Both draw a `Serving` (gui/state/serving.py) as it is;
a click on a request's row or one of its blocks says which request (`request_clicked`).

Timeline: x is the passes' time laid end to end (ms), so a step's width is how long its forward pass took;
each request's cell in a step is its phase: waiting (pale), a prompt chunk (hatched), a decode row (solid), no
row while running (a thin line), nothing before it arrives (a tick marks its arrival) or after it finished.
Block pool: free blocks grey; a block in use in its request's colour, as full as the positions it holds (a
request's last block is filled only part way: the rest is internal fragmentation, drawn pale); a block in more
than one request's table (a shared prefix block) has a heavy outline and its reference count.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gui.state.i18n import translate
from gui.state.serving import DECODE, IDLE, PREFILL, WAITING, Serving, waiting_reason
from gui.theme import Appearance, request_colour
from gui.widgets.canvas import begin_paint


def _colour(hex_colour: str, alpha: int = 255) -> QColor:
    c = QColor(hex_colour)
    c.setAlpha(alpha)
    return c


class TimelineCanvas(QWidget):
    request_clicked = Signal(int, int)  # the request's row, the scheduler step clicked (-1: none)

    LABEL_W = 34.0
    AXIS_H = 20.0

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.serving: Serving | None = None
        self.setMouseTracking(True)
        self.setMinimumSize(220, 90)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self._drawn = None  # what the last paint showed: (steps, selected) - a frame with nothing new paints nothing

    def sizeHint(self) -> QSize:
        return QSize(480, 180)

    def show_serving(self, serving: Serving) -> None:
        key = (id(serving), serving.n_steps, serving.selected, serving.grid_step, serving.started)
        self.serving = serving
        if key != self._drawn:
            self._drawn = key
            self.update()

    # --- geometry -------------------------------------------------------------------------------------
    def _row_height(self) -> float:
        n = len(self.serving.tracks) if self.serving else 1
        return max(6.0, min(26.0 * self.appearance.scale, (self.height() - self.AXIS_H - 4) / max(n, 1)))

    def x_of(self, ms: float) -> float:
        """Where `ms` of the passes' time is drawn."""
        total = self.serving.total_ms if self.serving else 0.0
        span = self.width() - self.LABEL_W - 8
        return self.LABEL_W + (ms / total * span if total > 0 else 0.0)

    def row_rect(self, index: int) -> QRectF:
        h = self._row_height()
        return QRectF(0, 2 + index * h, self.width(), h)

    def row_at(self, y: float) -> int | None:
        if not self.serving:
            return None
        i = int((y - 2) // self._row_height())
        return i if 0 <= i < len(self.serving.tracks) else None

    def step_at(self, x: float) -> int | None:
        s = self.serving
        if not s or not s.n_steps or x < self.LABEL_W:
            return None
        for step in range(s.n_steps):
            a, b = s.span(step)
            if self.x_of(a) <= x <= self.x_of(b):
                return step
        return None

    # --- painting -------------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        s = self.serving
        painter = begin_paint(self, self.appearance, translate(
            "Serving", "Serve several requests (Generation menu) to see the scheduler's steps here."),
            s is None or not s.tracks)
        if painter is None:
            return
        t = self.appearance.theme
        h = self._row_height()
        painter.setFont(self.appearance.font(0.8))
        fm = QFontMetricsF(painter.font())
        for track in s.tracks:
            row = self.row_rect(track.index)
            if track.index == s.selected:
                painter.fillRect(row, _colour(t.selected, 40))
            c = request_colour(track.index)
            painter.setPen(QColor(t.text))
            painter.fillRect(QRectF(2, row.top() + 2, 8, h - 4), QColor(c))
            painter.drawText(QRectF(12, row.top(), self.LABEL_W - 12, h), Qt.AlignVCenter | Qt.AlignLeft,
                             str(track.index))
            cell_h = max(3.0, h - 6)
            y = row.top() + (h - cell_h) / 2
            for step, phase in enumerate(track.phases):
                a, b = s.span(step)
                rect = QRectF(self.x_of(a), y, max(self.x_of(b) - self.x_of(a), 0.0), cell_h)
                if rect.width() <= 0:
                    continue
                if phase == WAITING:
                    painter.fillRect(rect, _colour(c, 45))
                elif phase == PREFILL:
                    painter.fillRect(rect, _colour(c, 110))
                    painter.fillRect(rect, QBrush(QColor(t.panel), Qt.BDiagPattern))
                elif phase == DECODE:
                    painter.fillRect(rect, QColor(c))
                elif phase == IDLE:
                    painter.fillRect(QRectF(rect.left(), rect.center().y() - 1, rect.width(), 2), _colour(c, 160))
            if track.arrive_at_step < s.n_steps:  # its arrival: a tick where its arrival step's pass starts
                x = round(self.x_of(s.starts_ms[track.arrive_at_step]))  # on whole pixels: crisp, never a blend
                painter.fillRect(QRectF(x - 1, row.top() + 1, 2, h - 2), QColor(c))
        if s.grid_step is not None and 0 <= s.grid_step < s.n_steps:  # the step the block grid shows
            a, b = s.span(s.grid_step)
            painter.setPen(QPen(QColor(t.text), 1.5, Qt.DashLine))
            painter.drawRect(QRectF(self.x_of(a), 1, max(self.x_of(b) - self.x_of(a), 2.0), self.height() - self.AXIS_H))
        # the axis: the passes' time
        painter.setPen(QPen(QColor(t.muted), 1))
        base = self.height() - self.AXIS_H + 2
        painter.drawLine(QPointF(self.LABEL_W, base), QPointF(self.width() - 8, base))
        total = s.total_ms
        if total > 0:
            tick = _nice_step(total / 5)
            ms = 0.0
            while ms <= total + 1e-9:
                x = self.x_of(ms)
                painter.drawLine(QPointF(x, base), QPointF(x, base + 3))
                label = f"{ms:g}"
                painter.drawText(QPointF(x - fm.horizontalAdvance(label) / 2, base + 3 + fm.ascent()), label)
                ms += tick
        painter.drawText(QRectF(0, base, self.LABEL_W, self.AXIS_H), Qt.AlignVCenter | Qt.AlignLeft, "ms")
        painter.end()

    # --- mouse ----------------------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:
        row = self.row_at(event.position().y())
        if row is not None:
            step = self.step_at(event.position().x())
            self.request_clicked.emit(row, -1 if step is None else step)

    def mouseMoveEvent(self, event) -> None:
        s = self.serving
        row, step = self.row_at(event.position().y()), self.step_at(event.position().x())
        if s is None or row is None or step is None:
            QToolTip.hideText()
            return
        track, schedule = s.tracks[row], s.schedules[step]
        phase = track.phases[step]
        chunk = track.chunks[step]
        if phase == PREFILL:
            what = translate("Serving", "read %n prompt token(s)", None, chunk)
        elif phase == WAITING:
            what = translate("Serving", "waiting: {why}").format(why=waiting_reason(track.waiting_for)) \
                if track.waiting_for else translate("Serving", "waiting")
        else:
            what = {DECODE: translate("Serving", "decoded one token"),
                    IDLE: translate("Serving", "running, no row in this pass")}.get(phase, phase)
        QToolTip.showText(event.globalPosition().toPoint(),
                          translate("Serving", "request {request}, scheduler step {step}: {what}").format(
                              request=row, step=schedule.step, what=what) + "\n"
                          + translate("Serving", "the pass: {rows} rows of {n} requests, {ms} ms").format(
                              rows=schedule.tokens_in_pass, n=len(schedule.requests), ms=f"{schedule.forward_ms:.1f}"),
                          self)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self.update()  # its placeholder's words


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


class BlockGrid(QWidget):
    request_clicked = Signal(int)

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.serving: Serving | None = None
        self.cells = []
        self.setMouseTracking(True)
        self.setMinimumSize(140, 90)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self._drawn = None

    def sizeHint(self) -> QSize:
        return QSize(300, 180)

    def show_serving(self, serving: Serving) -> None:
        key = (id(serving), serving.shown_blocks, serving.selected, serving.started)
        self.serving = serving
        if key != self._drawn:
            self._drawn = key
            self.cells = serving.cells() if serving.active else []
            self.update()

    def _layout(self) -> tuple[int, float]:
        """(columns, cell side) that fit every block in the widget."""
        n = max(len(self.cells), 1)
        w, h = max(self.width() - 4, 10), max(self.height() - 4, 10)
        side = min(34.0 * self.appearance.scale, math.sqrt(w * h / n))
        while side > 4:
            cols = max(1, int(w // side))
            if math.ceil(n / cols) * side <= h:
                return cols, side
            side -= 1
        return max(1, int(w // 4)), 4.0

    def cell_rect(self, block: int) -> QRectF:
        cols, side = self._layout()
        return QRectF(2 + (block % cols) * side, 2 + (block // cols) * side, side, side)

    def block_at(self, x: float, y: float) -> int | None:
        cols, side = self._layout()
        col, row = int((x - 2) // side), int((y - 2) // side)
        block = row * cols + col
        return block if 0 <= col < cols and 0 <= block < len(self.cells) else None

    def paintEvent(self, event) -> None:
        painter = begin_paint(self, self.appearance, translate(
            "Serving", "The KV cache's block pool shows here while requests are served."), not self.cells)
        if painter is None:
            return
        t = self.appearance.theme
        b = self.serving.block_tokens
        selected = self.serving.selected
        _, side = self._layout()
        painter.setFont(self.appearance.font(0.75, bold=True))
        for cell in self.cells:
            rect = self.cell_rect(cell.block).adjusted(1, 1, -1, -1)
            if cell.free:
                painter.fillRect(rect, _colour(t.grid, 150))
                continue
            c = request_colour(min(cell.owners))
            painter.fillRect(rect, _colour(c, 60))  # the block's unused tail stays pale
            painter.fillRect(QRectF(rect.left(), rect.top(), rect.width() * cell.filled / b, rect.height()), QColor(c))
            if cell.refcount > 1:
                painter.setPen(QPen(QColor(t.text), max(2.0, side / 12)))
                painter.drawRect(rect.adjusted(1, 1, -1, -1))
                if side >= 14:
                    painter.setPen(QColor("#ffffff"))
                    painter.drawText(rect, Qt.AlignCenter, f"×{cell.refcount}")
            if selected is not None and selected in cell.owners:
                painter.setPen(QPen(QColor(t.selected), 2))
                painter.drawRect(rect.adjusted(-1, -1, 1, 1))
        painter.end()

    def mousePressEvent(self, event) -> None:
        block = self.block_at(event.position().x(), event.position().y())
        if block is not None and self.cells[block].owners:
            self.request_clicked.emit(min(self.cells[block].owners))

    def mouseMoveEvent(self, event) -> None:
        block = self.block_at(event.position().x(), event.position().y())
        if block is None:
            QToolTip.hideText()
            return
        cell = self.cells[block]
        b = self.serving.block_tokens
        if cell.free:
            text = translate("Serving", "block {block}: free").format(block=block)
        else:
            who = ", ".join(map(str, cell.owners))
            if cell.refcount > 1:
                text = translate("Serving", "block {block}: requests {who} (shared, {n} references)").format(
                    block=block, who=who, n=cell.refcount)
            else:
                text = translate("Serving", "block {block}: request {who}").format(block=block, who=who)
            text += "\n" + translate("Serving", "{filled} of {size} positions in use").format(filled=cell.filled, size=b)
            if cell.filled < b:
                text += translate("Serving", ", {n} unused").format(n=b - cell.filled)
        QToolTip.showText(event.globalPosition().toPoint(), text, self)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self.update()
