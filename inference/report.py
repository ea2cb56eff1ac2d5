"""What a step reports about its distribution, built from the logits: top-N candidates with their
probability at each sampler stage, the kept tokens' CDF the draw read, the rank of the chosen token.

Plain functions of (logits, sampler result, tokenizer): the session calls them; nothing here changes
state.
"""

from __future__ import annotations

import numpy as np
import torch

from .events import Candidates, KeptCdf, ServerNote, StepDistribution
from .sampling import Distribution
from .settings import SamplerSettings

KEPT_SHOWN = 64  # kept tokens carried to the draw view (the rest only as a count and their total mass)


def summarise(logits: torch.Tensor, dist: Distribution, sampler: SamplerSettings, chosen: int | None,
              top_n: int, text_of, eos_ids, server: ServerNote | None = None) -> StepDistribution:
    """The top `top_n` tokens by raw logit (plus `chosen` when outside them), the stages, the kept CDF.

    `text_of(id)` is how a token reads at this point of the text (the stream's `peek`): a token that
    would complete a character pending in the stream reads as that character, as it would if drawn.

    `server`: the logits are a remote server's top-N log-probabilities (-inf elsewhere); p_raw is then
    the server's own p (softmax over the N, times 1 - the tail), the tail reported beside them."""
    n = min(top_n, logits.numel())
    values, top = torch.topk(logits, n)
    if chosen is not None and chosen not in top.tolist():
        top, values = torch.cat([top, torch.tensor([chosen])]), torch.cat([values, logits[chosen].view(1)])
    kept_ids = dist.kept_ids[:KEPT_SHOWN]
    ids = top.numpy().astype(np.int64)
    listed = 1.0 - server.tail_p if server is not None else 1.0
    p_raw = dist.p_raw[top].numpy()  # (each op here costs 20-100 us after a decode step: as few as can be)
    candidates = Candidates(
        ids=ids, texts=tuple(text_of(int(i)) for i in ids), logits=values.double().numpy(), p_raw=p_raw * listed,
        p_temp=p_raw if dist.p_temp is dist.p_raw else dist.p_temp[top].numpy(), p_final=dist.p_final[top].numpy())
    kept = KeptCdf(ids=kept_ids.numpy().astype(np.int64),
                   texts=tuple(text_of(int(i)) for i in kept_ids),
                   cdf=dist.kept_cdf[:KEPT_SHOWN].numpy(), n_kept=int(dist.kept_ids.numel()))
    eos = [i for i in eos_ids if i < logits.numel()]
    return StepDistribution(candidates=candidates, stages=tuple(dist.stages), kept=kept,
                            entropy=dist.entropy, eos_p=float(dist.p_raw[eos].sum()) * listed if eos else 0.0,
                            settings=sampler, server=server)


def chosen_rank(logits: torch.Tensor, token_id: int, candidates: Candidates, top_n: int) -> int:
    """0-based rank by raw logit: how many logits are strictly higher.

    A chosen token among the top-N candidates is outranked only by candidates (every higher logit is
    among the top N), so the full-vocabulary pass is needed only for a token outside them.
    """
    n_top = min(top_n, logits.numel())
    top = candidates.logits[:n_top]
    at = np.flatnonzero(candidates.ids[:n_top] == token_id)
    if at.size:
        return int((top > top[at[0]]).sum())
    return int((logits > logits[token_id]).sum())
