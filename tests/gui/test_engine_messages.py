"""The engine's sentences reach the GUI as codes plus values and are worded there (issue 41, item 4), and the
numbers the user reads go through QLocale (item 1).

- Every code inference/ can send has its words in gui/state/engine_words.WORDS (the same English), every
  `say("…")` in inference/ names a code of inference.messages.ENGLISH, and each Chinese translation keeps the
  placeholders of its English.
- A real engine error (a prompt longer than the context limit) shows in Chinese in Chinese mode and in English
  in English mode, in the status bar; a lesson script's error and the model picker's reasons likewise.
- A code the GUI does not know is shown in the English the engine sent with it.
- i18n.number is QLocale's: a German locale writes 1234.5 as "1.234,5".
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
from PySide6.QtCore import QLocale

from app_driver import settle, wait_until, window_fixture
from gui import language
from gui.state import i18n
from gui.state.engine_words import WORDS, word
from gui.state.i18n import translate
from inference.messages import ENGLISH, Message, said, say

ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")
FULL_WIDTH = re.compile(r"[\uff01-\uff5e]")  # Chinese punctuation: "：", "（"

window = window_fixture("engine_messages")


def fields(template: str) -> set[tuple[str, str, str | None]]:
    return {(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
            if name is not None}


@pytest.fixture
def chinese(qapp):
    language.set_language("zh_CN")
    yield
    language.set_language("en")


def test_every_code_the_engine_sends_has_words_in_the_gui():
    assert set(WORDS) == set(ENGLISH), set(WORDS) ^ set(ENGLISH)
    assert WORDS == ENGLISH  # the same English: the GUI in English says what `trace` says
    sources = [path.read_text(encoding="utf-8") for path in (ROOT / "inference").rglob("*.py")
               if path.name != "messages.py"]
    said = {m for text in sources for m in re.findall(r'\bsay\(\s*"([\w.]+)"', text)}
    assert said - set(ENGLISH) == set()  # a code raised somewhere but missing from the table would be a KeyError
    said |= {m for text in sources for m in re.findall(r'"([a-z]+\.[a-z_]+)"', text) if m in ENGLISH}  # passed on
    nested_only = {"load.supported", "memory.converting", "memory.after_converting", "memory.kv_cache",
                   "memory.kv_unknown", "memory.free", "memory.free_unknown"}
    assert set(ENGLISH) - said == set(), "a code no engine path sends"
    assert nested_only <= said


def test_each_chinese_translation_keeps_its_placeholders(chinese):
    for code, english in WORDS.items():
        chinese_text = translate("Engine", english)
        assert chinese_text != english, code  # translated ("{file}：{problem}" only by its full-width colon)
        assert CJK.search(chinese_text) or FULL_WIDTH.search(chinese_text), code
        assert fields(chinese_text) == fields(english), code


def test_an_unknown_code_keeps_the_engines_english(chinese):
    assert word(None, "the engine's own line") == "the engine's own line"
    newer = Message.__new__(Message)  # as an engine newer than this GUI would send it (its code not in WORDS)
    object.__setattr__(newer, "code", "prompt.from_the_future")
    object.__setattr__(newer, "values", {})
    assert word(newer, "a sentence from a newer engine") == "a sentence from a newer engine"
    assert word(say("prompt.empty"), "the prompt is empty: …") == "提示为空：至少要有一个 Token"


def test_values_are_written_in_the_locale_and_nested_messages_worded(chinese, monkeypatch):
    refusal = say("memory.refusal", model="tiny", dtype="float32", needed=2_500_000_000, weights=538_000_000,
                  converting=say("memory.after_converting"), kv=say("memory.kv_cache", kv=189_000_000, tokens=4096),
                  available=1_200_000_000)
    zh = word(refusal, str(refusal))
    assert "2.5 GB" in zh and "538 MB" in zh and "4,096 个 Token" in zh and "在转换 GGUF 之后" in zh
    monkeypatch.setattr(language, "number_locale", QLocale(QLocale.German, QLocale.Germany))
    assert "2,5 GB" in word(refusal, str(refusal)) and "4.096" in word(refusal, str(refusal))


def test_numbers_go_through_qlocale(qapp, monkeypatch):
    assert i18n.number(1234.5, 1) == "1,234.5" and i18n.number(8192) == "8,192"
    monkeypatch.setattr(language, "number_locale", QLocale(QLocale.German, QLocale.Germany))
    assert i18n.number(1234.5, 1) == "1.234,5"
    assert i18n.number(1234567) == "1.234.567"
    assert i18n.size(1_234_000_000) == "1,2 GB"
    assert translate("StatusBar", "%n token(s)", None, 1234) == "1.234 tokens"


def _prefill_too_long(win) -> str:
    """Prefill the default prompt (5 tokens) under a 4-token context limit: the engine refuses it."""
    c = win.controller
    win.controls.context_limit.setValue(4)
    win.controls.prompt.setPlainText("The capital of France is")
    errors = []
    c.error.connect(lambda message, details, expected: errors.append((message, expected)))
    win.actions["prefill"].trigger()
    wait_until(lambda: errors and not c.busy)
    settle(win)
    win.controls.context_limit.setValue(0)
    return errors[-1]


def test_a_real_engine_error_in_english_and_in_chinese(window):
    message, expected = _prefill_too_long(window)
    assert expected and message == "the prompt is 5 tokens but the context window holds 4 (the context limit)"
    assert window.status.state.text() == message
    window.set_language("zh_CN")
    try:
        message, expected = _prefill_too_long(window)
        assert message == "提示有 5 个 Token，但上下文窗口只能容纳 4 个（上下文上限）"
        assert window.status.state.text() == message
        window.status.grab().save("/tmp/engine_error_zh.png")  # looked at: the whole line fits
    finally:
        window.set_language("en")


def test_a_lesson_script_error_in_chinese(window, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("gui.lessons.script_player.QMessageBox.warning", lambda parent, title, text: shown.append(text))
    path = tmp_path / "bad.json"
    path.write_text('{"prompt": "Hi", "actions": [{"prefill": true}, {"step": 0}]}', encoding="utf-8")
    window.set_language("zh_CN")
    try:
        assert not window.play_script(str(path))
    finally:
        window.set_language("en")
    assert shown == ["bad.json：第 1 个动作（“step”）：step 必须在 [1, 1048576] 之内，收到的是 0"]
    assert not window.play_script(str(path))
    assert shown[-1] == 'bad.json: action 1 ("step"): step must be in [1, 1048576], got 0'


def test_a_scripts_nested_parts_are_worded_too(chinese):
    from inference.lessons.script import ScriptError, parse_script
    from inference.messages import said

    with pytest.raises(ScriptError) as caught:
        parse_script({"prompt": "Hi", "chat": "yes", "actions": [{"prefill": True}]})
    assert str(caught.value) == 'script: "chat" must be true or false, got "yes"'
    worded = word(said(caught.value), str(caught.value))
    assert worded == '脚本："chat" 必须是 true 或 false，收到的是 "yes"'


def test_the_connect_dialog_words_the_probes_error(chinese):
    """The server probe runs in its own process and prints JSON: the code and values travel as data."""
    from gui.dialogs.connect_dialog import offer_text
    from inference.messages import as_data, from_data

    refused = say("http.unreachable", url="http://127.0.0.1:9", why="Connection refused")
    assert from_data(as_data(refused)) == refused
    assert offer_text({"error": str(refused), "said": as_data(refused)}) == \
        "无法连接 http://127.0.0.1:9 上的服务器：Connection refused"
    newer = {"code": "http.from_the_future", "values": {}}
    assert from_data(newer) is None
    assert offer_text({"error": "a newer engine's English", "said": newer}) == "a newer engine's English"
    assert offer_text({"error": "an uncoded line"}) == "an uncoded line"


def test_a_bad_model_file_fails_to_load_in_chinese(window, tmp_path):
    """The engine reads the file, refuses it (LoadFailed with its code) and keeps the model it had."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a GGUF file " * 8)
    c, finished = window.controller, []
    c.load_finished.connect(lambda ok, message: finished.append((ok, message)))
    before = c.info.name
    window.set_language("zh_CN")
    try:
        window.loader.load(str(bad))
        wait_until(lambda: finished and not c.loading)
        box = window.loader.error_box
        assert box is not None and box.text().startswith("broken.gguf：不是有效的 GGUF 文件（没有 GGUF 标识）")
        box.grab().save("/tmp/load_error_zh.png")
        box.close()
    finally:
        window.set_language("en")
    assert finished[-1] == (False, "broken.gguf：不是有效的 GGUF 文件（没有 GGUF 标识）")
    assert c.info.name == before


