"""The same decoder on CUDA (skipped without a GPU): parity with the CPU, cached decode, bf16 default."""

import pytest
import torch

from inference.model.graph_step import graphs_refusal
from inference.session.lens import lens_log_probs, lens_report
from inference.store.loading import load_model, resolve_dtype
from inference.session.sampling import SamplerSettings
from inference.session.session import GenerationSettings, Session
from tiny import make_hf_model, save_hf_model

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
IDS = [5, 77, 200, 31, 9, 140, 250, 3]


@pytest.fixture(scope="module", params=["llama", "mistral", "qwen2", "gpt2"])
def folder(request, tmp_path_factory):
    return save_hf_model(make_hf_model(request.param), tmp_path_factory.mktemp(request.param))


def _logits(model, ids=IDS):
    with torch.inference_mode():
        return model.decoder.forward(torch.tensor(ids, device=model.device), 0, model.decoder.new_cache(32),
                                     all_logits=True).cpu()


def test_auto_dtype_is_bfloat16_on_cuda():
    assert resolve_dtype("auto", torch.device("cuda")) == "bfloat16"


def test_float32_on_cuda_matches_cpu(folder):
    cpu = load_model(folder, device="cpu", dtype="float32")
    gpu = load_model(folder, device="cuda", dtype="float32")
    # TF32 is off by default for matmuls in PyTorch; the difference is summation order only.
    assert (_logits(gpu) - _logits(cpu)).abs().max().item() <= 1e-4


@pytest.mark.parametrize("dtype, tolerance", [("bfloat16", 0.04), ("int8", 0.06)])
def test_low_precision_on_cuda_close_to_float32(folder, dtype, tolerance):
    """Same bounds and reasons as tests/kernels/test_low_precision.py."""
    reference = _logits(load_model(folder, device="cpu", dtype="float32"))
    model = load_model(folder, device="cuda", dtype=dtype)
    assert float((_logits(model) - reference).norm() / reference.norm()) <= tolerance


def test_cached_decode_on_cuda_equals_full_recompute(folder):
    model = load_model(folder, device="cuda", dtype="float32")
    decoder = model.decoder
    cache = decoder.new_cache(8)
    ids = list(IDS)
    with torch.inference_mode():
        logits = decoder.forward(torch.tensor(ids, device="cuda"), 0, cache)[0]
        for _ in range(6):
            full = decoder.forward(torch.tensor(ids, device="cuda"), 0, decoder.new_cache(32))[0]
            # 1e-4, not the CPU's 1e-5: decode and prefill take different fused attention kernels there.
            assert (logits - full).abs().max().item() <= 1e-4
            ids.append(int(torch.argmax(logits)))
            logits = decoder.forward(torch.tensor(ids[-1:], device="cuda"), len(ids) - 1, cache)[0]


def test_session_runs_on_cuda(folder):
    model = load_model(folder, device="cuda")
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=5))
    events = list(session.generate(IDS))
    assert events[-1].n_generated >= 1 and model.info().device.startswith("cuda")


def test_decode_steps_on_cuda_are_graphs_equal_to_eager_steps(folder, monkeypatch):
    """Issue 43: a CUDA decoder replays each cache's captured step (graph_step.py) where its family allows, with the
    eager steps' numbers; one capture per cache and size class."""
    monkeypatch.setenv("TOKENSTEP_CUDA_GRAPHS", "0")
    eager = load_model(folder, device="cuda", dtype="float32").decoder
    monkeypatch.delenv("TOKENSTEP_CUDA_GRAPHS")
    graphed = load_model(folder, device="cuda", dtype="float32").decoder
    assert eager.graphs is None
    if graphs_refusal(graphed) is not None:  # GPT-2's learned positions
        assert graphed.graphs is None
        return
    assert graphed.graphs is not None and graphed.graphs.replayer.name == "cuda graphs"
    with torch.inference_mode():
        a, b = eager.new_cache(8), graphed.new_cache(8)
        ids = torch.tensor(IDS, device="cuda")
        eager.forward(ids, 0, a), graphed.forward(ids, 0, b)
        token = torch.tensor([7], device="cuda")
        for i in range(len(IDS), len(IDS) + 12):
            want, got = eager.forward(token, i, a), graphed.forward(token, i, b)
            assert (got - want).abs().max().item() <= 1e-4, i
            token = want.argmax(-1)
    assert graphed.graphs.captures == 1 and graphed.graphs.replays == 12


