"""`main.py trace --requests FILE.json` and `--batch N` (cli.py, lessons/requests.py): the scheduler's events as
JSON Lines, each request's steps those of `trace` of that request alone; bad input is one line and a non-zero
exit, before the model loads. A tiny random model, and the default model once."""

import json
import subprocess
import sys

import numpy as np
import pytest

from inference.lessons.requests import load_requests, parse_requests
from inference.lessons.script import ScriptError
from scripted import ROOT, folder  # noqa: F401 (fixture)

RUN = {"capture_output": True, "text": True, "timeout": 300}


def _cli(*options) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), "trace", *map(str, options)]


def _lines(result: subprocess.CompletedProcess) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _steps(lines: list[dict], request: int | None = None) -> list[dict]:
    return [line for line in lines if line["type"] == "step" and line.get("request") == request]


def _assert_same_steps(batched: list[dict], solo: list[dict]) -> None:
    """Same ids, draws and positions; every candidate's logit within 1e-5 of the largest (one row through the
    products alone, or as a row of the batch's matrix, rounds differently in float32: test_batch.py)."""
    assert [(s["index"], s["token"]["id"], s["random_u"], s["position"]) for s in batched] == \
        [(s["index"], s["token"]["id"], s["random_u"], s["position"]) for s in solo]
    for mine, theirs in zip(batched, solo):
        assert [c["id"] for c in mine["candidates"]] == [c["id"] for c in theirs["candidates"]]
        expected = np.array([c["logit"] for c in theirs["candidates"]])
        got = np.array([c["logit"] for c in mine["candidates"]])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * max(1.0, np.abs(expected).max()))


def test_requests_file_traces_each_request_as_trace_alone(folder, tmp_path):
    requests = [{"prompt": "the cat sat on the mat and the dog sat on the log", "settings": {"seed": 3,
                 "temperature": 1.5, "top_k": 0, "max_new_tokens": 5}},
                {"prompt": "a bird", "chat": True, "system": "be brief", "arrive_at_step": 2,
                 "settings": {"greedy": True, "max_new_tokens": 4}},
                {"prompt_ids": [5, 77, 200, 31], "arrive_at_step": 1}]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(requests))
    lines = _lines(subprocess.run(_cli("--model", folder, "--requests", path, "--max-new-tokens", 3, "--seed", 9,
                                       "--top-n", 5, "--block-tokens", 4, "--token-budget", 8), **RUN))
    kinds = [line["type"] for line in lines]
    assert kinds[:4] == ["model", "settings", "settings", "settings"] and {"schedule", "blocks"} <= set(kinds)
    assert [line["request"] for line in lines[1:4]] == [0, 1, 2]
    assert lines[3]["seed"] == 9 and lines[3]["max_new_tokens"] == 3 and lines[2]["greedy"] is True
    assert all("request" in line for line in lines if line["type"] in ("prefill", "step", "stop", "request_done"))
    schedules = [line for line in lines if line["type"] == "schedule"]
    assert [s["step"] for s in schedules] == list(range(len(schedules)))
    assert all(s["tokens_in_pass"] <= 8 for s in schedules)
    assert sum(s["prefill_chunks"].get("0", 0) for s in schedules) > 8  # request 0's prompt, read in chunks
    assert [s["waiting"].get("1") for s in schedules[:3]] == ["arrives at step 2"] * 2 + [None]  # then admitted
    assert min(s["step"] for s in schedules if 1 in s["requests"]) >= 2
    assert [t["id"] for t in next(line for line in lines if line["type"] == "prefill" and line["request"] == 2)[
        "tokens"]] == [5, 77, 200, 31]
    done = {line["request"]: line for line in lines if line["type"] == "request_done"}
    assert sorted(done) == [0, 1, 2] and all(d["ttft_ms"] > 0 for d in done.values())
    blocks = [line for line in lines if line["type"] == "blocks"]
    assert blocks[-1]["allocated"] == 0 and blocks[-1]["free"] > 0 and max(b["allocated"] for b in blocks) > 0
    solo = _lines(subprocess.run(_cli("--model", folder, "--prompt", requests[0]["prompt"], "--seed", 3,
                                      "--temperature", 1.5, "--top-k", 0, "--max-new-tokens", 5, "--top-n", 5), **RUN))
    _assert_same_steps(_steps(lines, 0), _steps(solo))
    solo = _lines(subprocess.run(_cli("--model", folder, "--prompt", "a bird", "--chat", "--system", "be brief",
                                      "--greedy", "--max-new-tokens", 4, "--seed", 9, "--top-n", 5), **RUN))
    _assert_same_steps(_steps(lines, 1), _steps(solo))


