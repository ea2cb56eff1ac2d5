"""Explain: what just happened, in plain words with the live numbers, in English or 简体中文.

Before a prompt it says how to start; while a prompt is read, only that (nothing of the previous run). It
explains the shown step: the newest, the pending one, or a past one picked on the history slider (then
also that the later tokens came after it). A forced step says the user chose it; a branch switch says how
many tokens it re-read in one parallel pass; a step without the KV cache, that it re-read every position. A
step decided by a speculative verify pass says why one pass could check several drafted tokens and why the
output is the same as without speculation.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout

from inference.events import STOCK_DECODE, Rewound
from inference.settings import PREFILL_CHUNK

from gui.state.i18n import translate
from gui.state.intents import Intents
from gui.state.speculation import pass_of
from gui.state.timing_data import median_cached_ms, verify_cost
from gui.theme import Appearance
from gui.views.base import View
from gui.state.format import agree, display, fmt_bytes, fmt_count, quoted, rank_text
from gui.views.explain_texts import TEXTS
from gui.widgets.candidate_labels import is_open


def text(key: str) -> str:
    """The text for this state in the app's language (the catalogue's English source, translated)."""
    return translate("Explain", TEXTS[key])


class ExplainView(View):
    COSTLY = True  # a plot: several ms per redraw

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.browser)
        self._html = ""
        # Without a model no redraw comes: a failed load must not leave "Loading the model…" up
        intents.state_changed.connect(lambda: self._on_redraw() if self.intents.info is None else None)
        self.refresh()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:  # the app's language changed: the same state, in its words
            self.refresh()

    def state_key(self) -> tuple[str, dict]:
        """Which text applies now and the numbers that go into it."""
        c = self.intents
        info = c.info
        if info is None:
            return ("no_model" if c.loading else "not_loaded"), {}
        remote = info.dtype == "remote"  # a server says neither its parameter count (vLLM) nor its weights' bytes
        values = {"model": info.name, "params": fmt_count(info.n_params) if info.n_params > 0 else "?",
                  "weights": translate("Explain", "on the server") if remote
                  else fmt_bytes(info.weights_bytes),
                  "window": f"{info.context_length:,}", "per_token": fmt_bytes(info.kv_bytes_per_token)}
        if c.prefill_event is None and c.serving.active and not c.prefilling:  # many requests, none shown
            return "serving", {**values, **self._serving_values()}
        if c.prefill_event is None:  # a prompt being read (the last run's report is gone), or none yet
            return ("prefilling" if c.prefilling else "loaded"), {**values, "chunk": PREFILL_CHUNK}
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
            forward = (translate("Explain", "one forward pass of {ms} ms: its kept logits had been dropped")
                       .format(ms=f"{last.forward_ms:.0f}") if last.forward_ms
                       else translate("Explain", "no forward pass"))
            return "rewound", {**values, "index": shown.index, "positions": p.n_tokens + shown.index - 1,
                               "kv": fmt_bytes(last.kv_used_bytes), "forward": forward}
        if shown.pending:
            return "pending", {**values, "index": shown.index}
        s = shown.step
        cands = s.dist.candidates
        at = list(cands.ids).index(s.token.id)
        forced = s.forced
        values.update(index=s.index, token=html.escape(quoted(s.token.piece)), rank=rank_text(s.chosen_rank),
                      p=f"{cands.p_final[at]:.3f}" if s.random_u is not None else f"{cands.p_raw[at]:.3f}",
                      u="—" if s.random_u is None else f"{s.random_u:.4f}", kept=f"{s.dist.kept.n_kept:,}",
                      old=s.context_tokens - 1, kv=fmt_bytes(s.kv_used_bytes + info.kv_bytes_per_token))
        if forced:
            return "stepped_forced", values
        return ("stepped_greedy" if s.random_u is None else "stepped_sampled"), values

    def _serving_values(self) -> dict:
        """The live numbers of a serve (gui/state/serving.py) its texts use."""
        s = self.intents.serving
        return {"n_requests": len(s.tracks), "steps": s.n_steps, "tokens": s.n_generated,
                "ms": f"{s.total_ms:,.0f}", "tps": f"{s.tokens_per_s:,.1f}", "block": s.block_tokens,
                "used": s.blocks_used, "pool": s.n_blocks, "shared": s.blocks_shared, "unused": s.fragmentation(),
                "context": s.context_length(), "largest": s.largest_batch(),
                "budget": s.started.token_budget}

    def _serving_request_note(self) -> str:
        """Which served request the views show, and what serving it with the others meant for it."""
        s = self.intents.serving
        track = s.track(self.intents.showing_request)
        if track is None:
            return ""
        report = s.shown_blocks
        blocks = len(report.per_request.get(track.index, ())) if report is not None else 0
        shared = track.done.shared_tokens if track.done is not None else 0
        chunks = sum(1 for ph in track.phases if ph == "prefill")
        ttft, tpot = s.ttft_ms(track), s.tpot_ms(track)
        values = {"request": track.index, "n_requests": len(s.tracks), "arrived": track.arrive_at_step,
                  "prompt": track.prompt_tokens, "chunks": chunks, "chunks_s": "" if chunks == 1 else "es",
                  "ttft": "…" if ttft is None else f"{ttft:,.0f}", "tpot": "…" if tpot is None else f"{tpot:,.1f}",
                  "blocks": blocks, "blocks_s": "" if blocks == 1 else "s", "block": s.block_tokens,
                  "shared_part": text("serving_shared_part").format(shared=shared) if shared else ""}
        return text("serving_request_note").format(**values)

    def _notes(self, key: str, values: dict) -> str:
        """What comes after the main text: looking back at a past step, and the last branch switch."""
        notes = self._serving_request_note()
        # a served request's past steps are looked back at, never forked (its own note says whose they are)
        if key.startswith("stepped") and self.past_step() is not None and self.intents.showing_request is None:
            notes += text("past_note").format(**values)
        shown = self.intents.shown()
        step = shown.step if key.startswith("stepped") and shown is not None else None
        if step is not None and step.dist.server is not None:  # a server's cache: what it said, not our bytes
            notes += self._server_cache_note(step) + self._server_note(step)
        elif step is not None and step.index > 1 and step.kv_used_bytes == 0 and not step.verified_by:
            notes += text("cache_off_note").format(old=step.context_tokens - 1,
                                                                    forward_ms=f"{step.forward_ms:.0f}")
        reread = self.intents.history.reread
        if reread is not None and self.intents.prefill_event is not None:
            which = "reread" if reread.reread_tokens > 0 else "reread_held"
            notes += text(which).format(reread=reread.reread_tokens, reread_ms=f"{reread.ms:.0f}")
        return notes

    def _server_cache_note(self, step) -> str:
        """How much of the context the server took from its prefix cache for this step; none at all is the "cache
        off" lesson on a real server (contexts below one cache block, or prefix caching off)."""
        note = step.dist.server
        old = step.context_tokens - 1  # the context that produced this step's distribution
        if note.cached_tokens is None:
            return text("server_cache_unknown").format(old=f"{old:,}")
        ms = "" if note.server_ms is None else \
            translate("Explain", " ({ms} ms on the server)").format(ms=f"{note.server_ms:.1f}")
        reread = text("server_cache_reread") if note.cached_tokens == 0 and step.index > 1 else ""
        return text("server_cache_note").format(old=f"{old:,}", cached=f"{note.cached_tokens:,}",
                                                       fresh=f"{old - note.cached_tokens:,}", ms=ms, reread=reread)

    def _server_note(self, step) -> str:
        """What a server's step knows exactly and what its unsent tail leaves open: the drawn token's p after T
        within bounds, and the part of the tail a top-p / min-p would keep, cut before the draw."""
        d = step.dist
        c, note = d.candidates, d.server
        at = list(c.ids).index(step.token.id)
        values = {"n_top": note.n_top, "tail_count": f"{note.tail_count:,}", "tail_p": f"{note.tail_p:.3f}",
                  "token": html.escape(quoted(step.token.piece))}
        temp = "" if c.p_temp_bounds is None or not is_open(c.p_temp_bounds[at]) else \
            text("server_tail_temp").format(**values, p_temp=f"{c.p_temp[at]:.4f}",
                                                   low=f"{c.p_temp_bounds[at][0]:.4f}",
                                                   high=f"{c.p_temp_bounds[at][1]:.4f}")
        cut = "" if d.tail_kept is None or d.tail_kept[0] <= 0 else \
            text("server_tail_cut").format(**values, cut=f"{d.tail_kept[0]:.3f}",
                                                  cut_low=f"{d.tail_kept[1]:.3f}", cut_high=f"{d.tail_kept[2]:.3f}")
        return text("server_tail_note").format(**values, temp_part=temp, cut_part=cut)

    def _verify_note(self, values: dict) -> str:
        """Why the shown step's verify pass could check several tokens at once, and why the output is unchanged."""
        c = self.intents
        shown = c.shown()
        verify = pass_of(c.history, shown.step if shown is not None else None)
        if verify is None:
            return ""
        v, s = verify.verified, shown.step
        context = [t.piece for t in c.prefill_event.tokens] + [step.token.piece for step in c.steps]
        end = c.prefill_event.n_tokens + v.index - 1
        gram = "".join(display(piece) for piece in context[max(0, end - len(v.ngram)):end])
        role = verify.role(s)
        k = s.index - v.index
        drafted = v.drafted[k] if k < len(v.drafted) else None
        numbers = {**values, "green": self.appearance.theme.kept, "first": v.index, "ngram_n": len(v.ngram),
                   "ngram_s": "s" if len(v.ngram) != 1 else "", "ngram": html.escape(f"“{gram}”"),
                   "drafted": len(v.drafted), "positions": v.positions, "ms": f"{v.forward_ms:.0f}",
                   "accepted": v.accepted, "emitted": v.emitted, "emitted_s": "s" if v.emitted != 1 else "",
                   "k": k + 1, "draft": html.escape(quoted(drafted.piece)) if drafted else ""}
        numbers["role"] = text(f"verify_role_{role}").format(**numbers)
        return text("verify_note").format(**numbers) + self._verify_cost(v, numbers)

    def _verify_cost(self, v, numbers: dict) -> str:
        """The pass's measured cost in plain steps, and why the engine drafted this many ("" before a plain step
        was timed: nothing to measure it against)."""
        cost = verify_cost(v, median_cached_ms(self.intents.history.log))
        if cost is None:
            return ""
        choice = text("verify_choice").format(
            **numbers, draft_max=v.draft_max, acceptance=f"{v.acceptance[0]:.0%}",
            expected_cost=f"{v.expected_cost:.1f}", expected_tokens=f"{v.expected_tokens:.1f}") if v.draft_max and v.acceptance else ""
        return text("verify_cost").format(**numbers, cost=f"{cost[0]:.1f}", step_ms=f"{cost[1]:.1f}", choice=choice)

    def refresh(self) -> None:
        key, values = self.state_key()
        info = self.intents.info
        values.update(muted=self.appearance.theme.muted,
                      fingerprint=info.weights_fingerprint if info else "")
        body = text(key).format(**values)
        verify = self._verify_note(values) if key.startswith("stepped") else ""
        if verify:  # its words on the pass replace the last paragraph's "only the new position was projected"
            body = body[:body.rfind("<p>")] + verify
        body += self._notes(key, values)
        if info is not None and key in ("loaded", "prefilled") and info.decode_path.startswith(f"{STOCK_DECODE}: "):
            body += text("stock_note").format(muted=values["muted"],
                                                              decode_path=html.escape(info.decode_path))
        if info is not None:
            body += text("footer").format(**values)
        body = agree(body)  # English counts made to agree; a translation has no such words
        if body != self._html:
            self._html = body
            self.browser.setHtml(body)
