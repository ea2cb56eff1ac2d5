"""A tiny HF Llama written as a GGUF the way llama.cpp's converter writes one (its Q/K rows permuted for its rotary
layout), for the GGUF import tests, the picker's and the hostile-input corpus."""

import json

import gguf
import numpy as np

from tiny import BOS_ID, EOS_ID, add_gguf_shape


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of Q/K rows (the inverse of what we undo)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(hf, folder, path, quantize_embeddings=False):
    c = hf.config
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    specials = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    tokens = [None] * c.vocab_size
    for text, i in {**vocab, **specials}.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens]
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i], types[i] = f"[PAD{i}]", gguf.TokenType.UNUSED
    w = gguf.GGUFWriter(str(path), "llama")
    add_gguf_shape(w, c)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tokenizer["model"]["merges"]])
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                 "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                 "mlp.down_proj.weight": "ffn_down.weight"}
    for name, p in hf.state_dict().items():
        array = p.detach().float().numpy().copy()
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            gname = f"blk.{i}.{per_layer[rest]}"
            if rest == "self_attn.q_proj.weight":
                array = llama_cpp_permute(array, c.num_attention_heads)
            elif rest == "self_attn.k_proj.weight":
                array = llama_cpp_permute(array, c.num_key_value_heads)
        else:
            gname = names[name]
        if gname == "token_embd.weight" and quantize_embeddings:
            w.add_tensor(gname, gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(gname, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
