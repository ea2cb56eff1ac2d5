"""From one step's logits to the token: temperature -> top-k -> top-p -> min-p -> renormalise -> draw.

Pure functions over a 1-D logits tensor; nothing here touches the model. Each truncation works on the
distribution renormalised after the previous stage (as transformers does) and reports how many tokens it
kept and how much probability mass it removed, so the UI can draw the waterfall. The draw reads one
uniform u in [0, 1) from a seeded generator against the kept tokens' CDF in descending-probability
order (ties by token id). Math is float64 so the reported probabilities sum to 1 within ~1e-12.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from inference import kernels
from inference.messages import say
from inference.settings import SamplerSettings, Stage


@dataclass
class TailBounds:
    """What a server's unlisted tail leaves open in a step's distribution (server_tail.py): each (V,) float64,
    the least and the most a token's p could be over every tail that fits what the server said."""

    p_temp_low: torch.Tensor
    p_temp_high: torch.Tensor
    p_final_low: torch.Tensor  # the sampler over the whole vocabulary (the tail drawn from too)
    p_final_high: torch.Tensor
    # the tail's share of that final distribution: (what the `server_cap` stage removed, least, most)
    tail_final: tuple[float, float, float]

    @property
    def exact(self) -> bool:
        """Nothing left open: p_temp and p_final are the whole vocabulary's (and no tail was cut)."""
        return (self.tail_final[2] == 0.0 and torch.equal(self.p_temp_low, self.p_temp_high)
                and torch.equal(self.p_final_low, self.p_final_high))


@dataclass
class Distribution:
    p_raw: torch.Tensor  # (V,) softmax(logits)
    p_temp: torch.Tensor  # (V,) softmax(logits / T); equals p_raw when greedy
    p_final: torch.Tensor  # (V,) what the draw uses: truncated and renormalised, zeros elsewhere
    kept_ids: torch.Tensor  # (K,) non-zero tokens of p_final, descending probability, ties by id
    stages: list[Stage]
    greedy: bool
    entropy: float  # of p_raw, nats
    # (ids, logits as float64), numpy, of the top n tokens by logit, descending, ties to the lower id, when
    # the kernels read them off with the softmax (n: distribution's top_n); the report's candidates then
    top: tuple[np.ndarray, np.ndarray] | None = None
    bounds: TailBounds | None = None  # a server's step: what its tail leaves open (None: all exact)

    @property
    def kept_cdf(self) -> torch.Tensor:
        return torch.cumsum(self.p_final[self.kept_ids], 0)  # (K,)