def test_a_malformed_gguf_is_refused_in_chinese(chinese, tmp_path):
    """GGUF metadata and tensor errors (inference/store/gguf) are codes: the picker and the load box word them."""
    import fuzz_mutations as fm
    from gguf_writer import write_gguf
    from inference.errors import ModelFormatError
    from inference.messages import said
    from inference.store.gguf.convert import convert
    from tiny import make_hf_model, save_hf_model

    hf = make_hf_model("llama", seed=5)
    data = write_gguf(hf, save_hf_model(hf, tmp_path / "hf"), tmp_path / "tiny.gguf").read_bytes()
    spot = next(spot for spot in fm.gguf_fields(data) if spot.what == "llama.block_count value")
    worded = []
    for layers in (0, 1):
        bad = tmp_path / f"layers{layers}.gguf"
        bad.write_bytes(fm.overwrite(data, spot, layers))
        (tmp_path / f"out{layers}").mkdir()
        with pytest.raises(ModelFormatError) as caught:
            convert(bad, tmp_path / f"out{layers}")
        worded.append((str(caught.value), word(said(caught.value), str(caught.value))))
    assert worded == [
        ("layers0.gguf: GGUF metadata 'llama.block_count' must be from 1 to 1,024, got 0",
         "layers0.gguf：GGUF 元数据 'llama.block_count' 必须在 1 到 1,024 之间，收到的是 0"),
        ("layers1.gguf: tensor 'blk.1.attn_q.weight' is not part of the model its metadata describes (1 layers)",
         "layers1.gguf：张量 'blk.1.attn_q.weight' 不属于元数据描述的模型（1 层）")]


