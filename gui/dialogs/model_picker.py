"""Model → Open…: the models the user already has (inference.store.catalog), with what each would cost in memory.

A table of the catalog (name, family, parameters, context, size, supported, where), filtered as one types;
models TokenStep cannot load are greyed, their reason in a tooltip and under the table. For the selected
row the weights' memory at the chosen data type stands next to free RAM, and Open is disabled, with the
reason shown, for a model that is unsupported or would not fit. Opening goes through ModelLoader (its
progress dialog, its error message); the loader records the model in the recents once it has loaded.
The catalog is scanned in a QThread, so a slow disk never freezes the window.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSortFilterProxyModel, Qt, QThread, Signal, Slot
from PySide6.QtGui import QPalette, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QTableView, QVBoxLayout, QWidget)

from inference.store import catalog, memory, model_settings
from inference.messages import Message
from inference.store.catalog import Entry

from gui.state.engine_words import word
from gui.state.format import fmt_bytes, fmt_count
from gui.state.i18n import QT_TRANSLATE_NOOP, number, translate

COLUMNS = (QT_TRANSLATE_NOOP("Picker", "Name"), QT_TRANSLATE_NOOP("Picker", "Family"),
           QT_TRANSLATE_NOOP("Picker", "Parameters"), QT_TRANSLATE_NOOP("Picker", "Context"),
           QT_TRANSLATE_NOOP("Picker", "Size"), QT_TRANSLATE_NOOP("Picker", "Supported"),
           QT_TRANSLATE_NOOP("Picker", "Where"))
NUMBER_COLUMNS = (2, 3, 4)  # right-aligned
SUPPORTED_COLUMN = 5
SORT_ROLE = Qt.UserRole + 1  # numbers sort as numbers
ENTRY_ROLE = Qt.UserRole + 2


class _Scan(QObject):
    """The catalog scan, run in its own thread; any error becomes the result (shown as one line)."""

    done = Signal(object)  # list[Entry] or an Exception

    @Slot()
    def run(self) -> None:
        try:
            result = catalog.scan(model_settings.ModelSettings.load())
        except Exception as e:  # noqa: BLE001 - a scan bug must not leave the dialog waiting forever
            result = e
        self.done.emit(result)


class ModelPicker(QDialog):
    def __init__(self, parent: QWidget, loader):
        super().__init__(parent)
        self.loader = loader  # gui.dialogs.model_loader.ModelLoader: what opening a model goes through
        self.resize(980, 520)
        self.entries: list[Entry] = []
        self._thread: QThread | None = None
        self._scan: _Scan | None = None
        self._build()
        self.retranslate()
        self.rescan()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:  # an open dialog follows View → Language too
            self.retranslate()

    def retranslate(self) -> None:
        self.setWindowTitle(translate("Picker", "Open a model"))
        self.filter.setPlaceholderText(translate("Picker", "Filter by name, family or where it is…"))
        self.model.setHorizontalHeaderLabels([translate("Picker", column) for column in COLUMNS])
        self.add_folder_button.setText(translate("Picker", "Add folder…"))
        self.add_folder_button.setToolTip(translate("Picker", "A folder of .gguf files or model folders to list from now on"))
        self.open_file_button.setText(translate("Picker", "Open file…"))
        self.open_file_button.setToolTip(translate("Picker", "A .gguf file, or the config.json of a Hugging Face model "
                                                   "folder"))
        self.buttons.button(QDialogButtonBox.Open).setText(translate("Picker", "Open"))
        self.buttons.button(QDialogButtonBox.Cancel).setText(translate("Picker", "Cancel"))
        if self.entries:
            self.set_entries(self.entries, self.selected())
        elif self.scanning:
            self.status.setText(translate("Picker", "Looking for models…"))

    # --- layout -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.filter = QLineEdit()
        self.filter.setClearButtonEnabled(True)
        self.model = QStandardItemModel(0, len(COLUMNS), self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterCaseSensitivity(Qt.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setSortRole(SORT_ROLE)
        self.filter.textChanged.connect(self._filter_changed)
        self.table = QTableView(selectionBehavior=QAbstractItemView.SelectRows,
                                selectionMode=QAbstractItemView.SingleSelection,
                                editTriggers=QAbstractItemView.NoEditTriggers)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSortIndicator(-1, Qt.AscendingOrder)  # the catalog's own order until a click: recent first
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.Stretch)
        header.setSectionResizeMode(SUPPORTED_COLUMN, QHeaderView.Interactive)
        header.resizeSection(SUPPORTED_COLUMN, 230)
        self.table.setTextElideMode(Qt.ElideRight)
        self.table.setWordWrap(False)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selected_changed())
        self.table.doubleClicked.connect(lambda *_: self.open_selected())
        self.memory_label = QLabel(wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        self.reason_label = QLabel(wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        self.status = QLabel()
        # clicked(bool) would arrive as the path: the buttons ask for one
        add_folder = QPushButton(clicked=lambda: self.add_folder())
        open_file = QPushButton(clicked=lambda: self.open_file())
        self.buttons = QDialogButtonBox(QDialogButtonBox.Open | QDialogButtonBox.Cancel)
        self.open_button = self.buttons.button(QDialogButtonBox.Open)
        self.open_button.setEnabled(False)
        self.buttons.accepted.connect(self.open_selected)
        self.buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        self.add_folder_button, self.open_file_button = add_folder, open_file
        for widget in (add_folder, open_file):
            row.addWidget(widget)
        row.addStretch(1)
        row.addWidget(self.buttons)
        layout = QVBoxLayout(self)
        layout.addWidget(self.filter)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status)
        layout.addWidget(self.memory_label)
        layout.addWidget(self.reason_label)
        layout.addLayout(row)

    # --- scanning ---------------------------------------------------------------------------------------
    def rescan(self) -> None:
        if self._thread is not None:
            return  # one at a time; the running one reads the same settings
        self.status.setText(translate("Picker", "Looking for models…"))
        self._thread, self._scan = QThread(self), _Scan()
        self._scan.moveToThread(self._thread)
        self._thread.started.connect(self._scan.run)
        self._scan.done.connect(self._scanned)
        self._thread.start()

    @property
    def scanning(self) -> bool:
        return self._thread is not None

    def _scanned(self, result) -> None:
        self._stop_thread()
        if isinstance(result, Exception):
            first_line = str(result).splitlines()[0] if str(result) else type(result).__name__
            self.status.setText(translate("Picker", "Could not list the models: {error}").format(error=first_line))
            return
        self.set_entries(result)

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
            self._scan.deleteLater()
            self._thread.deleteLater()
            self._thread = self._scan = None

    def set_entries(self, entries: list[Entry], select: Entry | None = None) -> None:
        self.entries = list(entries)
        self.model.removeRows(0, self.model.rowCount())
        for entry in self.entries:
            self.model.appendRow(_row(entry, self.palette()))
        supported, found = sum(e.supported for e in self.entries), len(self.entries)
        self.status.setText(translate("Picker", "%n model(s) found, {supported} TokenStep can open. Hub cache: {cache}",
                                      None, found).format(supported=supported, cache=catalog.hub_cache_dir()))
        wanted = select or next((e for e in self.entries if e.supported), None)
        if wanted is not None:
            self.select(wanted.spec)
        self._selected_changed()

    def select(self, spec: str) -> bool:
        for source_row in range(self.model.rowCount()):
            if self.model.item(source_row, 0).data(ENTRY_ROLE).spec == spec:
                index = self.proxy.mapFromSource(self.model.index(source_row, 0))
                if index.isValid():
                    self.table.selectRow(index.row())
                    self.table.setCurrentIndex(index)
                    return True
        return False

    def _filter_changed(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        if self.selected() is None and self.proxy.rowCount():
            self.table.selectRow(0)
            self.table.setCurrentIndex(self.proxy.index(0, 0))
        self._selected_changed()

    # --- the selected model -----------------------------------------------------------------------------
    def selected(self) -> Entry | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].data(ENTRY_ROLE) if rows else None

    def _dtype(self) -> tuple[str, bool]:
        """The data type a load would use, and whether it runs on CPU (where free RAM is what counts)."""
        device = self.loader.device
        on_cuda = device == "cuda" or (device == "auto" and bool(self.loader.controller.cuda_available))
        return memory.resolve_dtype(self.loader.dtype, on_cuda), not on_cuda

    def why_not(self, entry: Entry | None) -> str:
        """Why Open is disabled for `entry` ("" when it can be opened), and the memory line under the table."""
        if entry is None:
            self.memory_label.setText("")
            return translate("Picker", "Choose a model.")
        dtype, on_cpu = self._dtype()
        estimate = memory.estimate(entry, dtype, memory.mem_available())
        if estimate is None:
            self.memory_label.setText(translate("Picker", "Memory: not known until the model is read")
                                      if entry.supported else "")
        else:
            summary = estimate.summary()
            where = "" if on_cpu else translate("Picker", " (loads on CUDA)")
            self.memory_label.setText(translate("Picker", "Memory: {estimate}").format(
                estimate=word(summary, str(summary))) + where)
        if not entry.supported:
            return translate("Picker", "TokenStep cannot open {model}: {reason}").format(model=entry.name,
                                                                                        reason=_reason(entry))
        if estimate is not None and on_cpu and not estimate.fits:
            refusal = estimate.refusal()
            return word(refusal, str(refusal))
        return ""

    def _selected_changed(self) -> None:
        reason = self.why_not(self.selected())
        self.open_button.setEnabled(not reason)
        self.open_button.setToolTip(reason or translate("Picker", "Load this model"))
        self.reason_label.setText(f"<span style='color:#b00020'>{_html(reason)}</span>" if reason
                                  and self.selected() is not None else "")

    # --- actions ----------------------------------------------------------------------------------------
    def open_selected(self) -> bool:
        entry = self.selected()
        if entry is None or self.why_not(entry):
            self._selected_changed()
            return False
        self.accept()
        self.loader.load(entry.spec)
        return True

    def open_file(self, path: str | None = None) -> bool:
        """Choose a .gguf or a folder's config.json; it is added to the list and opened if it can be."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, translate("Picker", "Open a model file"), str(Path.home()),
                                                  translate("Picker", "Models (*.gguf config.json);;All files (*)"))
            if not path:
                return False
        target = Path(path)
        spec = str(target.parent) if target.name == "config.json" else str(target)
        entry = catalog.describe(spec)
        known = [e for e in self.entries if e.spec != entry.spec]
        self.set_entries([entry, *known], select=entry)
        return self.open_selected()

    def add_folder(self, folder: str | None = None) -> None:
        if folder is None:
            folder = QFileDialog.getExistingDirectory(self, translate("Picker", "Add a folder of models"), str(Path.home()))
            if not folder:
                return
        try:
            model_settings.add_folder(folder)
        except OSError as e:
            self.status.setText(translate("Picker", "Could not remember the folder: {error}").format(error=e.strerror or e))
            return
        self.rescan()

    def done(self, result: int) -> None:
        self._stop_thread()
        super().done(result)


