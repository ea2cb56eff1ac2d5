"""Controls: the prompt, the sampler settings, the seed, the limits, and the step / run buttons."""

from __future__ import annotations

import random

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPlainTextEdit, QPushButton, QSizePolicy, QSlider, QSpinBox, QToolButton,
                               QVBoxLayout, QWidget)

from inference.settings import GenerationSettings, SamplerSettings

from gui.state.i18n import translate
from gui.state.intents import Intents
from gui.widgets import no_wheel
from gui.widgets.wrap_label import line_spacing

DEFAULT_PROMPT = "The capital of France is"


class SliderSpin(QWidget):
    """A slider and a spin box showing one number; either one edits it."""

    valueChanged = Signal(float)

    def __init__(self, minimum: float, maximum: float, step: float, decimals: int):
        super().__init__()
        self._scale = 1 / step
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(round(minimum * self._scale), round(maximum * self._scale))
        if decimals:
            self.spin = QDoubleSpinBox()
            self.spin.setRange(minimum, maximum)
            self.spin.setDecimals(decimals)
            self.spin.setSingleStep(step)
        else:
            self.spin = QSpinBox()
            self.spin.setRange(int(minimum), int(maximum))
        self.spin.setMinimumWidth(78)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)
        self.slider.valueChanged.connect(lambda v: self.spin.setValue(v / self._scale))
        self.spin.valueChanged.connect(self._from_spin)

    def set_words(self, tooltip: str, special: str = "") -> None:
        """Its tooltip, and the word its minimum shows ("off"), in the app's language."""
        self.spin.setSpecialValueText(special)
        for w in (self.slider, self.spin):
            w.setToolTip(tooltip)

    def _from_spin(self, value) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(round(value * self._scale))
        self.slider.blockSignals(False)
        self.valueChanged.emit(float(value))

    def value(self) -> float:
        return float(self.spin.value())

    def setValue(self, value: float) -> None:
        self.spin.setValue(value)


