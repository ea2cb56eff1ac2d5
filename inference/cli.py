"""`main.py trace` (the event stream as JSON Lines on stdout) and `main.py download`.

No Qt is imported on these paths. Logs and progress go to stderr; an error is one line on stderr and a
non-zero exit (2 for bad arguments or a bad lesson script, 1 for a model or prompt that cannot be used);
`--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from itertools import chain

from inference import cache_dir
from inference.arguments import DEFAULT_PROMPT, add_model_arguments, add_prompt_arguments, number, utf8_text
from inference.errors import is_expected, one_line
from inference.events import SettingsEvent
from inference.kernels import ops_reporting
from inference.lessons.lesson import play
from inference.lessons.requests import MAX_REQUESTS, batch_requests, copies, load_requests
from inference.lessons.script import ScriptError
from inference.lessons.trace import TraceWriter, load_script
from inference.progress import StderrProgress
from inference.session.batch import MAX_RUNNING, TOKEN_BUDGET, Scheduler, blocks_for_all
from inference.session.paged_cache import BLOCK_TOKENS
from inference.session.session import Session, prompt_ids
from inference.settings import MAX_NEW_TOKENS, GenerationSettings
from inference.store.default_model import ensure_default_model
from inference.store.loading import load_model
from inference.store.remote_model import one_thread


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="TokenStep: watch a language model "
                                     "write one token at a time.")
    sub = parser.add_subparsers(dest="command", required=True)
    trace = sub.add_parser("trace", help="run one generation headless and print its events as JSON Lines")
    add_model_arguments(trace)
    add_prompt_arguments(trace, DEFAULT_PROMPT)
    trace.add_argument("--prefill-dtype", choices=("float32", "bfloat16"), default="float32",
                       help="bfloat16: a float32 model's long forwards (prompts of 18+ tokens) multiply in "
                       "bfloat16, decode stays float32; needs avx512_bf16 or amx_bf16 (not on by default: "
                       "benchmarks/RESULTS.md)")
    trace.add_argument("--max-new-tokens", type=number(int, 1, MAX_NEW_TOKENS, what="--max-new-tokens"), default=32)
    trace.add_argument("--greedy", action="store_true", help="always take the most likely token")
    trace.add_argument("--temperature", type=number(float, 0, what="--temperature"), default=None,
                       help="0 means greedy (default: the model's generation_config, else 1.0)")
    trace.add_argument("--top-k", type=number(int, 0, what="--top-k"), default=None, help="0 = off")
    trace.add_argument("--top-p", type=number(float, 0, 1, low_open=True, what="--top-p"), default=None)
    trace.add_argument("--min-p", type=number(float, 0, 1, what="--min-p"), default=None)
    trace.add_argument("--seed", type=number(int, 0, what="--seed"), default=0)
    trace.add_argument("--stop", action="append", default=[], metavar="TEXT", type=utf8_text("--stop"),
                       help="stop when the generated text contains TEXT (repeatable)")
    trace.add_argument("--speculate", type=number(int, 0, 16, what="--speculate"), default=0, metavar="N",
                       help="draft up to N tokens by prompt lookup and verify them in one forward pass (0 = off); each "
                            "pass drafts the length expected to pay (see the verify events' draft_max, acceptance, "
                            "expected_tokens, expected_cost, step_ms)")
    trace.add_argument("--context-limit", type=number(int, 0, what="--context-limit"), default=0, metavar="N",
                       help="run in a context window of N tokens (0 = the model's own; at least 4)")
    trace.add_argument("--when-full", choices=("stop", "drop-oldest"), default="stop",
                       help="when the window is full: stop (context_full), or drop the oldest half after the "
                       "first token and re-read the rest in one pass (a context_shift line)")
    trace.add_argument("--no-kv-cache", action="store_true",
                       help="keep no KV cache: every step re-reads the whole prefix (same logits, growing cost)")
    trace.add_argument("--top-n", type=number(int, 1, what="--top-n"), default=20,
                       help="candidates reported per step")
    trace.add_argument("--logit-lens", action="store_true", help="each step also reports, after every "
                       "layer, the top tokens (--top-n) and p of the chosen one through the final norm and head")
    trace.add_argument("--script", metavar="FILE", help="play a lesson script (JSON), or replay a trace "
                       "(.jsonl): its prompt and settings take the place of the options above")
    _add_batch_arguments(trace)
    trace.add_argument("--debug", action="store_true", help="show tracebacks")
    download = sub.add_parser("download", help="fetch and convert the default model; print its folder")
    download.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _add_batch_arguments(trace: argparse.ArgumentParser) -> None:
    batch = trace.add_argument_group("many requests at once (continuous batching over a paged KV cache)")
    batch.add_argument("--requests", metavar="FILE", help="serve the requests of a JSON list together: each "
                       '{"prompt", "chat", "system", "settings", "arrive_at_step"} (settings over the options '
                       "above); every prefill/step/stop line carries its `request`, with schedule, blocks and "
                       "request_done lines")
    batch.add_argument("--batch", type=number(int, 1, MAX_REQUESTS, what="--batch"), default=0, metavar="N",
                       help="serve N copies of --prompt together, with seeds --seed .. --seed + N - 1")
    batch.add_argument("--block-tokens", type=number(int, 1, 4096, what="--block-tokens"), default=BLOCK_TOKENS,
                       metavar="B", help=f"positions per KV block (default {BLOCK_TOKENS})")
    batch.add_argument("--pool-blocks", type=number(int, 1, what="--pool-blocks"), default=0, metavar="N",
                       help="blocks in the KV pool (default: enough for every request at once; fewer makes "
                       "requests wait for blocks)")
    batch.add_argument("--token-budget", type=number(int, 1, what="--token-budget"), default=TOKEN_BUDGET,
                       metavar="N", help="rows per forward pass: decode tokens first, prompt chunks share the "
                       f"rest (default {TOKEN_BUDGET})")
    batch.add_argument("--max-running", type=number(int, 1, MAX_RUNNING, what="--max-running"),
                       default=MAX_RUNNING, metavar="N", help=f"requests decoded together (default {MAX_RUNNING})")


def _batch_conflict(args) -> str | None:
    """Why the batch options cannot be taken as given (None: they can)."""
    if not (args.requests or args.batch):
        return None
    if args.requests and args.batch:
        return "--requests and --batch cannot be combined: a file lists its requests"
    given = [name for name, on in (("--script", args.script), ("--speculate", args.speculate),
                                   ("--when-full drop-oldest", args.when_full != "stop"),
                                   ("--no-kv-cache", args.no_kv_cache), ("--logit-lens", args.logit_lens),
                                   ("--prefill-dtype bfloat16", args.prefill_dtype != "float32")) if on]
    return f"{given[0]} cannot be combined with --requests or --batch" if given else None


def _load(args):
    progress = StderrProgress()  # one line per stage on stderr, then how long it all took
    model = load_model(args.model, device=args.device, dtype=args.dtype, progress=progress,
                       tokenizer=args.tokenizer, prefill_dtype=args.prefill_dtype)
    progress.ready(f"{model.info().name} ready")
    return model


def _settings(args, model) -> GenerationSettings:
    """The settings the options ask for, over the model's defaults."""
    asked = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "min_p": args.min_p}
    asked = {k: v for k, v in asked.items() if v is not None}
    # A model whose generation_config says do_sample=false is greedy unless sampling is asked for.
    sampler = replace(model.defaults, **asked, greedy=args.greedy or (model.defaults.greedy and not asked))
    settings = GenerationSettings(sampler=sampler, max_new_tokens=args.max_new_tokens,
                                  stop_strings=tuple(args.stop), seed=args.seed, top_n=args.top_n,
                                  speculate=args.speculate, context_limit=args.context_limit,
                                  when_full=args.when_full).validate()
    return settings