def test_a_chat_templates_refusal_in_chinese(chinese):
    """The sandbox's limits (inference/text/template_box) are codes: the refusal reads in the chosen language."""
    from inference.errors import ModelFormatError
    from inference.messages import said
    from inference.text.template_box import render

    worded = []
    for source in ("{% include 'other.jinja' %}", "x" * 300_000, "{{ 'ab' * 3000000 }}"):
        with pytest.raises(ModelFormatError) as caught:
            render(source, {}, "tokenizer_config.json")
        worded.append((str(caught.value), word(said(caught.value), str(caught.value))))
    assert worded == [
        ("tokenizer_config.json: chat template refused: `include` is not allowed (a chat template must be one "
         "self-contained file)", "tokenizer_config.json：对话模板被拒绝：不允许使用 `include`（对话模板必须是一个自成一体的文件）"),
        ("tokenizer_config.json: chat template refused: the template is 300,000 characters (limit 256,000)",
         "tokenizer_config.json：对话模板被拒绝：模板有 300,000 个字符（上限 256,000）"),
        ("tokenizer_config.json: chat template refused: repeating 2 items 3,000,000 times is over the limit of "
         "4,000,000", "tokenizer_config.json：对话模板被拒绝：把 2 个元素重复 3,000,000 次超过了上限 4,000,000")]