class Controls(QWidget):
    """The request and the settings the user edits; its notes say how they relate to what the controller ran
    (is this prompt the one in the context, which seed produced these tokens)."""

    settings_changed = Signal(object)  # GenerationSettings
    request_edited = Signal()  # the prompt, chat mode or system prompt was edited

    def __init__(self, actions: dict, intents: Intents):
        super().__init__()
        self.intents = intents
        self._quiet = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self._prompt_box())
        layout.addLayout(self._buttons(actions))
        layout.addLayout(self._pace_row())
        layout.addWidget(self._sampling_box())
        layout.addWidget(self._seed_box())
        layout.addStretch(1)
        for w in (self.temperature, self.top_k, self.top_p, self.min_p):
            w.valueChanged.connect(self._changed)
        self.greedy.toggled.connect(self._changed)
        self.seed.valueChanged.connect(self._changed)
        self.max_new.valueChanged.connect(self._changed)
        self.speculate.valueChanged.connect(self._changed)
        self.context_limit.valueChanged.connect(self._changed)
        self.when_full.currentIndexChanged.connect(self._changed)
        self.stops.textChanged.connect(self._changed)
        for edited in (self.prompt.textChanged, self.chat.toggled, self.system.textChanged):
            edited.connect(self.request_edited)
        self.request_edited.connect(self._show_notes)
        self.seed.valueChanged.connect(self._show_notes)
        intents.state_changed.connect(self._show_notes)
        intents.model_changed.connect(self._take_model_defaults)
        self.apply_sampler(SamplerSettings())
        self.retranslate()
        no_wheel.guard(self)  # the wheel scrolls the panel; a slider takes it only once focused

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self.retranslate()

    def retranslate(self) -> None:
        """Every label, placeholder and tooltip in the app's language (at start and at each language change)."""
        self.prompt_box.setTitle(translate("Controls", "Prompt"))
        self.prompt.setPlaceholderText(translate("Controls", "Type a prompt, then Prefill (Ctrl+P)"))
        self.chat.setText(translate("Controls", "Chat mode (chat template)"))  # short: the column fits a 1024 px window
        self.chat.setToolTip(translate("Controls", "Wrap the prompt as a user message with the model's chat "
                                       "template; the context then shows its special tokens"))
        self.system.setPlaceholderText(translate("Controls", "System prompt (optional; the template may add its own)"))
        for i in range(self.pace.count()):
            self.pace.setItemText(i, self._pace_text(self.pace.itemData(i)))
        self.pace.setToolTip(translate("Controls", "How fast Run shows its steps: paced, every view shows each "
                                       "step in turn (for a class or a recording); P toggles"))
        self.pace_label.setText(translate("Controls", "Run pace"))
        self.sampling_box.setTitle(translate("Controls", "Sampling (applies to the next draw)"))
        self.greedy.setText(translate("Controls", "Greedy: always take the top token"))
        self.greedy.setToolTip(translate("Controls", "Argmax, no random draw; the result is deterministic "
                                         "(temperature 0 means the same)"))
        off = translate("Controls", "off", "a setting that is switched off")
        self.temperature.set_words(translate("Controls", "Divide the logits by T before softmax: T < 1 sharpens, "
                                             "T > 1 flattens; 0 = greedy"))
        self.top_k.set_words(translate("Controls", "Keep only the K most likely tokens (0 = off)"), off)
        self.top_p.set_words(translate("Controls", "Keep the smallest set of top tokens whose mass reaches p "
                                       "(1 = off)"))
        self.min_p.set_words(translate("Controls", "Drop tokens below min_p × the top probability (0 = off)"), off)
        words = {"temperature": translate("Controls", "Temperature"), "top_k": "Top-k", "top_p": "Top-p",
                 "min_p": "Min-p", "seed": translate("Controls", "Seed"),
                 "max_new": translate("Controls", "Max new tokens"), "stops": translate("Controls", "Stop strings"),
                 "speculate": translate("Controls", "Speculate"), "context_limit": translate("Controls", "Context limit")}
        for key, text in words.items():
            self.form_labels[key].setText(text)
        self.seed_box.setTitle(translate("Controls", "Seed and limits"))
        self.seed.setToolTip(translate("Controls", "Seed of the random generator used by the draw; takes effect at "
                                       "the next Reset or Prefill: the same seed and settings give the same tokens"))
        self.dice.setToolTip(translate("Controls", "A new random seed (Ctrl+D)"))
        self.max_new.setToolTip(translate("Controls", "Stop after this many new tokens"))
        self.stops.setPlaceholderText(translate("Controls", "e.g.  .  |  \\n\\n   (separate with |, \\n = new line)"))
        self.stops.setToolTip(translate("Controls", "Stop when the generated text contains one of these strings; "
                                        "the match itself is not part of the answer"))
        self.context_limit.setSpecialValueText(translate("Controls", "model's", "the model's own context window"))
        self.context_limit.setToolTip(translate(
            "Controls", "Run in a context window of this many tokens (prompt + generated), e.g. 64, to see what "
            "happens when it is full; 0 = the model's own window. Applies to the next Prefill and to the next steps"))
        self.when_full.setItemText(0, translate("Controls", "stop", "when the context window is full: stop"))
        self.when_full.setItemText(1, translate("Controls", "drop oldest"))
        self.when_full.setToolTip(translate(
            "Controls", "When the window is full: stop (context_full), or drop the oldest half of the tokens after "
            "the first and re-read the rest in ONE prefill pass, as inference servers do (a context shift; the "
            "dropped tokens stay greyed in the Context). Speculation is off while this is chosen"))
        self.speculate.setSpecialValueText(off)
        self.speculate.setToolTip(translate(
            "Controls", "Speculative decoding by prompt lookup: the last 3 (else 2, else 1) tokens of the context "
            "are searched for earlier in the context, and up to N tokens that followed them there are the draft.\n"
            "ONE forward pass then reads the whole draft, as a prefill reads a prompt, and each step draws from its "
            "own position's distribution with its usual random number: a draft token is kept while the draw picks "
            "it.\nSo the tokens are exactly those without speculation, in fewer forward passes when the text "
            "repeats itself (0 = off)"))
        self._show_notes()

    def heightForWidth(self, width: int) -> int:
        """The least height at this width. The panel sits in a resizable scroll area, which sizes a widget with
        word-wrapped labels to its height for the viewport's width; the preferred one (the prompt box at
        QPlainTextEdit's ~190 px) sized the panel past its dock after a run's first layout change: the box grew,
        the panel scrolled and everything below moved at the end of each run. The box still takes any room the
        dock has (it expands)."""
        layout = self.layout()
        return layout.totalMinimumHeightForWidth(width) if layout is not None else super().heightForWidth(width)

    def _prompt_box(self) -> QGroupBox:
        self.prompt_box = box = QGroupBox()
        self.prompt = QPlainTextEdit(DEFAULT_PROMPT)
        self.prompt.setTabChangesFocus(True)
        self.prompt.setMinimumHeight(70)
        self.chat = QCheckBox()
        self.system = QLineEdit()
        self.system.setEnabled(False)
        self.chat.toggled.connect(self.system.setEnabled)
        self.prompt_state = HintLabel()
        layout = QVBoxLayout(box)
        for w in (self.prompt, self.chat, self.system, self.prompt_state):
            layout.addWidget(w)
        return box

    @staticmethod
    def _buttons(actions: dict) -> QHBoxLayout:
        buttons = QHBoxLayout()
        for name in ("prefill", "step", "run", "reset"):
            b = QToolButton()
            b.setDefaultAction(actions[name])
            b.setToolButtonStyle(Qt.ToolButtonTextOnly)
            b.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
            b.setObjectName("primary" if name == "prefill" else name)
            buttons.addWidget(b)
        return buttons

    def _pace_row(self) -> QHBoxLayout:
        """Run's pace: as fast as possible, or N tokens a second with every view at the same step (P)."""
        row = QHBoxLayout()
        self.pace = QComboBox()
        pacer = self.intents.pacer
        for pace in pacer.paces:
            self.pace.addItem(self._pace_text(pace), pace)
        self.pace.currentIndexChanged.connect(lambda i: pacer.set_pace(self.pace.itemData(i)))
        pacer.pace_changed.connect(self._show_pace)
        self.pace_label = QLabel()
        row.addWidget(self.pace_label)
        row.addWidget(self.pace, 1)
        return row

    @staticmethod
    def _pace_text(pace: float) -> str:
        if not pace:
            return translate("Controls", "as fast as possible")
        if pace == int(pace):
            count = int(pace)  # a plain name: lupdate drops a translate() whose n is an expression
            return translate("Controls", "%n token(s)/s", None, count)
        return translate("Controls", "{pace} tokens/s").format(pace=f"{pace:g}")

    def _show_pace(self, pace: float) -> None:
        i = self.pace.findData(pace)
        if i < 0:
            self.pace.addItem(self._pace_text(pace), pace)
            i = self.pace.count() - 1
        if i != self.pace.currentIndex():
            self.pace.setCurrentIndex(i)

    def _sampling_box(self) -> QGroupBox:
        self.sampling_box = box = QGroupBox()
        form = _form(box)
        self.greedy = QCheckBox()
        self.temperature = SliderSpin(0.0, 2.5, 0.01, 2)
        self.top_k = SliderSpin(0, 200, 1, 0)
        self.top_p = SliderSpin(0.01, 1.0, 0.01, 2)
        self.min_p = SliderSpin(0.0, 1.0, 0.01, 2)
        form.addRow(self.greedy)
        self.form_labels = {}  # the forms' labels, worded by retranslate()
        for key in ("temperature", "top_k", "top_p", "min_p"):
            self.form_labels[key] = QLabel()
            form.addRow(self.form_labels[key], getattr(self, key))
        return box

    def _seed_box(self) -> QGroupBox:
        self.seed_box = box = QGroupBox()
        form = _form(box)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.dice = dice = QPushButton("⚄")
        dice.clicked.connect(self.roll_seed)
        dice.setFixedWidth(40)
        seed_row = QHBoxLayout()
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(dice)
        self.max_new = QSpinBox()
        self.max_new.setRange(1, 100_000)
        self.max_new.setValue(64)
        self.stops = QLineEdit()
        self.seed_state = _note()
        fields = {"seed": seed_row, "max_new": self.max_new, "stops": self.stops, "speculate": self._speculate_box(),
                  "context_limit": self._context_limit_row()}
        for key, field in fields.items():  # the labels are worded by retranslate()
            self.form_labels[key] = QLabel()
            form.addRow(self.form_labels[key], field)
            if key == "seed":
                form.addRow(self.seed_state)
        return box

    def _context_limit_row(self) -> QHBoxLayout:
        """A context window smaller than the model's, on purpose, and what a full one does."""
        self.context_limit = QSpinBox()
        self.context_limit.setRange(0, 1_000_000)
        self.context_limit.setSingleStep(16)  # 0 = the model's own window
        self.when_full = QComboBox()
        self.when_full.addItem("stop", "stop")
        self.when_full.addItem("drop oldest", "drop-oldest")
        row = QHBoxLayout()
        row.addWidget(self.context_limit, 1)
        row.addWidget(self.when_full, 1)
        return row

    def _speculate_box(self) -> QSpinBox:
        self.speculate = QSpinBox()
        self.speculate.setRange(0, 8)
        return self.speculate

    def roll_seed(self) -> None:
        self.seed.setValue(random.randrange(0, 2**31 - 1))

    def apply_sampler(self, s: SamplerSettings) -> None:
        """Show a model's default sampler settings without emitting one change per widget."""
        self._quiet = True
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k)
        self.top_p.setValue(s.top_p)
        self.min_p.setValue(s.min_p)
        self.greedy.setChecked(s.greedy)
        self._quiet = False
        self._changed()

    def stop_strings(self) -> tuple[str, ...]:
        parts = [p.strip(" ").replace("\\n", "\n").replace("\\t", "\t") for p in self.stops.text().split("|")]
        return tuple(p for p in parts if p)

    def settings(self) -> GenerationSettings:
        sampler = SamplerSettings(temperature=self.temperature.value(), top_k=int(self.top_k.value()),
                                  top_p=self.top_p.value(), min_p=self.min_p.value(),
                                  greedy=self.greedy.isChecked())
        return GenerationSettings(sampler=sampler, max_new_tokens=self.max_new.value(),
                                  stop_strings=self.stop_strings(), seed=self.seed.value(),
                                  speculate=0 if self._drops() else self.speculate.value(),
                                  context_limit=max(self.context_limit.value(), 4) if self.context_limit.value() else 0,
                                  when_full=self.when_full.currentData())

    def _drops(self) -> bool:
        return self.when_full.currentData() == "drop-oldest"

    def _changed(self, *_) -> None:
        greedy = self.greedy.isChecked() or self.temperature.value() == 0
        for w in (self.top_k, self.top_p, self.min_p):
            w.setEnabled(not greedy)
        self.temperature.setEnabled(not self.greedy.isChecked())
        self.speculate.setEnabled(not self._drops())
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def prompt_request(self) -> tuple[str, bool, str]:
        return self.prompt.toPlainText(), self.chat.isChecked(), self.system.text()

    def _take_model_defaults(self) -> None:
        info = self.intents.info
        if info is None:
            return
        self.apply_sampler(info.sampler_defaults)
        self.max_new.setMaximum(info.context_length)
        self.context_limit.setMaximum(info.context_length)

    def _show_notes(self, *_) -> None:
        c = self.intents
        changed = c.prefilled_prompt is not None and c.prefilled_prompt != self.prompt_request()
        _set_text(self.prompt_state,
                  translate("Controls", "No model is loaded: open one with Model → Open… (Ctrl+O).")
                  if c.info is None and not c.loading else
                  translate("Controls", "The prompt changed since it was read: Prefill (Ctrl+P) to read the new one.")
                  if changed else
                  "" if c.prefilled_prompt is None else
                  translate("Controls", "Reading this prompt…") if c.prefilling and not c.prefilled else
                  translate("Controls", "This prompt is in the context."))
        seed_ran = c.steps[-1].seed if c.steps else None
        next_seed = self.seed.value()
        if seed_ran is not None and seed_ran != next_seed:
            seed_text = translate("Controls", "Seed {ran} ran; the next Reset or Prefill uses {next}.").format(
                ran=seed_ran, next=next_seed)
        elif seed_ran is not None:
            seed_text = translate("Controls", "Seed {ran} ran: Reset repeats these tokens.").format(ran=seed_ran)
        else:
            seed_text = ""
        _set_text(self.seed_state, seed_text)


