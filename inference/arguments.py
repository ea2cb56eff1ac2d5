"""The command line's options that the app (gui/app.py) and `main.py trace` (cli.py) share, with the same
meaning in both: --model/--tokenizer/--device/--dtype, --prompt/--chat/--system, and the checked number and
text types. Nothing here loads a model, so the GUI process imports it without torch."""

from __future__ import annotations

import argparse
from urllib.parse import urlencode

from inference.settings import DEVICE_CHOICES, DTYPE_CHOICES


def number(kind, low=None, high=None, low_open=False, what="value"):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a {kind.__name__}, got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or \
                (low is not None and (value <= low if low_open else value < low)) or \
                (high is not None and value > high):
            bounds = f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf)'}"
            bounds += "]" if high is not None else ""
            raise argparse.ArgumentTypeError(f"{what} must be in {bounds}, got {text}")
        return value
    return parse


DEFAULT_PROMPT = "The capital of France is"


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --device, --dtype: the same options, with the same meaning, in the app and in `trace`."""
    parser.add_argument("--model", default="default", help="'default' (SmolLM2-135M-Instruct), an HF "
                        "folder, a .gguf file, or an inference server http://HOST:PORT (llama.cpp, vLLM, SGLang)")
    parser.add_argument("--tokenizer", default=None, metavar="PATH", help="with a server: the served "
                        "model's tokenizer.json (or its folder, or .gguf), when the server's is not readable here")
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default="auto",
                        help="auto = float32 on CPU, bfloat16 on CUDA; int8 = int8 weights with a scale per "
                        "64 weights, float32 activations and KV cache")


def utf8_text(what: str):
    """An argparse type for text options: argv that is not valid UTF-8 (decoded by Python with surrogate
    escapes) is a usage error naming the option, not a crash in the tokenizer."""
    def parse(text: str) -> str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise argparse.ArgumentTypeError(f"{what} is not valid UTF-8") from None
        return text
    return parse


def model_spec(args) -> str:
    """--model as one string the app's engine can load: a server's --tokenizer rides along as
    `#tokenizer=PATH` (store/remote_model.split_spec)."""
    tokenizer = getattr(args, "tokenizer", None)
    if tokenizer and str(args.model).startswith(("http://", "https://")):
        return f"{args.model}#{urlencode({'tokenizer': tokenizer})}"
    return args.model


def add_prompt_arguments(parser: argparse.ArgumentParser, prompt_default: str | None) -> None:
    """--prompt, --chat, --system: shared by the app and `trace`."""
    parser.add_argument("--prompt", default=prompt_default, type=utf8_text("--prompt"), help="the prompt to read")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    parser.add_argument("--system", default="", type=utf8_text("--system"), help="system prompt (chat mode)")
