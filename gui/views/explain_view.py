"""Explain: what just happened, in plain words with the live numbers, in English or 简体中文.

It explains the shown step: the newest, the pending one, or a past one picked on the history slider (then
also that the later tokens came after it). A forced step says the user chose it; a branch switch says how
many tokens it re-read in one parallel pass.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from PySide6.QtWidgets import QTextBrowser, QVBoxLayout

from inference.events import Rewound

from ..controller import Controller
from ..theme import Appearance
from .base import View
from .format import display, fmt_bytes, fmt_count

TEXTS = json.loads((Path(__file__).resolve().parents[2] / "resources" / "translations" / "explain.json")
                   .read_text(encoding="utf-8"))
LANGUAGES = {"en": "English", "zh": "简体中文"}


class ExplainView(View):
    COSTLY = True  # takes turns with the other plot views during Run

    def __init__(self, controller: Controller, appearance: Appearance, language: str = "en"):
        super().__init__(controller, appearance)
        self.language = language
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.browser)
        self._html = ""
        self.refresh()

    def set_language(self, language: str) -> None:
        self.language = language
        self.refresh()

    def state_key(self) -> tuple[str, dict]:
        """Which text applies now and the numbers that go into it."""
        c = self.controller
        info = c.info
        if info is None:
            return "no_model", {}
        values = {"model": info.name, "params": fmt_count(info.n_params), "weights": fmt_bytes(info.weights_bytes),
                  "window": f"{info.context_length:,}", "per_token": fmt_bytes(info.kv_bytes_per_token)}
        if c.prefill_event is None:
            return "loaded", values
        p = c.prefill_event
        values.update(n_prompt=p.n_tokens, ms=f"{p.ms:.0f}", kv=fmt_bytes(p.kv_used_bytes), n=len(c.steps))
        past = self.past_step()
        if c.stopped is not None and past is None:
            return f"stopped_{c.stopped.reason}", values
        shown = c.shown()
        if shown is None or (shown.pending and not c.steps):
            return "prefilled", values
        last = c.history.log[-1] if c.history.log else None
        if shown.pending and isinstance(last, Rewound) and not last.reset and last.to_step == shown.index:
            zh = self.language == "zh"
            forward = ((f"一次 {last.forward_ms:.0f} 毫秒的前向传播：保存的 Logits 已被丢弃" if zh else
                        f"one forward pass of {last.forward_ms:.0f} ms: its kept logits had been dropped")
                       if last.forward_ms else ("没有前向传播" if zh else "no forward pass"))
            return "rewound", {**values, "index": shown.index, "positions": p.n_tokens + shown.index - 1,
                               "kv": fmt_bytes(last.kv_used_bytes), "forward": forward}
        if shown.pending:
            return "pending", {**values, "index": shown.index}
        s = shown.step
        cands = s.dist.candidates
        at = list(cands.ids).index(s.token.id)
        forced = s.forced
        values.update(index=s.index, token=html.escape(f"“{display(s.token.piece)}”"), rank=s.chosen_rank,
                      p=f"{cands.p_final[at]:.3f}" if s.random_u is not None else f"{cands.p_raw[at]:.3f}",
                      u="—" if s.random_u is None else f"{s.random_u:.4f}", kept=f"{s.dist.kept.n_kept:,}",
                      old=s.context_tokens - 1, kv=fmt_bytes(s.kv_used_bytes + info.kv_bytes_per_token))
        if forced:
            return "stepped_forced", values
        return ("stepped_greedy" if s.random_u is None else "stepped_sampled"), values

    def _notes(self, key: str, values: dict) -> str:
        """What comes after the main text: looking back at a past step, and the last branch switch."""
        notes = ""
        if key.startswith("stepped") and self.past_step() is not None:
            notes += TEXTS["past_note"][self.language].format(**values)
        reread = self.controller.history.reread
        if reread is not None and self.controller.prefill_event is not None:
            which = "reread" if reread.reread_tokens > 0 else "reread_held"
            notes += TEXTS[which][self.language].format(reread=reread.reread_tokens, reread_ms=f"{reread.ms:.0f}")
        return notes

    def refresh(self) -> None:
        key, values = self.state_key()
        info = self.controller.info
        values.update(muted=self.appearance.theme.muted,
                      fingerprint=info.weights_fingerprint if info else "")
        body = TEXTS[key][self.language].format(**values) + self._notes(key, values)
        if info is not None:
            body += TEXTS["footer"][self.language].format(**values)
        if body != self._html:
            self._html = body
            self.browser.setHtml(body)
