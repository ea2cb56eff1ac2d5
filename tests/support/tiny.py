"""Tiny random Hugging Face checkpoints of every supported architecture, written with transformers, and
decoders built from them on a chosen backend."""

from __future__ import annotations

import json
from pathlib import Path

import torch

VOCAB = 320  # the model's vocabulary (>= the tokenizer's 256 byte tokens + merges + specials)
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
BOS_ID, EOS_ID = 256 + len(MERGES), 257 + len(MERGES)  # <s> and </s>, added after the merges

ARCHITECTURES = {
    "llama": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, rope_theta=500.0, rms_norm_eps=1e-5,
                  tie_word_embeddings=False),
    "mistral": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=1, max_position_embeddings=128, rope_theta=1000.0, sliding_window=6),
    "qwen2": dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
                  num_key_value_heads=2, max_position_embeddings=128, rope_theta=10000.0,
                  tie_word_embeddings=True),
    "gpt2": dict(n_embd=48, n_layer=2, n_head=4, n_positions=128, n_inner=None),
    "qwen3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=24, max_position_embeddings=128, rope_theta=1000.0,
                  tie_word_embeddings=True),
    "phi3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128, rope_theta=1000.0, pad_token_id=0,
                 partial_rotary_factor=0.75),
    # Gemma: windows of 4 (shorter than the tests' sequences) on alternating layers; Q scaled by 24^-1/2
    # rather than 16^-1/2; caps small enough to bite.
    "gemma2": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, max_position_embeddings=128, sliding_window=4,
                   query_pre_attn_scalar=24, attn_logit_softcapping=3.0, final_logit_softcapping=4.0),
    "gemma3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, max_position_embeddings=128, sliding_window=4,
                   query_pre_attn_scalar=24, layer_types=["sliding_attention", "full_attention"] * 2,
                   rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e5},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}}),
}


def write_tokenizer(folder: Path) -> None:
    """A byte-level BPE over 256 byte symbols with a few merges, plus <s> and </s> specials."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    from inference.text.tokenizer import _byte_level_alphabet

    alphabet = sorted(_byte_level_alphabet(), key=_byte_level_alphabet().get)
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                         "{% if add_generation_prompt %}<s>assistant: {% endif %}"}))


def make_hf_model(arch: str, seed: int = 0, init_std: float = 0.2, **overrides):
    import transformers

    cls_config = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
                  "qwen2": transformers.Qwen2Config, "gpt2": transformers.GPT2Config,
                  "qwen3": transformers.Qwen3Config, "phi3": transformers.Phi3Config,
                  "gemma2": transformers.Gemma2Config, "gemma3": transformers.Gemma3TextConfig}[arch]
    cls_model = {"llama": transformers.LlamaForCausalLM, "mistral": transformers.MistralForCausalLM,
                 "qwen2": transformers.Qwen2ForCausalLM, "gpt2": transformers.GPT2LMHeadModel,
                 "qwen3": transformers.Qwen3ForCausalLM, "phi3": transformers.Phi3ForCausalLM,
                 "gemma2": transformers.Gemma2ForCausalLM, "gemma3": transformers.Gemma3ForCausalLM}[arch]
    kwargs = {**ARCHITECTURES[arch], "vocab_size": VOCAB, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
              "initializer_range": init_std, **overrides}
    if arch == "gemma2":  # eager attention applies the logit soft-cap; transformers 5.17's default (sdpa) did not
        kwargs.setdefault("attn_implementation", "eager")
    config = cls_config(**kwargs)
    torch.manual_seed(seed)
    model = cls_model(config).eval()
    with torch.no_grad():  # random norms and biases too, so a misplaced one cannot hide
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((1.0 if "weight" in name else 0.0) + 0.2 * torch.randn_like(p))
    return model


def make_image_text_gemma3(seed: int = 0):
    """A Gemma3ForConditionalGeneration with the tiny text tower and a one-layer vision tower."""
    import transformers

    text = {**ARCHITECTURES["gemma3"], "vocab_size": VOCAB, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID}
    vision = dict(hidden_size=32, intermediate_size=40, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    config = transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                       image_token_index=VOCAB - 1, boi_token_index=VOCAB - 3,
                                       eoi_token_index=VOCAB - 2)
    torch.manual_seed(seed)
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((1.0 if "weight" in name else 0.0) + 0.2 * torch.randn_like(p))
            elif "language_model" in name:
                p.normal_(0.0, 0.2)
    return model


def save_hf_model(model, folder: Path, **save_kwargs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True, **save_kwargs)
    write_tokenizer(folder)
    return folder


def build_decoder(folder: Path, backend):
    """The checkpoint in `folder` as a Decoder on `backend` (load_model chooses the backend itself)."""
    from inference.model.checkpoint import read_checkpoint
    from inference.store.loading import read_config
    from inference.model.decoder import Decoder
    from inference.model.weights import build_weights

    config, _ = read_config(folder)
    tensors, _ = read_checkpoint(folder, config)
    return Decoder(config, build_weights(config, tensors, backend), backend)


def with_linears(decoder, convert, backend):
    """A Decoder on `backend` with the same weights, every projection replaced by convert(projection)
    (an int8 head's product too; its float rows are kept)."""
    from dataclasses import replace

    from inference.model.decoder import Decoder, DecoderWeights
    from inference.model.quant import RescoredHead

    w = decoder.weights
    layers = [replace(layer, qkv=convert(layer.qkv), o=convert(layer.o), mlp_in=convert(layer.mlp_in),
                      mlp_out=convert(layer.mlp_out)) for layer in w.layers]
    head = w.lm_head
    head = RescoredHead(convert(head.linear), head.float_rows) if isinstance(head, RescoredHead) else convert(head)
    return Decoder(decoder.config, DecoderWeights(w.embed, w.pos_embed, layers, w.final_norm, head), backend)


def gain_and_row(x: torch.Tensor, alpha: float = 1.0, rms_eps: float = -1.0, norm_weight=None):
    """What a kernel product of one row x (1, K) multiplies, for the int8 kernels' references: its gain (alpha,
    times 1 / rms(x) when rms_eps >= 0) and the row (x, times an RMSNorm's weight when given)."""
    gain = alpha
    if rms_eps >= 0:
        gain = alpha / (x.double().pow(2).mean() + rms_eps).sqrt().item()
    return gain, (x[0] if norm_weight is None else x[0] * norm_weight)


def close(got: torch.Tensor, want: torch.Tensor, rel: float = 1e-5) -> bool:
    """got within rel of want's largest magnitude (plus 1e-6)."""
    return (got.double() - want).abs().max().item() <= rel * want.abs().max().item() + 1e-6


def fused_and_op_by_op(decoder, ids: torch.Tensor, prompt: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The decode logits of ids[prompt:] after a prefill of ids[:prompt], every layer in one decode_layers call,
    then each layer op by op (decoder.fused_decode off, then back on): (steps, V) each."""
    def decode(fused: bool) -> torch.Tensor:
        decoder.fused_decode = fused
        cache = decoder.new_cache(len(ids))
        with torch.inference_mode():
            decoder.forward(ids[:prompt], 0, cache)
            return torch.cat([decoder.forward(ids[i:i + 1], i, cache) for i in range(prompt, len(ids))])

    assert decoder.fused_decode
    try:
        return decode(True), decode(False)
    finally:
        decoder.fused_decode = True


def add_gguf_shape(writer, c) -> None:
    """The hyperparameters every GGUF writer here starts with, from a transformers config `c`."""
    writer.add_block_count(c.num_hidden_layers)
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