def test_batch_of_copies_draws_with_consecutive_seeds(folder):
    lines = _lines(subprocess.run(_cli("--model", folder, "--batch", 3, "--prompt", "the cat", "--seed", 4,
                                       "--max-new-tokens", 4, "--temperature", 1.5, "--top-k", 0, "--top-n", 5), **RUN))
    assert [line["seed"] for line in lines if line["type"] == "settings"] == [4, 5, 6]
    assert set(lines[-1]) >= {"type", "allocated"} and lines[-1]["allocated"] == 0
    solo = _lines(subprocess.run(_cli("--model", folder, "--prompt", "the cat", "--seed", 6, "--max-new-tokens", 4,
                                      "--temperature", 1.5, "--top-k", 0, "--top-n", 5), **RUN))
    _assert_same_steps(_steps(lines, 2), _steps(solo))
    assert len({tuple(s["token"]["id"] for s in _steps(lines, r)) for r in range(3)}) > 1  # the seeds differ


@pytest.mark.parametrize("content, message", [
    (None, "missing.json: no such file"),
    ("[{\"prompt\": \"a\"},", "requests.json: not valid JSON (line 1"),
    ('[{"prompt": "a", "settings": {"temprature": 1}}]',
     'requests.json: request 0 settings: unknown setting "temprature"'),
    ('[{"prompt": "a"}, {"prompt": "b", "arrive": 2}]', 'requests.json: request 1: unknown key "arrive"'),
    ('{"prompt": "a"}', "requests.json: the requests must be a non-empty JSON list"),
])
def test_cli_a_bad_requests_file_is_one_line_and_exit_2(folder, tmp_path, content, message):
    path = tmp_path / ("missing.json" if content is None else "requests.json")
    if content is not None:
        path.write_text(content)
    result = subprocess.run(_cli("--model", folder, "--requests", path), **RUN)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"error: {message}")


def test_cli_refuses_what_a_batch_cannot_do(folder, tmp_path):
    for options, message in [(("--batch", 2, "--speculate", 4),
                              "--speculate cannot be combined with --requests or --batch"),
                             (("--batch", 2, "--requests", "x.json"), "--requests and --batch cannot be combined"),
                             (("--batch", 0), "--batch must be in [1, 256]")]:
        result = subprocess.run(_cli("--model", folder, *options), **RUN)
        assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
        assert message in result.stderr.splitlines()[-1]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps([{"prompt_ids": [1, 10 ** 6]}]))
    result = subprocess.run(_cli("--model", folder, "--requests", path), **RUN)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: request 0: a token id is outside the vocabulary")
    assert [json.loads(line)["type"] for line in result.stdout.splitlines()] == []


def test_requests_are_checked_before_anything_runs(tmp_path):
    specs = parse_requests([{"prompt": "a", "settings": {"seed": 2}}, {"prompt_ids": [1, 2], "arrive_at_step": 4}])
    assert specs[0].settings == (("seed", 2),) and specs[1].prompt_ids == (1, 2) and specs[1].arrive_at_step == 4
    for data, message in [([], "non-empty JSON list"), ([{"chat": True}], 'request 0: it has no "prompt"'),
                          ([{"prompt": "a", "arrive_at_step": -1}], 'request 0: "arrive_at_step" must be'),
                          ([{"prompt": "a", "arrive_at_step": True}], 'request 0: "arrive_at_step" must be'),
                          ([{"prompt": "a"}, 3], "request 1: a request is an object"),
                          ([{"prompt_ids": [1], "chat": True}], 'request 0: "prompt_ids" are the exact ids read'),
                          ([{"prompt": "a", "settings": {"top_p": 2}}], "request 0 settings: "),
                          ([{"prompt": "a"}] * 257, "257 requests are more than")]:
        with pytest.raises(ScriptError, match=message):
            parse_requests(data)
    folder_path = tmp_path / "a_folder.json"
    folder_path.mkdir()
    with pytest.raises(ScriptError, match="a_folder.json: not a regular file"):
        load_requests(folder_path)


def test_default_model_batch_trace():
    """Two greedy copies on the default model: both read " Paris" first, as `trace` alone does."""
    result = subprocess.run(_cli("--batch", 2, "--greedy", "--max-new-tokens", 2), **RUN)
    lines = _lines(result)
    assert _steps(lines, 0)[0]["token"]["text"] == " Paris"
    assert [s["token"]["id"] for s in _steps(lines, 0)] == [s["token"]["id"] for s in _steps(lines, 1)]
    assert [line["type"] for line in lines].count("request_done") == 2