def _descending(ids: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """ids ordered by descending p, ties broken by ascending id (a total, reproducible order)."""
    by_id = torch.sort(ids, stable=True).values
    order = torch.sort(p[by_id], descending=True, stable=True).indices
    return by_id[order]


BLOCK = 64  # scores per block of the top-k prefilter


def top_k_ids(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Exactly k ids of the highest scores: those above the k-th score, then those tied with it (the lowest
    ids among the ties), each part ascending.

    First a prefilter: at least k scores are >= the k-th largest maximum t of blocks of BLOCK scores, so
    the k-th largest score is >= t and every score that high is among the few scores >= t; the exact
    selection runs on those. Half the time of one top-k over a vocabulary of 49K, the same ids.
    """
    V, n_blocks = scores.numel(), scores.numel() // BLOCK
    if n_blocks >= 4 * k:
        t = torch.topk(scores[:n_blocks * BLOCK].view(n_blocks, BLOCK).amax(1), k).values[-1]
        among = torch.nonzero(scores >= t).flatten()  # ascending
        if among.numel() * 8 < V:  # not where ties are everywhere (a server's -inf outside its top-N)
            sub = scores[among]
            threshold = torch.topk(sub, k).values[-1]
            above, tied = among[sub > threshold], among[sub == threshold]
            return torch.cat([above, tied[: k - above.numel()]])
    threshold = torch.topk(scores, k).values[-1]
    above = torch.nonzero(scores > threshold).flatten()
    tied = torch.nonzero(scores == threshold).flatten()  # ascending ids
    return torch.cat([above, tied[: k - above.numel()]])


def check_finite(logits: torch.Tensor, top: float) -> None:
    """Refuse logits with a NaN or with no finite value, given their maximum `top` (a maximum propagates
    NaN, and a finite one proves a finite value): a second pass only when the maximum is infinite."""
    if top != top or (math.isinf(top) and not bool(torch.isfinite(logits).any())):
        raise ValueError(say("logits.not_finite"))


@dataclass
class _Softmax:
    """softmax(logits) in float64 and what is read off it, by the kernels or by torch ops."""

    p: torch.Tensor  # (V,)
    best: int  # the first maximum's id
    p_best: float
    entropy: float
    nonzero: int | None  # how many p > 0 (None: not counted yet)
    logits: torch.Tensor | None  # (V,) float64 (None: the kernel read the float32 logits as they are)
    p_final: torch.Tensor | None = None  # one-hot at best (the kernel's, for a greedy step)
    top: tuple[np.ndarray, np.ndarray] | None = None


# Logits of these types are float32 values exactly, so their float32 copy on the host is the same distribution.
_EXACT_IN_FLOAT32 = (torch.float32, torch.bfloat16, torch.float16)


def _on_host(logits: torch.Tensor) -> torch.Tensor:
    """The step's logits on the CPU, flat, in one copy: float32 where that holds them exactly (a GPU's bfloat16 or
    float32 logits: the kernels' path then reads them as it reads the CPU's), float64 otherwise."""
    logits = logits.detach().flatten()
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64):
        return logits
    return logits.to("cpu", torch.float32 if logits.dtype in _EXACT_IN_FLOAT32 else torch.float64)


def _by_kernel(logits: torch.Tensor, top_n: int, greedy: bool) -> _Softmax | None:
    """One kernels call (csrc/vocab.h) instead of ~15 torch ops, each 20-100 us right after a decode
    step; None where it does not apply (kernels not loaded, not float32 on the CPU, a NaN or no finite
    maximum: the torch path says what is wrong)."""
    ops = kernels.loaded()
    if ops is None or logits.dtype != torch.float32 or logits.device.type != "cpu" or top_n < 1:
        return None
    p, p_final, ids, numbers = ops.vocab_stats(logits.detach().flatten().contiguous(), top_n, greedy)
    numbers = numbers.numpy()  # numpy from here: a numpy slice costs ~1 us, a torch one 5-20 us here
    top, best, h, nonzero, p_best = numbers[:5].tolist()
    if not math.isfinite(top):
        return None
    return _Softmax(p, int(best), p_best, h, int(nonzero), None, p_final if greedy else None,
                    (ids.numpy(), numbers[5:]))


def _by_torch(logits: torch.Tensor) -> _Softmax:
    logits = logits.detach().to("cpu", torch.float64).flatten()  # (V,)
    top, at = torch.max(logits, 0)  # the first maximum (one op: each op costs 20-100 us after a decode step)
    top = float(top)
    check_finite(logits, top)
    p_raw = torch.softmax(logits, 0)
    best, p_best = int(at), float(p_raw[at])
    return _Softmax(p_raw, best, p_best, softmax_entropy(logits, p_raw, top, p_best), None, logits)


def _greedy(raw: _Softmax) -> Distribution:
    p_final = raw.p_final
    if p_final is None:
        p_final = torch.zeros_like(raw.p)
        p_final[raw.best] = 1.0
    nonzero = raw.nonzero if raw.nonzero is not None else int(torch.count_nonzero(raw.p))
    stages = [Stage("temperature", nonzero, 0.0), Stage("greedy", 1, 1.0 - raw.p_best)]
    return Distribution(raw.p, raw.p, p_final, torch.tensor([raw.best]), stages, True, raw.entropy, raw.top)


def distribution(logits: torch.Tensor, s: SamplerSettings, top_n: int = 0) -> Distribution:
    """The step's distribution under `s`; with `top_n` the top n logits are read off too where the kernels
    can (Distribution.top), so that the report needs no top-k of its own. Logits on a GPU come to the host in one
    copy first (_on_host): the sampler's float64 arithmetic and its draw run there, as on the CPU."""
    logits = _on_host(logits)
    raw = _by_kernel(logits, top_n, s.is_greedy) or _by_torch(logits)
    if s.is_greedy:
        return _greedy(raw)
    logits = raw.logits if raw.logits is not None else logits.detach().to(torch.float64).flatten()
    V, p_raw, best = logits.numel(), raw.p, raw.best
    scores = logits / s.temperature if s.temperature != 1.0 else logits  # x / 1.0 is x, bit for bit
    if not torch.isfinite(scores[best]):  # T so small (1e-320) that it overflows: shift the best to 0
        scores = (logits - logits[best]) / s.temperature  # the limit, all mass on the best, not inf - inf
    p_temp = torch.softmax(scores, 0) if scores is not logits else p_raw
    if float(p_temp.min()) > 0:  # every token still in play (the usual case): no gather
        ids, p = torch.arange(V), p_temp
    else:
        ids = torch.nonzero(p_temp > 0).flatten()  # (K,) the candidates still in play
        p = p_temp[ids]  # their renormalised probabilities
    stages = [Stage("temperature", ids.numel(), 0.0)]

    removed = 0.0
    if 0 < s.top_k < ids.numel():
        ids = top_k_ids(scores, s.top_k) if ids.numel() == V else ids[top_k_ids(scores[ids], s.top_k)]
        kept_mass = float(p_temp[ids].sum())
        removed, p = max(0.0, 1.0 - kept_mass), p_temp[ids] / kept_mass
    stages.append(Stage("top_k", ids.numel(), removed))

    removed = 0.0
    if s.top_p < 1.0:
        order = _descending(torch.arange(ids.numel()), p)
        cumulative = torch.cumsum(p[order], 0)
        n_keep = int(torch.searchsorted(cumulative, torch.tensor(s.top_p, dtype=torch.float64))) + 1
        if n_keep < ids.numel():  # the smallest prefix whose mass reaches top_p
            kept = order[:n_keep]
            kept_mass = float(cumulative[n_keep - 1])
            removed, ids, p = max(0.0, 1.0 - kept_mass), ids[kept], p[kept] / kept_mass
    stages.append(Stage("top_p", ids.numel(), removed))

    removed = 0.0
    if s.min_p > 0.0:
        keep = p >= s.min_p * p.max()
        if not bool(keep.all()):
            removed = float(p[~keep].sum())
            ids, p = ids[keep], p[keep] / p[keep].sum()
    stages.append(Stage("min_p", ids.numel(), removed))

    p_final = torch.zeros_like(p_raw)
    p_final[ids] = p
    return Distribution(p_raw, p_temp, p_final, _descending(ids, p_final), stages, False, raw.entropy, raw.top)


def draw(dist: Distribution, generator: torch.Generator) -> tuple[int, float | None]:
    """(token, u). Greedy: the argmax and u None. Otherwise the first kept token whose CDF exceeds u."""
    if dist.greedy:
        return int(dist.kept_ids[0]), None
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    cdf = dist.kept_cdf
    index = min(int(torch.searchsorted(cdf, torch.tensor(u, dtype=torch.float64), right=True)),
                cdf.numel() - 1)
    return int(dist.kept_ids[index]), u


def softmax_entropy(logits: torch.Tensor, p: torch.Tensor, top: float, p_top: float) -> float:
    """Entropy of p = softmax(logits), as log Z - E_p[logit]: one dot product instead of a pass of logs.

    log Z is read off the largest logit `top` and its probability `p_top` (log p_top = top - log Z), where
    p is most precise. Logits with -inf (masked tokens) make the dot product NaN; those fall back to the
    direct sum.
    """
    h = top - math.log(p_top) - float(torch.dot(p, logits))
    return max(h, 0.0) if h == h else entropy(p)


def entropy(p: torch.Tensor) -> float:
    """Shannon entropy in nats (0 log 0 = 0)."""
    return float(-torch.special.xlogy(p, p).sum())


def draw_seed(seed: int, index: int) -> int:
    """The generator seed of step `index`'s draw: a function of (seed, index) alone, so a rewind and redraw
    with the same seed and settings draws the same u, and another seed changes every later draw."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