def test_the_logit_lens_ranks_on_the_device_and_copies_back_what_it_draws(folder):
    """Issue 43 item 3: the lens's (layers, V) log-probs stay on the GPU; only each layer's top k and the chosen
    token's column come to the host, the same as ranking on the CPU."""
    model = load_model(folder, device="cuda", dtype="float32")
    head = model.decoder.head_logits
    g = torch.Generator().manual_seed(2)
    residuals, logits = torch.randn(3, model.config.hidden, generator=g), torch.randn(model.config.vocab, generator=g)
    with torch.inference_mode():
        on_device = lens_log_probs(head, residuals.cuda(), logits.cuda())
        on_host = lens_log_probs(lambda r: head(r.cuda()).cpu(), residuals, logits)
    assert on_device.device.type == "cuda" and on_host.device.type == "cpu"
    a, b = lens_report(on_device, 5, str, 3), lens_report(on_host, 5, str, 3)
    assert (a.ids == b.ids).all() and abs(a.p - b.p).max() <= 1e-9 and abs(a.p_chosen - b.p_chosen).max() <= 1e-9


def test_the_weights_fingerprint_is_checked_on_the_device(folder):
    """Issue 43 item 3: a CUDA model's fingerprint sums its weights on the GPU (packing.device_digest): the same
    after a run, another after one weight changes."""
    model = load_model(folder, device="cuda", dtype="float32")
    _logits(model)
    assert model.current_fingerprint() == model.fingerprint
    with torch.inference_mode():
        model.decoder.weights.embed[3, 5] += 1.0
    assert model.current_fingerprint() != model.fingerprint


def test_a_batch_on_cuda_gives_each_request_its_solo_run(folder):
    """Issue 43 item 2: a scheduler step's pass over the paged pool on the GPU (issue 39's batch, blocks on the
    device): each request's tokens are those of its run alone on the same GPU model, its draws the same u, its
    candidates' logits within 1e-4 (the solo steps replay graphs, the batch runs eagerly; summation order only)."""
    import dataclasses

    from inference.events import StepDone, Stopped
    from inference.session.batch import BatchRequest, Scheduler

    model = load_model(folder, device="cuda", dtype="float32")
    model.config = dataclasses.replace(model.config, eos_ids=())  # every request runs to its max new tokens

    def settings(seed, n, **sampler):
        return GenerationSettings(SamplerSettings(**sampler), max_new_tokens=n, seed=seed, top_n=8)

    system = [(7 * i + 3) % 250 for i in range(32)]  # two blocks of 16 that two requests share
    asked = [BatchRequest(system + [40, 41], settings(1, 6, temperature=0.8, top_k=40), 0),
             BatchRequest([5, 77, 200, 31], settings(2, 5, greedy=True), 0),
             BatchRequest(system + [90], settings(3, 4, temperature=1.2, top_p=0.9), 2),
             BatchRequest(list(range(60, 100)), settings(4, 3, temperature=1.0, min_p=0.05), 1)]
    scheduler = Scheduler(model, asked, n_blocks=32, block_tokens=16, token_budget=24)
    events = []
    while not scheduler.done:
        events += scheduler.step()
        assert scheduler.step_index < 200
    assert scheduler.pool.data.device.type == "cuda"
    assert scheduler.pool.n_free == scheduler.pool.n_blocks  # every block back
    for index, request in enumerate(asked):
        mine = [e for e in events if isinstance(e, StepDone) and e.request == index]
        solo = [e for e in Session(model, request.settings).generate(request.prompt) if isinstance(e, StepDone)]
        assert [s.token.id for s in mine] == [s.token.id for s in solo]
        assert len([e for e in events if isinstance(e, Stopped) and e.request == index]) == 1
        for a, b in zip(mine, solo):
            assert a.random_u == b.random_u and list(a.dist.candidates.ids) == list(b.dist.candidates.ids)
            assert abs(a.dist.candidates.logits - b.dist.candidates.logits).max() <= 1e-4
