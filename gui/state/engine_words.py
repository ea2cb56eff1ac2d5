"""The engine's sentences (inference.messages: a code and its values) in the app's language.

The table holds the English template of every code the engine can send, the same text as inference.messages.ENGLISH
(tests/gui/test_engine_messages.py keeps the two equal and complete), marked for lupdate under the context
"Engine"; `word` translates it and fills in the values with the chosen language's digits (i18n.number, i18n.size).
A code this table does not have (an engine newer than this GUI) is shown in the English the engine sent with it,
and a reply without a code (an error the engine has not coded: a malformed file's details, a bug) likewise: the
GUI never loses a sentence, at worst shows it in English."""

from __future__ import annotations

from inference.messages import Message, render

from gui.state import i18n
from gui.state.i18n import QT_TRANSLATE_NOOP, translate

# One entry per code of inference.messages.ENGLISH, its English text verbatim (placeholders and specs included).
WORDS = {
    "prompt.empty": QT_TRANSLATE_NOOP("Engine", "the prompt is empty: it must contain at least one token"),
    "prompt.too_long": QT_TRANSLATE_NOOP("Engine", "the prompt is {tokens:n} tokens but the context window holds {window:n}"),
    "prompt.too_long_for_limit": QT_TRANSLATE_NOOP("Engine", "the prompt is {tokens:n} tokens but the context window holds {window:n} (the context limit)"),
    "token.outside_vocab": QT_TRANSLATE_NOOP("Engine", "token id {id} is outside the vocabulary of {vocab:n}"),
    "force.empty": QT_TRANSLATE_NOOP("Engine", "the text to force is empty: it encodes to no tokens"),
    "session.prefill_first": QT_TRANSLATE_NOOP("Engine", "prefill the prompt first"),
    "session.prefill_before_rewind": QT_TRANSLATE_NOOP("Engine", "prefill the prompt before rewinding"),
    "session.prefill_before_step": QT_TRANSLATE_NOOP("Engine", "prefill the prompt before stepping"),
    "session.running": QT_TRANSLATE_NOOP("Engine", "a run is in progress: pause it first"),
    "session.ended": QT_TRANSLATE_NOOP("Engine", "generation ended ({reason}); rewind or reset to go on"),
    "session.max_new_tokens": QT_TRANSLATE_NOOP("Engine", "the max new tokens limit is reached; raise it, rewind or reset"),
    "rewind.out_of_range": QT_TRANSLATE_NOOP("Engine", "rewind {step} is outside the {steps} steps taken (1 to {steps})"),
    "context.shifted": QT_TRANSLATE_NOOP("Engine", "this move cannot follow a context shift: the context was shifted at step {step} (the oldest {dropped:n} tokens were dropped, drop-oldest); reset (re-reads the prompt) or prefill again first"),
    "settings.temperature": QT_TRANSLATE_NOOP("Engine", "temperature must be >= 0, got {value}"),
    "settings.top_k": QT_TRANSLATE_NOOP("Engine", "top-k must be >= 0 (0 = off), got {value}"),
    "settings.top_p": QT_TRANSLATE_NOOP("Engine", "top-p must be in (0, 1], got {value}"),
    "settings.min_p": QT_TRANSLATE_NOOP("Engine", "min-p must be in [0, 1], got {value}"),
    "settings.max_new_tokens": QT_TRANSLATE_NOOP("Engine", "max new tokens must be in [1, {high:n}], got {value}"),
    "settings.top_n": QT_TRANSLATE_NOOP("Engine", "top-n must be >= 1, got {value}"),
    "settings.speculate": QT_TRANSLATE_NOOP("Engine", "speculate must be in [0, {high}] draft tokens, got {value}"),
    "settings.context_limit": QT_TRANSLATE_NOOP("Engine", "the context limit must be 0 (the model's window) or >= {low:n} tokens, got {value}"),
    "settings.when_full": QT_TRANSLATE_NOOP("Engine", "when full must be one of {choices}, got {value}"),
    "settings.speculate_and_shift": QT_TRANSLATE_NOOP("Engine", "speculation and drop-oldest cannot be combined: turn one of them off"),
    "settings.empty_stop": QT_TRANSLATE_NOOP("Engine", "stop strings must not be empty"),
    "engine.no_model": QT_TRANSLATE_NOOP("Engine", "no model is loaded yet"),
    "serve.remote": QT_TRANSLATE_NOOP("Engine", "serving many requests needs the weights in this process, not a server's"),
    "serve.count": QT_TRANSLATE_NOOP("Engine", "serve 1 to {high} requests, not {count}"),
    "serve.pool": QT_TRANSLATE_NOOP("Engine", "a block holds 1 or more tokens and the pool 1 or more blocks, not {block_tokens} and {n_blocks}"),
    "serve.none": QT_TRANSLATE_NOOP("Engine", "no requests are being served: serve some first"),
    "serve.full": QT_TRANSLATE_NOOP("Engine", "a serve holds 1 to {high} requests; it has {count}"),
    "serve.finished": QT_TRANSLATE_NOOP("Engine", "every request has finished: add one or serve new ones"),
    "remote.needs_weights": QT_TRANSLATE_NOOP("Engine", "{what} needs the model's weights in this process; a remote server sends only its top-N log-probabilities{then}"),
    "remote.attention_view": QT_TRANSLATE_NOOP("Engine", "the attention view"),
    "remote.attention_capture": QT_TRANSLATE_NOOP("Engine", "attention capture"),
    "remote.lens": QT_TRANSLATE_NOOP("Engine", "the logit lens"),
    "remote.no_cache": QT_TRANSLATE_NOOP("Engine", "decoding without the KV cache, or recomputing attention,"),
    "remote.off_while": QT_TRANSLATE_NOOP("Engine", ": it is off while connected to {url}"),
    "remote.turn_view_off": QT_TRANSLATE_NOOP("Engine", ": turn the attention view off"),
    "remote.turn_off": QT_TRANSLATE_NOOP("Engine", ": turn it off"),
    "remote.url": QT_TRANSLATE_NOOP("Engine", " ({url})"),
    "remote.not_tokenizer": QT_TRANSLATE_NOOP("Engine", "{path}: not a tokenizer.json, a folder holding one, or a .gguf file"),
    "remote.no_tokenizer": QT_TRANSLATE_NOOP("Engine", "the {dialect} server does not offer a tokenizer readable here (model path {model_path}): name the served model's tokenizer.json (or its folder, or .gguf) with --tokenizer PATH"),
    "remote.not_reported": QT_TRANSLATE_NOOP("Engine", "not reported"),
    "remote.vocab": QT_TRANSLATE_NOOP("Engine", "the {dialect} server's tokenizer has {theirs} tokens, the local one ({source}) {ours}: not the same tokenizer"),
    "remote.split": QT_TRANSLATE_NOOP("Engine", "the {dialect} server's tokenizer splits a probe text differently from the local one ({source}): token {at} is {theirs} there, {ours} here"),
    "remote.lacks": QT_TRANSLATE_NOOP("Engine", "the {dialect} server's tokenizer has {kind} {text!r}, which the local tokenizer lacks"),
    "remote.eos": QT_TRANSLATE_NOOP("Engine", "the {dialect} server's tokenizer: EOS id {id} is outside the vocabulary of {vocab}"),
    "batch.budget": QT_TRANSLATE_NOOP("Engine", "the token budget must be >= 1 and the batch 1 to {high} requests, got {budget} and {running}"),
    "batch.plain": QT_TRANSLATE_NOOP("Engine", "request {request}: a batched request neither speculates nor shifts its context"),
    "batch.prompt": QT_TRANSLATE_NOOP("Engine", "request {request}: the prompt must have 1 to {window} tokens"),
    "batch.vocab": QT_TRANSLATE_NOOP("Engine", "request {request}: a token id is outside the vocabulary of {vocab}"),
    "batch.blocks": QT_TRANSLATE_NOOP("Engine", "request {request} may need {needed} blocks; the pool has {pool}"),
    "batch.remote": QT_TRANSLATE_NOOP("Engine", "the batch curve needs the weights in this process, not a server's"),
    "batch.sizes": QT_TRANSLATE_NOOP("Engine", "batch sizes are 1 to 16 requests, and 1 to 64 steps are timed per size"),
    "load.no_cuda": QT_TRANSLATE_NOOP("Engine", "CUDA was asked for but no CUDA device is available"),
    "load.dtype": QT_TRANSLATE_NOOP("Engine", "unknown dtype {dtype!r} (choose from {choices})"),
    "load.no_model": QT_TRANSLATE_NOOP("Engine", "no model given (an empty --model)"),
    "load.missing": QT_TRANSLATE_NOOP("Engine", "{path}: no such file or folder"),
    "load.not_model": QT_TRANSLATE_NOOP("Engine", "{path}: expected a model folder or a .gguf file"),
    "load.no_config": QT_TRANSLATE_NOOP("Engine", "{path}: no config.json"),
    "load.unreadable": QT_TRANSLATE_NOOP("Engine", "{path}: cannot be read ({why})"),
    "load.not_json": QT_TRANSLATE_NOOP("Engine", "{path}: not valid JSON ({why})"),
    "load.not_object": QT_TRANSLATE_NOOP("Engine", "{path}: expected a JSON object"),
    "load.vocab": QT_TRANSLATE_NOOP("Engine", "{path}: tokenizer has {tokenizer:n} tokens but the model only {model:n}"),
    "load.architecture": QT_TRANSLATE_NOOP("Engine", "{path}: unsupported architecture {architecture!r}{supported}"),
    "load.supported": QT_TRANSLATE_NOOP("Engine", " (supported: {names})"),
    "memory.kv": QT_TRANSLATE_NOOP("Engine", "Not enough memory for a KV cache of {positions:,} positions: it needs {needed:bytes} but only {available:bytes} is available. Ask for fewer new tokens or a shorter prompt."),
    "memory.refusal": QT_TRANSLATE_NOOP("Engine", "Not enough memory for {model} at {dtype}: loading needs about {needed:bytes} (weights {weights:bytes}, read as float32 first{converting}; {kv}) but only {available:bytes} is available. Close other programs or choose a smaller model."),
    "memory.summary": QT_TRANSLATE_NOOP("Engine", "weights {weights:bytes} at {dtype}, about {needed:bytes} needed while loading{converting}; {kv}; {free}"),
    "memory.converting": QT_TRANSLATE_NOOP("Engine", " (converting the GGUF first)"),
    "memory.after_converting": QT_TRANSLATE_NOOP("Engine", ", after converting the GGUF"),
    "memory.kv_cache": QT_TRANSLATE_NOOP("Engine", "KV cache {kv:bytes} for {tokens:,} tokens"),
    "memory.kv_unknown": QT_TRANSLATE_NOOP("Engine", "KV cache not known"),
    "memory.free": QT_TRANSLATE_NOOP("Engine", "free RAM {available:bytes}"),
    "memory.free_unknown": QT_TRANSLATE_NOOP("Engine", "free RAM unknown"),
    "catalog.gone": QT_TRANSLATE_NOOP("Engine", "no longer there (moved or deleted?)"),
    "catalog.not_model": QT_TRANSLATE_NOOP("Engine", "not a model folder or a .gguf file"),
    "catalog.no_snapshot": QT_TRANSLATE_NOOP("Engine", "no snapshot downloaded"),
    "catalog.damaged": QT_TRANSLATE_NOOP("Engine", "damaged in the Hugging Face cache ({detail})"),
    "catalog.damaged_unread": QT_TRANSLATE_NOOP("Engine", "damaged in the Hugging Face cache (its scan could not read it)"),
    "catalog.unreadable": QT_TRANSLATE_NOOP("Engine", "could not be read ({error}: {text})"),
    "catalog.file_problem": QT_TRANSLATE_NOOP("Engine", "{file}: {problem}"),
    "catalog.config_broken_link": QT_TRANSLATE_NOOP("Engine", "config.json is a broken link (an incomplete download?)"),
    "catalog.no_config": QT_TRANSLATE_NOOP("Engine", "no config.json"),
    "catalog.config_unreadable": QT_TRANSLATE_NOOP("Engine", "config.json cannot be read ({why})"),
    "catalog.config_not_json": QT_TRANSLATE_NOOP("Engine", "config.json is not valid JSON"),
    "catalog.config_not_object": QT_TRANSLATE_NOOP("Engine", "config.json is not a JSON object"),
    "catalog.shard_missing": QT_TRANSLATE_NOOP("Engine", "incomplete download: {file} is missing"),
    "catalog.shards_missing": QT_TRANSLATE_NOOP("Engine", "incomplete download: {file} is missing (and {more:n} more shards)"),
    "catalog.weights_broken_link": QT_TRANSLATE_NOOP("Engine", "incomplete download: model.safetensors is a broken link"),
    "catalog.pickle_only": QT_TRANSLATE_NOOP("Engine", "pickle weights only (.bin/.pt); TokenStep reads safetensors only"),
    "catalog.no_weights": QT_TRANSLATE_NOOP("Engine", "no weights (model.safetensors)"),
    "catalog.quantised_weights": QT_TRANSLATE_NOOP("Engine", "quantised weights ({dtypes} tensors); TokenStep reads float weights only"),
    "catalog.quantised_checkpoint": QT_TRANSLATE_NOOP("Engine", "quantised checkpoint; TokenStep reads float weights only"),
    "catalog.quantised_method": QT_TRANSLATE_NOOP("Engine", "quantised checkpoint ({method}); TokenStep reads float weights only"),
    "catalog.no_tokenizer": QT_TRANSLATE_NOOP("Engine", "no tokenizer.json (the fast-tokenizer file is required)"),
    "catalog.architecture": QT_TRANSLATE_NOOP("Engine", "unsupported architecture {architecture!r}{supported}"),
    "catalog.gguf_split": QT_TRANSLATE_NOOP("Engine", "a GGUF split in {parts} parts: join them first (llama-gguf-split --merge)"),
    "catalog.gguf_no_architecture": QT_TRANSLATE_NOOP("Engine", "no general.architecture in the GGUF metadata"),
    "catalog.gguf_architecture": QT_TRANSLATE_NOOP("Engine", "GGUF architecture {architecture!r} is not supported{supported}"),
    "script.action": QT_TRANSLATE_NOOP("Engine", "action {index} (\"{kind}\"): {problem}"),
    "script.settings": QT_TRANSLATE_NOOP("Engine", "script settings: {problem}"),
    "script.in_file": QT_TRANSLATE_NOOP("Engine", "{file}: {problem}"),
    "script.no_file": QT_TRANSLATE_NOOP("Engine", "{file}: no such file"),
    "script.not_file": QT_TRANSLATE_NOOP("Engine", "{file}: not a regular file"),
    "script.not_utf8": QT_TRANSLATE_NOOP("Engine", "{file}: not UTF-8 text"),
    "script.file_unreadable": QT_TRANSLATE_NOOP("Engine", "{file}: cannot be read ({why})"),
    "script.not_json": QT_TRANSLATE_NOOP("Engine", "not valid JSON (line {line}, column {column}: {why})"),
    "script.nested": QT_TRANSLATE_NOOP("Engine", "JSON nested too deeply"),
    "script.unknown_action": QT_TRANSLATE_NOOP("Engine", "action {index}: unknown action \"{kind}\" (known: {known})"),
    "script.no_prompt": QT_TRANSLATE_NOOP("Engine", "the script has no \"prompt\" (or \"prompt_ids\") to read"),
    "script.not_served": QT_TRANSLATE_NOOP("Engine", "no requests are being served: put a {{\"serve\": {{\"requests\": [...]}}}} before it"),
    "script.not_a_request": QT_TRANSLATE_NOOP("Engine", "request {request} is not one of the {served} served"),
    "script.not_prefilled": QT_TRANSLATE_NOOP("Engine", "the prompt has not been read yet: put {{\"prefill\": true}} before it"),
    "script.rewind_past": QT_TRANSLATE_NOOP("Engine", "rewind {step} is past the {steps} steps taken so far"),
    "script.script": QT_TRANSLATE_NOOP("Engine", "script"),
    "script.request": QT_TRANSLATE_NOOP("Engine", "request {index}"),
    "script.the_request": QT_TRANSLATE_NOOP("Engine", "the request"),
    "script.in_place": QT_TRANSLATE_NOOP("Engine", "{where}: {problem}"),
    "script.unknown_key": QT_TRANSLATE_NOOP("Engine", "unknown key \"{key}\" (known: {known})"),
    "script.unknown_setting": QT_TRANSLATE_NOOP("Engine", "unknown setting \"{key}\" (known: {known})"),
    "script.key": QT_TRANSLATE_NOOP("Engine", "{where}: \"{key}\" must be {kind}"),
    "script.key_got": QT_TRANSLATE_NOOP("Engine", "{where}: \"{key}\" must be {kind}, got {value}"),
    "script.a_bool": QT_TRANSLATE_NOOP("Engine", "true or false"),
    "script.a_text": QT_TRANSLATE_NOOP("Engine", "a text"),
    "script.a_text_or_null": QT_TRANSLATE_NOOP("Engine", "a text or null"),
    "script.a_list": QT_TRANSLATE_NOOP("Engine", "a non-empty list"),
    "script.a_list_of_ids": QT_TRANSLATE_NOOP("Engine", "a non-empty list of token ids"),
    "script.a_step_number": QT_TRANSLATE_NOOP("Engine", "a whole number in [0, {high}]"),
    "script.settings_object": QT_TRANSLATE_NOOP("Engine", "settings must be an object like {{\"temperature\": 0.7}}, got {value}"),
    "script.settings_of": QT_TRANSLATE_NOOP("Engine", "{where} settings: {problem}"),
    "script.when_full": QT_TRANSLATE_NOOP("Engine", "when_full must be \"stop\" or \"drop-oldest\", got {value}"),
    "script.greedy": QT_TRANSLATE_NOOP("Engine", "greedy must be true or false, got {value}"),
    "script.stop": QT_TRANSLATE_NOOP("Engine", "stop must be a list of non-empty strings, got {value}"),
    "script.too_big": QT_TRANSLATE_NOOP("Engine", "{file}: {size:,.0f} MB is more than a script or trace TokenStep reads ({limit} MB)"),
    "script.marker": QT_TRANSLATE_NOOP("Engine", "write {{\"{kind}\": true}}, got {value}"),
    "script.added_arrival": QT_TRANSLATE_NOOP("Engine", "an added request joins at the next scheduler step: leave out \"arrive_at_step\""),
    "script.request_object": QT_TRANSLATE_NOOP("Engine", "{where}: a request is an object like {{\"prompt\": \"Hello\"}}"),
    "script.request_no_prompt": QT_TRANSLATE_NOOP("Engine", "{where}: it has no \"prompt\" (or \"prompt_ids\")"),
    "script.ids_and_chat": QT_TRANSLATE_NOOP("Engine", "{where}: \"prompt_ids\" are the exact ids read: \"chat\" cannot apply to them"),
    "script.serve_object": QT_TRANSLATE_NOOP("Engine", "serve takes an object like {{\"requests\": [{{\"prompt\": \"Hello\"}}]}}, got {value}"),
    "script.serve_requests": QT_TRANSLATE_NOOP("Engine", "\"requests\" must be a list of 1 to {high} requests"),
    "script.not_a_script": QT_TRANSLATE_NOOP("Engine", "script: a lesson script is a JSON object with \"actions\", got {value}"),
    "script.action_object": QT_TRANSLATE_NOOP("Engine", "action {index}: an action is an object like {{\"step\": 3}}, got {value}"),
    "script.one_action": QT_TRANSLATE_NOOP("Engine", "action {index}: one action per object, got {keys}"),
    "script.requests_list": QT_TRANSLATE_NOOP("Engine", "the requests must be a non-empty JSON list like [{{\"prompt\": \"Hello\"}}]"),
    "script.requests_many": QT_TRANSLATE_NOOP("Engine", "{count} requests are more than a batch trace takes ({high})"),
    "trace.not_json": QT_TRANSLATE_NOOP("Engine", "trace line {line}: not valid JSON"),
    "trace.not_event": QT_TRANSLATE_NOOP("Engine", "trace line {line}: not an event (an object with a \"type\")"),
    "trace.out_of_range": QT_TRANSLATE_NOOP("Engine", "trace line {line}: a \"{type}\" event with a number out of range"),
    "trace.line": QT_TRANSLATE_NOOP("Engine", "trace line {line}: {problem}"),
    "trace.invalid": QT_TRANSLATE_NOOP("Engine", "trace line {line}: a \"{type}\" event without a valid {field}"),
    "trace.second_prompt": QT_TRANSLATE_NOOP("Engine", "the trace reads a second, different prompt: a script reads one"),
    "trace.step_first": QT_TRANSLATE_NOOP("Engine", "a step before the prompt was read"),
    "trace.gap": QT_TRANSLATE_NOOP("Engine", "step {step} follows step {previous}: the trace is incomplete"),
    "trace.no_prefill": QT_TRANSLATE_NOOP("Engine", "the trace has no prefill event: there is no prompt to replay"),
    "script.whole_number": QT_TRANSLATE_NOOP("Engine", "{what} must be a whole number, got {value}"),
    "script.at_least": QT_TRANSLATE_NOOP("Engine", "{what} must be >= {low}, got {value}"),
    "script.in_range": QT_TRANSLATE_NOOP("Engine", "{what} must be in [{low}, {high}], got {value}"),
    "script.number": QT_TRANSLATE_NOOP("Engine", "{what} must be a number, got {value}"),
    "script.force": QT_TRANSLATE_NOOP("Engine", "force takes a token id (>= 0) or a non-empty text, got {value}"),
    "script.caption": QT_TRANSLATE_NOOP("Engine", "caption must be a text, got {value}"),
}


def _number(value: float, spec: str) -> str:
    """A number of a message in the app's locale: a count grouped, `.Nf` with N decimals."""
    if spec.endswith("f") and spec[:-1].lstrip(",").startswith("."):
        return i18n.number(value, int(spec[:-1].lstrip(",")[1:]))
    return i18n.number(value) if spec in ("n", ",") else format(value, spec)


def _word(message: Message) -> str:
    template = translate("Engine", WORDS[message.code]) if message.code in WORDS else None
    if template is None:
        return str(message)  # a code from a newer engine: its English
    return render(template, message.values, number=_number, size=i18n.size, word=_word)


def word(message: Message | None, english: str) -> str:
    """What the engine said, in the app's language; `english` (the line it sent) where there is no code or the
    code is not in WORDS (nothing is lost)."""
    if message is None or message.code not in WORDS:
        return english
    return _word(message)