def _reason(entry: Entry, short: bool = False) -> str:
    """Why TokenStep cannot open `entry`, in the app's language; `short`: without the list of what it supports
    ("unsupported architecture 'X'" without "(supported: ...)"), for the table's column."""
    said = entry.said
    if short and said is not None and isinstance(said.values.get("supported"), Message):
        said = Message(said.code, {**said.values, "supported": ""})
    return word(said, entry.reason.split(" (supported:")[0] if short else entry.reason)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _row(entry: Entry, palette: QPalette) -> list[QStandardItem]:
    cells = [
        (entry.name, entry.name.lower()),
        (entry.family or "?", entry.family or ""),
        (fmt_count(entry.n_params) if entry.n_params else "?", entry.n_params or 0),
        (number(entry.context_length) if entry.context_length else "?", entry.context_length or 0),
        (fmt_bytes(entry.size_bytes) if entry.size_bytes is not None else "?", entry.size_bytes or 0),
        (translate("Picker", "yes") if entry.supported else
         translate("Picker", "no: {reason}").format(reason=_reason(entry, short=True)), int(entry.supported)),
        (entry.source + (" · " + translate("Picker", "recent") if entry.recent_at and entry.source != "recent" else ""),
         entry.source),
    ]
    tip = f"{entry.path}\n" + (translate("Picker", "TokenStep can open it") if entry.supported else
                               translate("Picker", "Not supported: {reason}").format(reason=_reason(entry)))
    grey = palette.color(QPalette.Disabled, QPalette.Text)
    items = []
    for column, (text, key) in enumerate(cells):
        item = QStandardItem(text)
        item.setData(key, SORT_ROLE)
        item.setToolTip(tip)
        if not entry.supported:
            item.setForeground(grey)
        if column in NUMBER_COLUMNS:
            item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
        items.append(item)
    items[0].setData(entry, ENTRY_ROLE)
    return items
