"""The CLI reads and writes Chinese whatever the locale: LANG=C, no locale at all, or an ASCII locale with Python's
UTF-8 mode off. Plain output is UTF-8 with the characters; JSON escapes them (still the same text once parsed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.repo import ROOT
from transformer.store.checkpoints import load_bundle
from transformer.cli import typed_text
from transformer.tasks import chinese_number

ZH = str(ROOT / "assets" / "checkpoints" / "zh_numbers.safetensors")
LOCALES = {"LANG=C": {"LANG": "C", "LC_ALL": "C"}, "no locale": {},
           "ASCII, no UTF-8 mode": {"LC_ALL": "C", "PYTHONUTF8": "0"}}
ASCII = LOCALES["ASCII, no UTF-8 mode"]


def cli(locale: dict, *args: str) -> subprocess.CompletedProcess:
    """The CLI as a subprocess with only `locale` for locale settings; stdout and stderr as bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANG", "LC_", "PYTHONUTF8", "PYTHONIOENCODING"))}
    return subprocess.run([sys.executable, "-m", "transformer", *args], cwd=ROOT, capture_output=True, timeout=120,
                          env=env | locale | {"PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("locale", LOCALES.values(), ids=LOCALES)
def test_decode_writes_the_numeral(locale):
    plain = cli(locale, "decode", "--checkpoint", ZH, "--input", "four hundred and five")
    assert plain.returncode == 0, plain.stderr.decode("utf-8")
    assert plain.stdout.decode("utf-8") == "四百零五\n"
    as_json = cli(locale, "decode", "--checkpoint", ZH, "--input", "four hundred and five", "--json")
    result = json.loads(as_json.stdout.decode("ascii"))  # escaped: ASCII, whatever reads it
    assert result["output"] == "四百零五" and result["output_tokens"] == [*"四百零五", "</s>"]


def test_a_chinese_input_is_read_as_typed_and_named_in_the_error():
    run = cli(ASCII, "decode", "--checkpoint", ZH, "--input", "两百")
    assert run.returncode == 2
    assert run.stderr.decode("utf-8").startswith("error: the model does not know these characters: '两'")


def test_train_on_chinese_pairs_and_decode_them(tmp_path):
    """`train --task-file` with Chinese sources, file name and --name, then decode and list, all in an ASCII locale."""
    data = tmp_path / "中文数字.tsv"
    read_back = {chinese_number(n): n for n in range(0, 600, 10)}
    data.write_text("".join(f"{chinese}\t{n}\n" for chinese, n in read_back.items()), encoding="utf-8")
    out = tmp_path / "zh.safetensors"
    train = cli(ASCII, "train", "--task-file", str(data), "--steps", "3", "--d-model", "16", "--heads", "2",
                "--d-ff", "32", "--eval-samples", "5", "--confirm-samples", "5", "--name", "四百", "--out", str(out))
    assert train.returncode == 0, train.stderr.decode("utf-8")
    result = json.loads(train.stdout.decode("ascii").splitlines()[-1])
    assert result["name"] == "四百" and result["task_params"]["title"] == "中文数字"
    bundle = load_bundle(out)
    source, target = bundle.task.heldout_pairs[0]
    assert bundle.name == "四百" and target == str(read_back[source])
    decode = cli(ASCII, "decode", "--checkpoint", str(out), "--input", source)
    vocabulary = set(bundle.task.source_chars + bundle.task.target_chars)  # 3 steps: any of its characters
    assert decode.returncode == 0 and set(decode.stdout.decode("utf-8").strip()) <= vocabulary
    listed = cli(ASCII, "models", "--folder", str(tmp_path))
    assert listed.stdout.decode("utf-8").startswith("四百")


def test_typed_text_undoes_a_locale_that_is_not_utf8():
    assert typed_text("\udce5\udc9b\udc9b") == "四"  # the bytes of 四 as an ASCII locale hands them over
    assert typed_text("four 四") == "four 四"
    assert typed_text("\udcff") == "\udcff"  # not UTF-8: kept, so the error names it
