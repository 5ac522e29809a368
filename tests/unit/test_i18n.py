"""The text catalog (transformer/locales/*.toml) and `transformer.i18n.t`: every key has English and Chinese with
the same placeholders, every key the code reads exists and every key is read, and the language follows
`using` and the app's source."""

from __future__ import annotations

import pytest
from helpers.catalog import code_strings, problems, t_calls
from helpers.chinese import english_words

from transformer import i18n
from transformer.i18n import Texts, t, using


def test_every_entry_has_english_and_chinese_with_the_same_placeholders():
    assert problems(i18n.catalog()) == []


@pytest.mark.parametrize(("entry", "said"), [
    ({"en": "Layer {n}"}, "it needs en and zh"),  # no Chinese
    ({"en": "Layer {n}", "zh": "第层"}, "zh has placeholders [], en has ['n']"),  # one lost
    ({"en": "Layer {n}", "zh": "第 {m} 层"}, "zh has placeholders ['m']"),  # one renamed
    ({"en": "{n} heads", "en_one": "one head", "zh": "{n} 个头"}, "en_one has placeholders []"),
    ({"en": "f{x", "zh": "f{x"}, "write a literal brace"),
    ({"en": "Head", "zh": "  "}, "empty"),
    ({"en": "Head", "zh": "头", "fr": "Tête"}, "it needs en and zh"),
    ({"en": "**Task:** {x}", "zh": "**任务：**{x}"}, "zh has bold that markdown cannot close"),
    ({"en": "it **read**", "zh": "它**“读入”**的"}, "zh has bold that markdown cannot close"),
])
def test_the_check_names_a_broken_entry(entry, said):
    found = problems({"app.broken": entry})
    assert len(found) == 1 and found[0].startswith("app.broken:") and said in found[0], found


def setting_keys() -> list[str]:
    """The keys the Train page's numeric settings name by their own names (ui/tables/train.Setting)."""
    from ui.tables.train import TRAIN, Setting

    return [key for prop in TRAIN.props if isinstance(prop, Setting) for key in prop.keys()]


def test_every_key_the_code_reads_is_in_the_catalog():
    missing = [f"{where}: {key}" for where, key in t_calls() if key not in i18n.catalog()]
    assert missing == [] and [key for key in setting_keys() if key not in i18n.catalog()] == []


def test_every_key_in_the_catalog_is_read_somewhere():
    used = code_strings() | set(setting_keys())
    assert [key for key in i18n.catalog() if key not in used] == []


def test_t_writes_the_current_language_and_fills_placeholders():
    assert t("app.knock.knocked", n=2, output="x", verdict="") == "**With 2 heads knocked out:** x "
    assert t("app.knock.knocked", n=1, output="x", verdict="") == "**With 1 head knocked out:** x "
    with using("zh"):
        assert i18n.language() == "zh"
        assert t("app.knock.knocked", n=1, output="x", verdict="") == "**敲除 1 个头后**：x "
    assert i18n.language() == "en"  # the command line and notebooks: English


def test_t_refuses_an_unknown_key_a_missing_value_and_an_unknown_language():
    with pytest.raises(KeyError):
        t("app.no_such_key")
    with pytest.raises(KeyError):
        t("app.knock.knocked", n=2)
    with pytest.raises(ValueError), using("fr"):
        pass


def test_the_app_source_picks_the_language_and_using_overrides_it():
    chosen = ["zh"]
    i18n.follow(lambda: chosen[0])
    try:
        assert t("app.page.masks") == "掩码"
        with using("en"):
            assert t("app.page.masks") == "Masks"
        chosen[0] = "fr"  # anything else reads as the default
        assert t("app.page.masks") == "Masks"
    finally:
        i18n.follow(lambda: None)


def test_a_table_of_keys_reads_in_the_current_language():
    kinds = Texts({"cross": "charts.kind_short.cross"})
    assert dict(kinds) == {"cross": "Cross"} and kinds.get("cross") == "Cross" and len(kinds) == 1
    with using("zh"):
        assert kinds["cross"] == "交叉注意力"


def test_sentences_run_together_as_each_language_writes_them():
    assert i18n.sentences(["It rose.", "Stop early."]) == "It rose. Stop early."
    with using("zh"):
        assert i18n.sentences(["它上升了。", "早点停。"]) == "它上升了。早点停。"


def test_bold_beside_chinese_punctuation_is_checked_on_both_sides():
    from helpers.catalog import broken_bold

    assert not broken_bold("**任务**：x，它在这一步**读入**的词元；“**读入**”")
    assert broken_bold("**任务：**x") and broken_bold("它**“读入”**的")


def test_english_words_skips_allowed_names_and_finds_the_rest():
    assert english_words("解码器 softmax 的输出 top-k 与 reverse 模型", {"reverse"}) == []
    assert english_words("第 3 步 · Cross-attention · layer 2 · d_model L1H4") == ["Cross-attention", "layer"]