class HintLabel(QLabel):
    """A muted note of at most LINES lines that always keeps their height: a hint that appears, changes or
    wraps never moves the fields above it (the system prompt under the mouse). Longer text is cut at the
    last line; its tooltip holds all of it."""

    LINES = 2

    def __init__(self):
        super().__init__()
        self.setObjectName("muted")
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)

    def _height(self) -> int:
        margins = self.contentsMargins()
        return self.LINES * line_spacing(self) + margins.top() + margins.bottom() + 2 * self.margin()

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.LanguageChange:
            self.updateGeometry()  # Chinese lines are taller
        super().changeEvent(event)

    def hasHeightForWidth(self) -> bool:
        return False

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self._height())

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self._height())

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)


def _form(box: QGroupBox) -> QFormLayout:
    """A form whose fields go under their labels where the column is too narrow for both side by side
    (1024 px windows, presentation type): the panel never needs a sideways scroll bar."""
    form = QFormLayout(box)
    form.setRowWrapPolicy(QFormLayout.WrapLongRows)
    return form


def _note() -> QLabel:
    label = QLabel()
    label.setObjectName("muted")
    label.setWordWrap(True)
    return label


def _set_text(label: QLabel, text: str) -> None:
    if label.text() != text:  # state_changed comes at every step; only a new text needs the label redone
        label.setText(text)
