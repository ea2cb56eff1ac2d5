"""Sampling a server's top-N: what is exact, what is only bounded, and the part of the tail the draw leaves out.

A server source (sources/remote.py) knows the listed tokens' raw p exactly (the server's own log-probabilities)
and of the other V - N tokens only their total tau = 1 - sum(p) and that each is at most p_min, the least
listed one's. From that:
- p_raw is exact, and so is p_temp at T = 1 (it is p_raw).
- At T != 1 a listed token's softmax(logits / T) is p^a / (sum_listed p^a + S), a = 1/T, where the tail's
  S = sum_tail p^a was not sent. S lies between two tails that both fit what was said: the mass packed into
  as few tokens as possible (floor(tau / p_min) tokens at p_min and the rest in one) and the mass spread evenly
  over all V - N. For T < 1 the packed tail has the larger S, for T > 1 the even one. p_temp is shown at the
  geometric middle of the two, with both bounds.
- The truncations: top-k within the N, min-p above p_min, or a top-p reached within the listed tokens for every
  S, leave the whole tail out, and p_final is exact. Otherwise the sampler over the whole vocabulary would keep
  part of the tail. TokenStep draws among the listed tokens only: a last stage, `server_cap`, removes that part
  (its mass is shown, never hidden), so p_final is what the draw used; what each listed token's p_final would be
  with the whole vocabulary (the tail drawn from too) is given as bounds, and so is the tail's share.

Every kept set here is a prefix of the listed tokens in descending order (top-k, top-p and min-p all keep the
most likely), and the tail ranks after them all (each tail token is at most p_min).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from inference.events import ServerNote
from inference.session.sampling import Distribution, TailBounds, _descending, entropy
from inference.settings import SamplerSettings, Stage

# How far the tail's mass, 1 - the listed p, may be off: a server's log-softmax is float32 (each p good to ~1e-7 of
# itself), and a tail below double precision (1 - sum = 0) can still weigh at a high temperature
TAIL_ROUNDING = 1e-6


def tail_tempered(tail_p: float, tail_count: int, p_min: float, a: float) -> tuple[float, float]:
    """(least, most) sum of p^a over the tail: `tail_count` tokens holding `tail_p` in all, each at most `p_min`,
    relative to p_min^a (so 1 = one token as likely as the least listed one after temperature)."""
    if tail_p <= 0.0 or tail_count == 0 or p_min <= 0.0:
        return 0.0, 0.0
    tail_p = min(tail_p, tail_count * p_min)  # a server's rounding must not make the tail impossible
    full = min(tail_count, math.floor(tail_p / p_min))
    rest = tail_p / p_min - full  # the packed tail's last token, as a fraction of p_min
    packed = full + (rest ** a if rest > 0 else 0.0)
    even = math.exp(math.log(tail_count) + a * (math.log(tail_p / p_min) - math.log(tail_count)))
    return (even, packed) if a >= 1.0 else (packed, even)


def _truncate(w: np.ndarray, tail: float, q: float, count: int, s: SamplerSettings, side: str
              ) -> tuple[int, float, list[Stage]]:
    """top-k -> top-p -> min-p over the listed tokens' tempered weights `w` (descending) and a tail of `count`
    tokens whose weights sum to `tail`, each at most `q` (= w[-1]). Where the tail's share of a stage is not
    known, `side` picks: "low" the least kept, "high" the most, "middle" between. Returns the listed tokens kept
    (a prefix), the tail's kept weight, and the stages."""
    cum = np.cumsum(w)
    n = len(w)
    tail_n = count if tail > 0 else 0  # tail tokens still in play (the fewest that can hold `tail` after top-k)

    def span(low: float, high: float) -> float:
        return {"low": low, "high": high}.get(side, math.sqrt(low * high))

    def kept(n_listed: int, tail_weight: float) -> int:
        return n_listed + (min(tail_n, max(1, math.ceil(tail_weight / q - 1e-9))) if tail_weight > 0 < q else 0)

    before = cum[-1] + tail
    removed = 0.0
    if 0 < s.top_k < n + tail_n:
        if s.top_k <= n:
            n, tail = s.top_k, 0.0
        else:  # the tail's best top_k - n tokens: at least their even share, at most top_k - n tokens at q
            extra = s.top_k - n
            tail = span(tail * extra / tail_n, min(tail, extra * q))
            tail_n = extra
        removed = max(0.0, 1.0 - (cum[n - 1] + tail) / before)
    stages = [Stage("top_k", kept(n, tail), removed)]

    before, removed = cum[n - 1] + tail, 0.0
    if s.top_p < 1.0:
        at = int(np.searchsorted(cum[:n] / before, s.top_p))  # the first listed prefix that reaches top_p
        if at < n:
            n, tail = at + 1, 0.0
        elif tail > 0:  # the nucleus ends in the tail: at top_p, and up to one tail token past it
            reach = s.top_p * before - cum[n - 1]
            tail = min(tail, max(0.0, reach + (q if side == "high" else 0.0)))
        removed = max(0.0, 1.0 - (cum[n - 1] + tail) / before)
    stages.append(Stage("top_p", kept(n, tail), removed))

    before, removed = cum[n - 1] + tail, 0.0
    if s.min_p > 0.0:
        threshold = s.min_p * w[0]  # the most likely token is always the first listed one
        n_keep = int(np.count_nonzero(w[:n] >= threshold))
        tail_kept = 0.0 if q < threshold or side == "low" else tail  # which tail tokens pass is not known
        if n_keep < n or tail_kept < tail:
            removed = max(0.0, 1.0 - (cum[n_keep - 1] + tail_kept) / before)
            n, tail = n_keep, tail_kept
    stages.append(Stage("min_p", kept(n, tail), removed))
    return n, tail, stages