def _trace(args) -> int:
    if args.requests or args.batch:
        return _trace_batch(args)
    script = load_script(args.script) if args.script else None  # a bad script fails before the model loads
    model = _load(args)
    if model.remote:  # a server's model: this process only draws
        one_thread()
    settings = _settings(args, model)
    session = Session(model, settings, capture_lens=args.logit_lens)
    session.use_kv_cache(not args.no_kv_cache)
    if script is not None:
        events = play(session, model, script)
    else:
        ids, text = prompt_ids(model, args.prompt, chat=args.chat, system=args.system or None)
        events = chain([SettingsEvent(settings)], session.generate(ids, text))
    writer = TraceWriter()
    print(model.info().to_json(), flush=True)
    for event in events:  # each line whole and flushed: an error ends the trace between two lines
        for line in writer.lines(event):
            print(line, flush=True)
    return 0


def _trace_batch(args) -> int:
    """--requests / --batch: the scheduler's events, each request's settings first (with its `request`)."""
    specs = load_requests(args.requests) if args.requests else None  # a bad file fails before the model loads
    model = _load(args)
    if model.remote:
        raise ValueError("a batch runs on a model in this process; a server batches its requests itself")
    settings = _settings(args, model)
    if specs is not None:
        asked = batch_requests(model, specs, settings)
    else:
        asked = copies(prompt_ids(model, args.prompt, chat=args.chat, system=args.system or None)[0], settings,
                       args.batch)
    scheduler = Scheduler(model, asked, args.pool_blocks or blocks_for_all(model, asked, args.block_tokens),
                          args.block_tokens, args.token_budget, args.max_running)
    print(model.info().to_json(), flush=True)
    for index, request in enumerate(asked):
        print(SettingsEvent(request.settings, request=index).to_json(), flush=True)
    for event in scheduler.run():
        print(event.to_json(), flush=True)
    return 0


def _download(args) -> int:
    progress = StderrProgress()
    folder = ensure_default_model(progress)
    ops_reporting(progress)  # the decode kernels too, so that the app's first start has nothing left to build
    progress.ready("default model ready")
    print(folder)
    return 0


def main(argv: list[str] | None = None) -> int:
    cache_dir.exit_on_sigterm()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "trace" and any(not s for s in args.stop):
        parser.error("--stop must not be empty")
    if args.command == "trace" and (0 < args.context_limit < 4 or (args.speculate and args.when_full != "stop")):
        parser.error("--context-limit must be 0 or >= 4" if args.context_limit < 4
                     else "--speculate cannot be combined with --when-full drop-oldest")
    if args.command == "trace" and _batch_conflict(args):
        parser.error(_batch_conflict(args))
    try:
        return _trace(args) if args.command == "trace" else _download(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (e.g. `| head`)
        return 0
    except Exception as e:
        if args.debug:
            raise
        print(f"error: {one_line(e)}" if is_expected(e) else f"internal error ({one_line(e)})", file=sys.stderr)
        return 2 if isinstance(e, ScriptError) else 1
