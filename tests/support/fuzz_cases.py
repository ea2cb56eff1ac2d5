"""The corpus of hostile inputs fuzz_corpus.py runs through `main.py trace`: each case writes its files
into its own folder and gives the command line and the names its error line must mention (the file, the
folder or the option). Deterministic: a seeded sample of the mutations in fuzz_mutations.py, plus
hand-written tokenizer, chat-template and command-line cases."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import fuzz_mutations as fm

PROMPT = "the thin tin " + "a" * 40 + "!"
# What an error about a model folder may name: one of its files (or the folder, above), or the prompt
# (--prompt) the model cannot take.
FILES = ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
         "prompt")


@dataclass(frozen=True)
class Case:
    kind: str  # gguf, safetensors, config, tokenizer, template, cli, index
    label: str
    setup: Callable[[Path], tuple[list[str], tuple[str, ...]]]  # case folder -> (argv, names)


def _trace(model: str, *extra: str) -> list[str]:
    return ["trace", "--model", model, "--max-new-tokens", "2", "--device", "cpu", "--prompt", PROMPT, *extra]


def _folder_case(kind: str, label: str, good: Path, edit: Callable[[Path], None], *extra: str) -> Case:
    def setup(where: Path):
        model = Path(shutil.copytree(good, where / "model"))
        edit(model)
        return _trace(str(model), *extra), (str(model), *FILES)

    return Case(kind, label, setup)


def gguf_cases(data: bytes, rng: random.Random, n: int) -> list[Case]:
    spots = fm.gguf_fields(data)
    every = [(spot, value) for spot in spots for value in fm.HOSTILE[spot.fmt]]
    chosen = rng.sample(every, min(n - 20, len(every)))
    mutants = [(f"{spot.what} = {value!r}", fm.overwrite(data, spot, value)) for spot, value in chosen]
    mutants += [(f"truncated at {k / 20:.2f}", fm.truncate(data, k / 20)) for k in range(20)]

    def case(label: str, mutated: bytes) -> Case:
        def setup(where: Path):
            path = where / "mutant.gguf"
            path.write_bytes(mutated)
            return _trace(str(path)), (path.name, "mutant-", "prompt")  # converted folder: mutant-<hash>

        return Case("gguf", label, setup)

    return [case(label, mutated) for label, mutated in mutants]


def safetensors_cases(good: Path) -> list[Case]:
    data = (good / "model.safetensors").read_bytes()
    mutants = [(f"{field}={value!r} on tensor {i}", fm.mutate_safetensors(data, i, field, value))
               for field, values in fm.SAFETENSORS_FIELDS.items() for value in values for i in (0, 7)]
    mutants += [(f"header length {n}", fm.safetensors_length(data, n))
                for n in (0, 1, 7, 2**31, 2**63, 2**64 - 1, len(data))]
    mutants += [(f"{v} in tensor {i}", fm.poison_safetensors(data, i, v))
                for v in (math.nan, math.inf, -math.inf) for i in (0, 3)]
    mutants += [(f"truncated at {k / 10:.1f}", fm.truncate(data, k / 10)) for k in range(10)]

    def edit(mutated: bytes):
        return lambda model: (model / "model.safetensors").write_bytes(mutated)

    return [_folder_case("safetensors", label, good, edit(m)) for label, m in mutants]


def config_cases(good: Path, rng: random.Random, n: int) -> list[Case]:
    text = (good / "config.json").read_text()
    every = [(key, value) for key in fm.CONFIG_KEYS for value in fm.CONFIG_VALUES]
    files = [("deeply nested", fm.deep_json().encode()), ("a list", b"[1, 2]"), ("cut", b'{"hidden_size": 6'),
             ("invalid UTF-8", b'{"model_type": "\xff"}'), ("empty", b""), ("null", b"null")]

    def edit(raw: bytes):
        return lambda model: (model / "config.json").write_bytes(raw)

    cases = [_folder_case("config", f"{key} = {value!r}"[:80], good,
                          edit(fm.mutate_config(text, key, value).encode()))
             for key, value in rng.sample(every, n - len(files))]
    return cases + [_folder_case("config", label, good, edit(raw)) for label, raw in files]


def _tokenizer_edits() -> list[tuple[str, Callable[[dict], object]]]:
    def split(pattern):
        return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}

    def model(key, value):
        return lambda t: t["model"].__setitem__(key, value)

    return [
        ("empty vocab", model("vocab", {})), ("vocab ids all 0", lambda t: t["model"].__setitem__(
            "vocab", {k: 0 for k in t["model"]["vocab"]})),
        ("merges ['a']", model("merges", ["a"])), ("merges of unknown tokens", model("merges", [["x1", "y1"]])),
        ("merges [1, 2]", model("merges", [1, 2])), ("merges a string", model("merges", "garbage")),
        ("merges repeated", model("merges", [["Ġ", "t"]] * 3)), ("model null", lambda t: t.__setitem__("model", None)),
        ("model WordPiece", lambda t: t.__setitem__("model", {"type": "WordPiece"})),
        ("added id 10^12", lambda t: t.__setitem__("added_tokens", [{"id": 10**12, "content": "x", "special": True}])),
        ("added id -1", lambda t: t.__setitem__("added_tokens", [{"id": -1, "content": "x"}])),
        ("added ['x']", lambda t: t.__setitem__("added_tokens", ["x"])),
        ("decoder Nope", lambda t: t.__setitem__("decoder", {"type": "Nope"})),
        *[(f"split {p}", (lambda p: lambda t: t.__setitem__("pre_tokenizer", split(p)))(p))
          for p in ("(a+)+b", r"(\w+\s?)+$", "(", "(.*a){30}", "((a|a)+)+$", r"(a|aa)+$", r"([a-z]+)*!")],
        ("normalizer regex", lambda t: t.__setitem__("normalizer", {"type": "Replace", "pattern": {"Regex": "(a+)+b"},
                                                                    "content": "x"})),
    ]


def tokenizer_cases(good: Path) -> list[Case]:
    tok = json.loads((good / "tokenizer.json").read_text())

    def edit(change):
        def apply(model: Path):
            t = json.loads(json.dumps(tok))
            change(t)
            (model / "tokenizer.json").write_text(json.dumps(t))
        return apply

    cases = [_folder_case("tokenizer", label, good, edit(change)) for label, change in _tokenizer_edits()]
    for label, raw in (("deeply nested", fm.deep_json().encode()), ("cut", json.dumps(tok).encode()[:500]),
                       ("null", b"null"), ("invalid UTF-8", b'{"\xff": 1}')):
        cases.append(_folder_case("tokenizer", label, good, (lambda raw: lambda m: (m / "tokenizer.json")
                                                             .write_bytes(raw))(raw)))
    return cases


TEMPLATES = (
    "{% for i in range(10**9) %}x{% endfor %}", "{% for i in range(10**5) %}{% for j in range(10**5) %}"
    "{% endfor %}{% endfor %}", "{{ 'a' * 10**9 }}", "{{ 'a' * 100000 * 100000 }}", "{% set x = [1] * 10**8 %}",
    "{{ range(10**9) | list }}", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}", "{% from 'x' import y %}",
    "{{ ''.__class__.__mro__ }}", "{% for m in messages %}", "{{ raise_exception('boom') }}",
    "{{ messages | batch(2**62) | list }}", "{{ (range(100) | batch(10**9)) | list }}", "{{ 'x' | center(10**9) }}",
    "{{ '%099999999d' % 1 }}", "{{ '{:>99999999}'.format(1) }}", "{{ messages | tojson(indent=10**9) }}",
    "{% set s = namespace(x='a') %}{% for i in range(60) %}{% set s.x = s.x ~ s.x %}{% endfor %}{{ s.x }}",
    "{{ lipsum(10**9) }}", "{{ 1 / 0 }}", "{{ messages[10**9] }}", "{{ cycler(*range(10**8)) }}",
)


def template_cases(good: Path) -> list[Case]:
    config = json.loads((good / "tokenizer_config.json").read_text())

    def edit(value):
        def apply(model: Path):
            (model / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": value}))
        return apply

    values = [*TEMPLATES, "", 5, [1, 2], [{"name": "default", "template": 7}], {"x": 1}]
    cases = [_folder_case("template", repr(v)[:60], good, edit(v), "--chat") for v in values]
    for key, value in (("bos_token", ["<s>"]), ("eos_token", {"content": 5}), ("bos_token", 10**30)):
        cases.append(_folder_case("template", f"{key} = {value!r}", good, (
            lambda k, v: lambda m: (m / "tokenizer_config.json").write_text(json.dumps({**config, k: v})))(key, value),
            "--chat"))
    return cases


CLI_VALUES = {
    "--max-new-tokens": ("1e30", "1" + "0" * 30, "-1", "0", "nan", "99999999999"),
    "--temperature": ("1e-320", "nan", "inf", "-0", "1e308", "-1e-320"),
    "--top-k": ("-1", str(2**63), "1e3"), "--top-p": ("nan", "0", "1e-320", "inf"), "--min-p": ("nan", "-0.0", "1"),
    "--seed": ("-1", str(2**64), str(2**63 - 1)), "--speculate": ("17", "-1", "16"),
    "--top-n": ("0", str(2**31), "1000000000"), "--stop": ("\x00", "a" * 100_000),
    "--prompt": ("\udcff", "a b " * 200_000, ""), "--system": ("\udcff",), "--device": ("cuda:99", "tpu", "meta"),
    "--dtype": ("int4", "float64"),
}


def cli_cases(good: Path) -> list[Case]:
    def option(name: str, value: str) -> Case:
        def setup(where: Path):
            argv = _trace(str(good), name, value, *(["--chat"] if name == "--system" else []))
            return argv, (name, name.strip("-").replace("-", " "), name.strip("-").replace("-", "_"))
        return Case("cli", f"{name} {value[:20]!r}", setup)

    def model(label: str, make: Callable[[Path], str]) -> Case:
        def setup(where: Path):
            spec = make(where)
            return _trace(spec), (spec, Path(spec).name) if spec else ("--model",)
        return Case("cli", f"--model {label}", setup)

    def script(label: str, raw: bytes) -> Case:
        def setup(where: Path):
            (where / "s.json").write_bytes(raw)
            return _trace(str(good), "--script", str(where / "s.json")), ("s.json",)
        return Case("cli", f"--script {label}", setup)

    cases = [option(name, value) for name, values in CLI_VALUES.items() for value in values]
    cases += [model("absent", lambda w: str(w / "absent")), model("/dev/null", lambda w: "/dev/null"),
              model("/etc", lambda w: "/etc"), model("empty gguf", lambda w: (w / "e.gguf").write_bytes(b"")
                                                       or str(w / "e.gguf")), model("''", lambda w: "")]
    cases += [script("garbage", b"\xff\x00garbage"), script("nested", fm.deep_json().encode()),
              script("list", b"[1]"), script("absent", b"{}")]
    # issue 36: a trace with an id beyond float range, absurd step counts, a FIFO named like a script
    trace_head = (json.dumps({"type": "model", "name": "x"}) + "\n"
                  + json.dumps({"type": "prefill", "tokens": [{"id": 1, "text": "a"}], "n_tokens": 1}) + "\n")
    cases += [script("id 1e400", (trace_head + '{"type": "step", "index": 1, "token": {"id": 1e400, "text": "b"}}\n')
                     .encode()),
              script("step 1e12", json.dumps({"prompt": "a", "actions": [{"prefill": True},
                                                                         {"step": 10 ** 12}]}).encode()),
              script("max_new_tokens 1e12", json.dumps({"prompt": "a", "settings": {"max_new_tokens": 10 ** 12},
                                                        "actions": [{"run": True}]}).encode())]

    def fifo_script(where: Path):
        os.mkfifo(where / "s.json")
        return _trace(str(good), "--script", str(where / "s.json")), ("s.json",)

    cases.append(Case("cli", "--script a FIFO", fifo_script))
    return cases


def shard_cases(good: Path) -> list[Case]:
    """A shard index naming files outside the folder, and model files that are FIFOs (issue 36)."""
    def index(shard: str) -> Callable[[Path], None]:
        def edit(model: Path):
            (model / "model.safetensors").rename(model / "model-00001-of-00001.safetensors")
            weight_map = {"model.norm.weight": "model-00001-of-00001.safetensors", "lm_head.weight": shard}
            (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        return edit

    def fifo(name: str) -> Callable[[Path], None]:
        def edit(model: Path):
            (model / name).unlink(missing_ok=True)
            os.mkfifo(model / name)
        return edit

    shards = ("../outside.safetensors", "/etc/passwd", "a/../../b.safetensors")
    fifos = ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json",
             "model.safetensors.index.json")
    return ([_folder_case("index", f"shard {shard!r}", good, index(shard)) for shard in shards]
            + [_folder_case("index", f"a FIFO named {name}", good, fifo(name)) for name in fifos])


def all_cases(good: Path, gguf: bytes, seed: int = 0) -> list[Case]:
    rng = random.Random(seed)
    return (gguf_cases(gguf, rng, 220) + safetensors_cases(good) + config_cases(good, rng, 120)
            + tokenizer_cases(good) + template_cases(good) + cli_cases(good) + shard_cases(good))
