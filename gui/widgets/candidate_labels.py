"""Candidates' words: the header's settings and server note, each bar row's probabilities at every sampler
stage (model, after temperature, final), and the legend; greedy has no temperature stage to show."""

from __future__ import annotations

import numpy as np

from gui.state.format import quoted, rank_text
from gui.state.i18n import translate


def compact(n: int) -> str:
    return f"{n / 1000:.0f}K" if n >= 10_000 else f"{n:,}"


def server_note(note, tail_kept=None) -> str:
    """What a remote server said with this step, for the header ("" for the local model), and what the sampler
    would have kept of the tokens it did not list (the draw is among the listed ones only)."""
    if note is None:
        return ""
    parts = [translate("Candidates", "server listed top {n}, other {p}").format(n=note.n_top, p=f"{note.tail_p:.3f}")]
    if tail_kept is not None and tail_kept[0] > 0:
        parts.append(translate("Candidates", "the sampler would keep {span} of the final p in the unlisted tokens: "
                               "cut (server cap), drawn among the {n} listed").format(
            span=span(tail_kept[1], tail_kept[2]), n=note.n_top))
    if note.cached_tokens is not None:
        cached = note.cached_tokens
        parts.append(translate("Candidates", "%n token(s) from its cache", None, cached))
    if note.server_ms is not None:
        parts.append(translate("Candidates", "{ms} ms on the server").format(ms=f"{note.server_ms:.1f}"))
    return " · " + " · ".join(parts)


def describe_settings(s) -> str:
    if s.is_greedy:
        return translate("Candidates", "greedy")
    top_k = s.top_k or translate("Candidates", "off", "a setting that is switched off")
    parts = [f"T {s.temperature:g}", f"top-k {top_k}", f"top-p {s.top_p:g}"]
    if s.min_p > 0:
        parts.append(f"min-p {s.min_p:g}")
    return " · ".join(parts)


def shows_temperature(settings) -> bool:
    """Whether the temperature stage changes anything to show: not in greedy mode, not at T = 1."""
    return not settings.is_greedy and settings.temperature != 1.0


def fmt_p(p: float) -> str:
    """A probability that stays readable when tiny: 0.31, 0.047, 3e-05, 0."""
    if p <= 0:
        return "0"
    if p >= 0.995:
        return "1"
    if p >= 0.1:
        return f"{p:.2f}"
    if p >= 0.001:
        return f"{p:.3f}"
    return f"{p:.0e}".replace("e-0", "e-")


def span(low: float, high: float) -> str:
    """A range of probabilities: "0.22–0.41" (one value where both ends read the same)."""
    a, b = fmt_p(low), fmt_p(high)
    return a if a == b else f"{a}–{b}"


def is_open(bounds) -> bool:
    """A server's (least, most) for a value that its unsent tail leaves open (None or equal: exact)."""
    return bounds is not None and bounds[1] - bounds[0] > 1e-9 * max(bounds[1], 1e-300)


def row_label(raw: float, temp: float, final: float, settings, temp_bounds=None) -> str:
    """One row's stages, model → after T → final ("✕" where the sampler cut it): a bar of 0.3 at T 0.1
    reads 0.30 → 0.002 → ✕, not 0.000. A p after T that a server's tail leaves open reads "≈0.31"."""
    stages = [fmt_p(raw)]
    if shows_temperature(settings):
        stages.append(("≈" if is_open(temp_bounds) else "") + fmt_p(temp))
    stages.append(fmt_p(final) if final > 0 else "✕")
    return " → ".join(stages)


def row_tooltip(raw: float, temp: float, final: float, settings, temp_bounds=None, final_bounds=None) -> str:
    """The row's p at each stage; from a server, with the bounds its unsent tail leaves (`*_bounds`: (least,
    most), None where exact)."""
    lines = [translate("Candidates", "model (softmax of the logits): p = {p}").format(p=f"{raw:.6f}")]
    if not settings.is_greedy:
        if is_open(temp_bounds):
            lines.append(translate("Candidates", "after temperature {t}: p ≈ {p}, between {low} and {high} (the server "
                                   "did not send the other tokens' logits, which temperature reweighs too)").format(
                t=f"{settings.temperature:g}", p=f"{temp:.6f}", low=f"{temp_bounds[0]:.6f}", high=f"{temp_bounds[1]:.6f}"))
        else:
            lines.append(translate("Candidates", "after temperature {t}: p = {p}").format(
                t=f"{settings.temperature:g}", p=f"{temp:.6f}"))
    lines.append(translate("Candidates", "final (truncated, renormalised): p = {p}").format(p=f"{final:.6f}")
                 if final > 0 else translate("Candidates", "final: cut by the sampler (p = 0)"))
    if is_open(final_bounds):
        lines.append("  " + translate("Candidates", "(drawn among the listed tokens; with the whole vocabulary it would "
                                      "be {low} to {high})").format(low=f"{final_bounds[0]:.6f}",
                                                                    high=f"{final_bounds[1]:.6f}"))
    return "\n".join(lines)


def legend(t, settings) -> str:
    """The colours of the bars, on one line; the temperature's only where that stage shows."""
    after_t, model, final = (translate("Candidates", "after T"), translate("Candidates", "model"),
                             translate("Candidates", "final"))
    drawn, click = translate("Candidates", "drawn"), translate("Candidates", "click a bar or a segment to take it")
    temp = "" if settings is not None and settings.is_greedy else \
        f"<span style='color:{t.temp}'>■</span> {after_t} &nbsp; "
    return (f"<span style='color:{t.raw}'>■</span> {model} &nbsp; {temp}"
            f"<span style='color:{t.final}'>■</span> {final} &nbsp; "
            f"<span style='color:{t.chosen}'>▮</span> {drawn} &nbsp; "
            f"<span style='color:{t.muted}'>· {click}</span>")


def legend_tip() -> str:
    return translate("Candidates", "Bars, top to bottom in each row: the model's p (softmax of the logits), p after "
                     "temperature, and the final p the draw used (truncated by top-k / top-p / min-p, renormalised; "
                     "✕: cut). The words beside a row read model → after T → final. Click a bar or a draw segment to "
                     "take that token.")


def header_text(shown) -> str:
    """The step, its draw, the settings and the entropy (and what a server said)."""
    d = shown.dist
    settings = describe_settings(d.settings)
    perplexity = float(np.exp(d.entropy))
    if shown.pending:
        text = translate("Candidates", "Step {index} (next, not drawn yet) · {settings} · entropy {entropy} nats "
                         "(as uncertain as ~{perplexity} equal choices)").format(
            index=shown.index, settings=settings, entropy=f"{d.entropy:.2f}", perplexity=f"{perplexity:.1f}")
    else:
        s = shown.step
        how = (translate("Candidates", "forced: you chose it") if s.forced else
               translate("Candidates", "greedy: the top token") if s.random_u is None else f"u = {s.random_u:.4f}")
        text = (translate("Candidates", "Step {index} took {token} (rank {rank}, {how})") if s.forced else
                translate("Candidates", "Step {index} drew {token} (rank {rank}, {how})")).format(
            index=s.index, token=quoted(s.token.piece), rank=rank_text(s.chosen_rank), how=how)
        text += " · " + translate("Candidates", "{settings} · entropy {entropy} nats (~{perplexity} equal choices) · "
                                  "seed {seed}").format(settings=settings, entropy=f"{d.entropy:.2f}",
                                                        perplexity=f"{perplexity:.1f}", seed=s.seed)
    return text + server_note(d.server, d.tail_kept)
