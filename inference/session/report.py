"""What a step reports about its distribution, built from the logits: top-N candidates with their
probability at each sampler stage, the kept tokens' CDF the draw read, the rank of the chosen token.

Plain functions of (logits, sampler result, tokenizer): the session calls them; nothing here changes
state.
"""

from __future__ import annotations

import numpy as np
import torch

from inference.events import Candidates, KeptCdf, ServerNote, StepDistribution
from inference.session.sampling import Distribution
from inference.settings import SamplerSettings

KEPT_SHOWN = 64  # kept tokens carried to the draw view (the rest only as a count and their total mass)


def summarise(logits: torch.Tensor, dist: Distribution, sampler: SamplerSettings, chosen: int | None,
              top_n: int, texts_of, eos_ids, server: ServerNote | None = None) -> StepDistribution:
    """The top `top_n` tokens by raw logit (plus `chosen` when outside them), the stages, the kept CDF.

    `texts_of(ids)` is how each token reads at this point of the text (the stream's `peek_many`): a token
    that would complete a character pending in the stream reads as that character, as it would if drawn.

    `server`: the logits are a remote server's top-N log-probabilities (-inf elsewhere) and `dist` came from
    server_tail.server_distribution: p_raw is the server's own p, the tail reported beside them, and where the tail
    leaves p_temp or p_final open each candidate carries its bounds."""
    n = min(top_n, logits.numel() if server is None else server.n_top)  # a server's: the tokens it listed
    if dist.top is not None and dist.top[0].size >= n and server is None:  # read off with the softmax
        ids, values = dist.top[0][:n], dist.top[1][:n]
    else:
        top_values, top = torch.topk(logits, n)
        ids, values = top.numpy().astype(np.int64), top_values.double().numpy()
    if chosen is not None and chosen not in ids.tolist():  # a list's `in`: 1 us; numpy's: 50 us here
        ids, values = np.append(ids, chosen), np.append(values, float(logits[chosen]))
    # numpy from here: each torch op costs 20-100 us right after a decode step, a numpy index a few us
    p_raw_all, p_final_all = dist.p_raw.numpy(), dist.p_final.numpy()
    kept_ids = dist.kept_ids.numpy()[:KEPT_SHOWN].astype(np.int64, copy=False)
    p_raw = p_raw_all[ids]
    b = dist.bounds
    bounds = (None, None) if b is None else \
        tuple(np.stack([low.numpy()[ids], high.numpy()[ids]], 1)
              for low, high in ((b.p_temp_low, b.p_temp_high), (b.p_final_low, b.p_final_high)))
    candidates = Candidates(
        ids=ids, texts=texts_of(ids), logits=values, p_raw=p_raw,
        p_temp=p_raw if dist.p_temp is dist.p_raw else dist.p_temp.numpy()[ids], p_final=p_final_all[ids],
        p_temp_bounds=bounds[0], p_final_bounds=bounds[1])
    kept = KeptCdf(ids=kept_ids, texts=texts_of(kept_ids),
                   cdf=np.cumsum(p_final_all[kept_ids]), n_kept=int(dist.kept_ids.numel()))
    eos = [i for i in eos_ids if i < logits.numel()]
    return StepDistribution(candidates=candidates, stages=tuple(dist.stages), kept=kept,
                            entropy=dist.entropy, eos_p=float(p_raw_all[eos].sum()) if eos else 0.0,
                            settings=sampler, server=server, tail_kept=None if b is None else b.tail_final)


def chosen_rank(logits: torch.Tensor, token_id: int, candidates: Candidates, top_n: int) -> int:
    """0-based rank by raw logit: how many logits are strictly higher.

    A chosen token among the top-N candidates is outranked only by candidates (every higher logit is
    among the top N), so the full-vocabulary pass is needed only for a token outside them.
    """
    n_top = min(top_n, logits.numel())
    ids = candidates.ids[:n_top].tolist()  # lists: a few us where numpy's ufuncs take ~35 after a decode step
    if token_id in ids:
        top = candidates.logits[:n_top].tolist()
        chosen = top[ids.index(token_id)]
        return sum(value > chosen for value in top)
    return int((logits > logits[token_id]).sum())
