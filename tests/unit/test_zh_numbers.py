"""The zh_numbers task: British English number words -> Chinese numerals, checked against a hand-written table
and an independent reader over the whole range; its split, tokenizer and alignment."""

from __future__ import annotations

import pytest

from transformer.tasks import ZH_MAX, TaskError, british_number, chinese_number, is_heldout, make_task
from transformer.tasks.zh_numbers import ZH_CHARS, _english_pieces
from transformer.network.tokenizers import WORD_START, TokenizerError, tokenizer_from_dict

# Hand-checked: n -> (British English, Chinese numeral).
TABLE = {
    0: ("zero", "零"), 1: ("one", "一"), 7: ("seven", "七"), 10: ("ten", "十"), 11: ("eleven", "十一"),
    15: ("fifteen", "十五"), 20: ("twenty", "二十"), 21: ("twenty-one", "二十一"), 99: ("ninety-nine", "九十九"),
    100: ("one hundred", "一百"), 101: ("one hundred and one", "一百零一"), 110: ("one hundred and ten", "一百一十"),
    115: ("one hundred and fifteen", "一百一十五"), 200: ("two hundred", "二百"),
    405: ("four hundred and five", "四百零五"), 999: ("nine hundred and ninety-nine", "九百九十九"),
    1000: ("one thousand", "一千"), 1001: ("one thousand and one", "一千零一"),
    1010: ("one thousand and ten", "一千零一十"), 1011: ("one thousand and eleven", "一千零一十一"),
    1100: ("one thousand one hundred", "一千一百"), 1105: ("one thousand one hundred and five", "一千一百零五"),
    2020: ("two thousand and twenty", "二千零二十"), 10000: ("ten thousand", "一万"),
    10001: ("ten thousand and one", "一万零一"), 10010: ("ten thousand and ten", "一万零一十"),
    10100: ("ten thousand one hundred", "一万零一百"), 11000: ("eleven thousand", "一万一千"),
    12345: ("twelve thousand three hundred and forty-five", "一万二千三百四十五"),
    20000: ("twenty thousand", "二万"), 40005: ("forty thousand and five", "四万零五"),
    50050: ("fifty thousand and fifty", "五万零五十"), 60600: ("sixty thousand six hundred", "六万零六百"),
    99999: ("ninety-nine thousand nine hundred and ninety-nine", "九万九千九百九十九"),
}
# Beyond the task's range, for the converters alone.
WIDER = {100000: "十万", 100001: "十万零一", 100100: "十万零一百", 101000: "十万一千", 110000: "十一万",
         1000000: "一百万", 10010010: "一千零一万零一十", 20000001: "二千万零一",
         12345678: "一千二百三十四万五千六百七十八"}
INVALID = ["", "405", "four hundred five", "Four hundred and and five", "and five", "zero and five", "forty two",
           "one hundred thousand", "twelve hundred", "四百零五"]


@pytest.fixture(scope="module")
def task():
    return make_task("zh_numbers")


@pytest.fixture(scope="module")
def tokenizer(task):
    return task.make_tokenizer(0)


def read_chinese(numeral: str) -> int:
    """An independent reader: digits multiply the unit after them (十 alone is 1 x 10), 万 the section before it."""
    digits, units = {c: i for i, c in enumerate("零一二三四五六七八九")}, {"十": 10, "百": 100, "千": 1000}
    total = section = digit = 0
    for c in numeral:
        if c in digits:
            digit = digits[c]
        elif c in units:
            section, digit = section + (digit or 1) * units[c], 0
        else:
            assert c == "万", numeral
            total, section, digit = (section + digit) * 10000, 0, 0
    return total + section + digit


def test_hand_written_table(task):
    for n, (english, chinese) in TABLE.items():
        assert (british_number(n), chinese_number(n)) == (english, chinese), n
        assert task.target(english) == chinese
    for n, chinese in WIDER.items():
        assert chinese_number(n) == chinese
    assert british_number(120_005) == "one hundred and twenty thousand and five"
    assert task.target("  Four HUNDRED and   five ") == "四百零五"