def test_a_bad_config_json_is_refused_in_chinese(chinese):
    """config.json's type checks (the families' ConfigReader) are codes, in the "{path}: {problem}" shape."""
    from inference.errors import ModelFormatError
    from inference.messages import said
    from inference.model.config import ModelConfig

    llama = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64}
    worded = []
    for config in ({**llama, "hidden_size": "big"}, {**llama, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
                   {"architectures": [3]}, {**llama, "hidden_act": "gelu"}):
        with pytest.raises(ModelFormatError) as caught:
            ModelConfig.from_hf(config)
        worded.append((str(caught.value), word(said(caught.value), str(caught.value))))
    assert worded == [
        ("config.json: 'hidden_size' must be an integer, got 'big'", "config.json：'hidden_size' 必须是整数，收到的是 'big'"),
        ("config.json: unsupported rope_scaling type 'yarn' (supported: linear, llama3, longrope)",
         "config.json：不支持的 rope_scaling 类型 'yarn'（支持：linear、llama3、longrope）"),
        ("config.json: 'architectures' must list class names, got [3]",
         "config.json：'architectures' 必须列出类名，收到的是 [3]"),
        ("config.json: LlamaForCausalLM with activation 'gelu' is not supported (SwiGLU only)",
         "config.json：不支持激活函数为 'gelu' 的 LlamaForCausalLM（只支持 SwiGLU）")]


def test_a_bad_safetensors_header_is_refused_in_chinese(chinese, tmp_path):
    """Tensor-level header details (inference/formats/headers.py) are codes inside the "{path}: {problem}" shape."""
    import fuzz_mutations as fm
    from inference.errors import ModelFormatError
    from inference.formats.headers import safetensors_tensors
    from inference.messages import said
    from tiny import make_hf_model, save_hf_model

    data = (save_hf_model(make_hf_model("llama", seed=5), tmp_path / "hf") / "model.safetensors").read_bytes()
    name = sorted(k for k in fm.split_safetensors(data)[0] if k != "__metadata__")[0]
    worded = []
    for field, value in (("data_offsets", [0, 2**40]), ("shape", ["a"])):
        bad = tmp_path / f"{field}.safetensors"
        bad.write_bytes(fm.mutate_safetensors(data, 0, field, value))
        with pytest.raises(ModelFormatError) as caught:
            safetensors_tensors(bad)
        worded.append(word(said(caught.value), str(caught.value)))
    room = len(fm.split_safetensors(data)[1])
    assert worded == [
        f"data_offsets.safetensors：张量 {name!r} 的 data_offsets [0, 1099511627776] 超出了文件中 {room:,} 字节的数据",
        f"shape.safetensors：张量 {name!r} 没有有效的形状"]


def test_a_servers_bad_field_is_worded_with_its_nested_parts(chinese):
    """The dialects' checks nest: the server, the field ("a key of top_logprobs") and what it should be are codes."""
    from inference.sources.dialects import parse_vllm
    from inference.sources.http import ServerError

    server = say("remote.server", label="vLLM", url="http://127.0.0.1:8000")
    reply = {"choices": [{"logprobs": {"top_logprobs": [{"Paris": -0.1}]}}]}  # keyed by text, not token_id:<id>
    with pytest.raises(ServerError) as caught:
        parse_vllm(reply, server)
    assert str(caught.value) == ("vLLM at http://127.0.0.1:8000 sent a key of top_logprobs = 'Paris': not "
                                 "token_id:<id> (it needs return_tokens_as_token_ids: vLLM 0.6 or later)")
    assert word(said(caught.value), str(caught.value)) == (
        "http://127.0.0.1:8000 上的 vLLM 发来的 top_logprobs 的一个键 = 'Paris'：不是 token_id:<id>"
        "（需要 return_tokens_as_token_ids：vLLM 0.6 或更新版本）")
    with pytest.raises(ServerError) as caught:
        parse_vllm({"choices": [{"logprobs": {"top_logprobs": [{"token_id:5": 0.5}]}}]}, server)
    assert word(said(caught.value), str(caught.value)) == (
        "http://127.0.0.1:8000 上的 vLLM 发来的 top_logprobs 中的一个对数概率 = 0.5：不是对数概率（至多为 0 的数）")
