"""What the session's forward passes record besides the logits, for the views that show the model's insides:
attention weights (the attention view) and the residual stream (the logit lens, lens.py).

Both are off by default and cost nothing then. While attention is recorded, every pass that produces a pending
step keeps the newest query's row of every layer and head (the prefill also the prompt's whole triangle); while
the lens is captured, such a pass also keeps the residual rows of the predicted position, which travel with
the pending step (`PendingStep.residuals`) and become the lens of the step drawn from it.

Attention that was not recorded (the view opened late, a node of another branch) is recomputed for any node
on a scratch cache (`attention_of`): the session's own cache is left untouched.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from inference.attention import AttentionOf
from inference.events import StepDistribution
from inference.model.capture import LastRowCapture, PromptCapture, RowsCapture
from inference.model.config import ModelConfig
from inference.session.lens import ResidualRows, lens_log_probs, lens_report
from inference.session.pending import PendingStep
from inference.sources import LogitsSource


class Recorder:
    def __init__(self, config: ModelConfig, attention: bool = False, lens: bool = False):
        self.config = config
        self.attention = attention  # record attention rows
        self.lens = lens  # capture the logit lens
        self._newest_lens: tuple[torch.Tensor, torch.Tensor] | None = None  # (residuals, their log-probs)

    def row_capture(self) -> LastRowCapture | None:
        """A capture of the newest query's attention row, while attention is recorded."""
        return LastRowCapture(self.config.n_layers) if self.attention else None

    def rows_capture(self) -> RowsCapture | None:
        """A capture of every query row of a pass (a verify pass: each row decides a step), while attention is
        recorded."""
        return RowsCapture(self.config.n_layers) if self.attention else None

    def prompt_capture(self, n_prompt: int) -> PromptCapture | None:
        """A capture of the prompt's attention triangle (and last row), while attention is recorded."""
        return PromptCapture(self.config, n_prompt) if self.attention else None

    def forward(self, source: LogitsSource, ids: list[int], start: int, capture=None,
                lens: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """source.forward -> (logits, residual rows). While the lens is captured, a pass whose last position
        is predicted (`lens`) also hands the source a ResidualRows; None when it was not asked for, or the
        source cannot give the stream (a server)."""
        if not (lens and self.lens):
            return source.forward(ids, start, capture), None
        rows = ResidualRows(self.config.n_layers)
        logits = source.forward(ids, start, capture, residuals=rows)
        return logits, rows.tensor()

    def residuals(self, source: LogitsSource, token: int, position: int) -> torch.Tensor | None:
        """Read `token` at `position` again (the source's cache must end just before it) for its residual
        rows alone: the lens of a pending step computed while the lens was off."""
        rows = ResidualRows(self.config.n_layers)
        source.forward([token], position, residuals=rows)
        return rows.tensor()

    def with_lens(self, summary: StepDistribution, step: PendingStep, source: LogitsSource, text_of,
                  top_n: int, chosen: int | None) -> StepDistribution:
        """`summary` of `step`'s logits with its lens, when captured and `step` carries residual rows. The
        log-probabilities of the newest rows are cached: a pending step is summarised again and again."""
        if not self.lens or step.residuals is None:
            return summary
        if self._newest_lens is None or self._newest_lens[0] is not step.residuals:
            self._newest_lens = (step.residuals, lens_log_probs(source.head_logits, step.residuals, step.logits))
        return replace(summary, lens=lens_report(self._newest_lens[1], top_n, text_of, chosen))

    def attention_of(self, decoder, tokens: list[int], node: int, chunk: int = 512) -> AttentionOf:
        """The attention of the pass that fed the last of `tokens` (prompt + `node`'s path; node 0: the
        prefill's whole triangle), recomputed on a scratch cache of `decoder`: one prefill-sized pass."""
        capture = PromptCapture(self.config, len(tokens)) if node == 0 else LastRowCapture(self.config.n_layers)
        with torch.inference_mode():
            cache = decoder.new_cache(len(tokens))
            for at in range(0, len(tokens), chunk):
                last = at + chunk >= len(tokens)
                ids = torch.tensor(tokens[at:at + chunk], device=decoder.device)
                decoder.forward(ids, at, cache, capture=capture if node == 0 or last else None)
        return AttentionOf(node, capture.array(), capture.prompt() if node == 0 else None)