def test_every_number_in_range_reads_back_in_standard_form(task):
    """Both sides of all 100,000 numbers: the English reads back to n, the numeral reads back to n, one 零 per
    gap and none at the end, 十 alone only at the start, and the declared maxima hold."""
    longest = [0, 0]
    for n in range(ZH_MAX + 1):
        english, chinese = british_number(n), chinese_number(n)
        assert task.number(english) == n and read_chinese(chinese) == n, n
        assert "零零" not in chinese and (n == 0 or not chinese.endswith("零"))
        assert not chinese.startswith("一十")
        assert all(chinese[i - 1] in "一二三四五六七八九" for i, c in enumerate(chinese) if c == "十" and i), chinese
        longest = [max(longest[0], len(english)), max(longest[1], len(chinese))]
    assert longest == [task.max_source_chars, task.max_target_chars] == [54, 9]


def test_invalid_sources_are_refused_with_the_style_to_use(task):
    for source in INVALID:
        with pytest.raises(TaskError, match="four hundred and five"):
            task.target(source)
        assert task.answer(source) is None and task.alignment(source) is None


def test_generator_is_seeded_and_draws_every_magnitude(task):
    first = task.pairs(500, seed=3)
    assert first == task.pairs(500, seed=3) and first != task.pairs(500, seed=4)
    sizes = {len(str(task.number(s))) for s, _ in first}
    assert sizes == {1, 2, 3, 4, 5}


def test_heldout_split_is_a_tenth_of_the_range_and_disjoint_from_training(task):
    heldout = {n for n in range(ZH_MAX + 1) if task.in_heldout(british_number(n))}
    assert 0.09 < len(heldout) / (ZH_MAX + 1) < 0.11
    train = {task.number(s) for s, _ in task.pairs(3000, seed=5, split="train")}
    drawn = {task.number(s) for s, _ in task.pairs(1000, seed=5, split="heldout")}
    assert not train & heldout and drawn <= heldout and min(drawn) < 1000 <= max(drawn)
    assert all(is_heldout(e) for e in task.examples())


def test_tokenizer_round_trips_chinese_one_character_per_token(task, tokenizer):
    for n in (*TABLE, *WIDER):
        chinese = chinese_number(n)
        ids = tokenizer.encode(chinese)
        assert len(ids) == len(chinese) and tokenizer.decode(ids) == chinese
        assert tokenizer.pieces(ids) == list(chinese)
    again = tokenizer_from_dict(tokenizer.to_dict())  # as a checkpoint stores it
    assert again.decode(again.encode(ZH_CHARS)) == ZH_CHARS
    assert task.make_tokenizer(7).model == tokenizer.model  # the lexicon, not the seed, decides
    with pytest.raises(TokenizerError, match="两"):
        tokenizer.encode("两万")


def test_english_words_are_whole_pieces_as_the_alignment_assumes(task, tokenizer):
    for source, _ in task.pairs(2000, seed=9):
        pieces = [p.removeprefix(WORD_START) for p in tokenizer.pieces(tokenizer.encode(source))]
        assert pieces == [piece for piece, _ in _english_pieces(task.number(source))]
        assert " ".join(pieces).replace(" - ", "-") == source
        assert len(task.alignment(source)) == len(task.target(source))


@pytest.mark.parametrize("n, words", [
    (0, ["zero"]), (11, ["eleven", "eleven"]), (110, ["one", "hundred", "ten", "ten"]),
    (405, ["four", "hundred", None, "five"]), (1010, ["one", "thousand", None, "ten", "ten"]),
    (10001, ["ten", None, None, "one"]),
    (12345, ["twelve", None, "twelve", "thousand", "three", "hundred", "forty", "forty", "five"]),
    (77077, ["seventy", None, "seven", "thousand", None, "seventy", "seventy", "seven"]),
])
def test_alignment_points_each_character_at_its_word(task, tokenizer, n, words):
    source = british_number(n)
    pieces = [p.removeprefix(WORD_START) for p in tokenizer.pieces(tokenizer.encode(source))]
    assert [None if i is None else pieces[i] for i in task.alignment(source)] == words


def test_examples_show_the_numeral_shapes(task):
    targets = [task.target(e) for e in task.examples()]
    assert len(targets) == 4 and "百零" in targets[0] and len(targets[1]) == 9
    assert "一十" in targets[2] and "万零" in targets[3]