def server_distribution(logits: torch.Tensor, note: ServerNote, s: SamplerSettings) -> Distribution:
    """The step's distribution under `s` from a server's top-N `logits` (its raw log-probabilities, -inf for the
    tokens it did not list) and what `note` says of the rest: p_raw the server's p, p_temp and p_final as the
    module's docstring says, with their bounds (Distribution.bounds)."""
    logits = logits.detach().to("cpu", torch.float64).flatten()
    listed = torch.nonzero(torch.isfinite(logits)).flatten()
    ids = _descending(listed, logits)  # (N,) most likely first, ties by id
    lp = logits[ids].numpy()
    p = torch.exp(logits[ids]).numpy()
    V, N = logits.numel(), ids.numel()
    p_raw = torch.zeros(V, dtype=torch.float64)
    p_raw[ids] = torch.from_numpy(p)
    h = entropy(p_raw / p_raw.sum())  # of the listed tokens alone: the tail's spread is not known
    in_play = N + (note.tail_count if note.tail_p > 0 else 0)
    if s.is_greedy:  # the argmax: no tail token is more likely than the least listed one
        p_final = torch.zeros_like(p_raw)
        p_final[ids[0]] = 1.0
        stages = [Stage("temperature", in_play, 0.0), Stage("greedy", 1, max(0.0, 1.0 - float(p[0])))]
        return Distribution(p_raw, p_raw, p_final, ids[:1], stages, True, h)

    w = np.exp((lp - lp[0]) / s.temperature)  # after temperature, relative to the top token's (no overflow at small T)
    tail_low, tail_mid, tail_high = _tail_weights(note, float(p[0]), float(p[-1]), float(w[-1]), s.temperature)
    total = float(w.sum())
    p_temp = p_raw if s.temperature == 1.0 else _scatter(ids, w / (total + tail_mid), V)
    n, tail, stages = _truncate(w, tail_mid, float(w[-1]), note.tail_count, s, "middle")
    stages.insert(0, Stage("temperature", in_play, 0.0))
    drawn = float(w[:n].sum())
    if tail > 0:  # the sampler would keep part of the tail: the draw is among the listed tokens only
        stages.append(Stage("server_cap", n, tail / (drawn + tail)))
    p_final = _scatter(ids[:n], w[:n] / drawn, V)
    bounds = _bounds(ids, w, (tail_low, tail_high), note, s, V, tail / (drawn + tail))
    if s.temperature == 1.0:  # p after T is p_raw, exactly
        bounds = TailBounds(p_raw, p_raw, bounds.p_final_low, bounds.p_final_high, bounds.tail_final)
    return Distribution(p_raw, p_temp, p_final, _descending(ids[:n], p_final), stages, False, h, bounds=bounds)


def _tail_weights(note: ServerNote, p_top: float, p_min: float, q: float, temperature: float
                  ) -> tuple[float, float, float]:
    """The tail's weight after temperature relative to the top token's: (least, the middle shown, most). `q` is
    the least listed token's weight: no tail token weighs more."""
    if q == 0.0:  # so far below the top token after temperature that the tail cannot weigh anything either
        return 0.0, 0.0, 0.0
    least, most = max(0.0, note.tail_p - TAIL_ROUNDING), note.tail_p + TAIL_ROUNDING
    if temperature == 1.0:  # the tail's weight is its mass
        return least / p_top, note.tail_p / p_top, most / p_top
    a = 1.0 / temperature
    low = q * tail_tempered(least, note.tail_count, p_min, a)[0]
    high = q * tail_tempered(most, note.tail_count, p_min, a)[1]
    return low, math.sqrt(low * high), high


def _bounds(ids: torch.Tensor, w: np.ndarray, tails: tuple[float, float], note: ServerNote, s: SamplerSettings,
            V: int, removed: float) -> TailBounds:
    """Each listed token's least and most p after T and p_final over the whole vocabulary, for a tail weighing
    from tails[0] to tails[1]; the sampler keeps more of the listed prefix, and more of the tail, the more it weighs.
    `removed`: the tail's share the server_cap stage cut."""
    total, q, N = float(w.sum()), float(w[-1]), len(w)
    n_low, tail_low, _ = _truncate(w, tails[0], q, note.tail_count, s, "low")
    n_high, tail_high, _ = _truncate(w, tails[1], q, note.tail_count, s, "high")
    least = float(w[:n_low].sum()) + tail_low  # the least and the most the kept weight can be
    most = float(w[:n_high].sum()) + tail_high
    final_low, final_high = np.zeros(N), np.zeros(N)
    final_low[:n_low] = w[:n_low] / most
    final_high[:n_low] = w[:n_low] / least
    # a token kept only with a larger tail: kept at all, it is at most its share of the prefix that ends with it
    final_high[n_low:n_high] = w[n_low:n_high] / np.cumsum(w)[n_low:n_high]
    return TailBounds(
        p_temp_low=_scatter(ids, w / (total + tails[1]), V), p_temp_high=_scatter(ids, w / (total + tails[0]), V),
        p_final_low=_scatter(ids, final_low, V), p_final_high=_scatter(ids, final_high, V),
        tail_final=(removed, tail_low / least if least > 0 else 0.0, tail_high / most if most > 0 else 0.0))


def _scatter(ids: torch.Tensor, values: np.ndarray, V: int) -> torch.Tensor:
    out = torch.zeros(V, dtype=torch.float64)
    out[ids] = torch.from_numpy(np.ascontiguousarray(values))
    return out
