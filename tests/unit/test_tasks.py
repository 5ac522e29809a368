"""Task registry: answers checked against independent oracles, held-out split, batches, alignments."""

from __future__ import annotations

import random
import re
from datetime import date, datetime, timedelta

import pytest
import torch

from transformer.network.special_tokens import BOS, EOS, PAD
from transformer.network.tokenizers import CharTokenizer, SentencePieceTokenizer, TokenizerError
from transformer.tasks import (
    DATE_FORMATS,
    TASKS,
    LetterTask,
    TaskError,
    english_number,
    german_morphemes,
    german_number,
    is_heldout,
    make_task,
    stable_hash,
)

# Hand-written translations: the reference the Numbers task is checked against.
GERMAN = {
    0: "null", 1: "eins", 7: "sieben", 12: "zwölf", 16: "sechzehn", 17: "siebzehn", 20: "zwanzig", 21: "einundzwanzig",
    30: "dreißig", 42: "zweiundvierzig", 77: "siebenundsiebzig", 99: "neunundneunzig", 100: "einhundert",
    101: "einhunderteins", 111: "einhundertelf", 121: "einhunderteinundzwanzig", 307: "dreihundertsieben",
    999: "neunhundertneunundneunzig", 1000: "eintausend", 1001: "eintausendeins", 2021: "zweitausendeinundzwanzig",
    21000: "einundzwanzigtausend", 101001: "einhunderteintausendeins", 200000: "zweihunderttausend",
    999999: "neunhundertneunundneunzigtausendneunhundertneunundneunzig",
}
ENGLISH = {0: "zero", 7: "seven", 12: "twelve", 21: "twenty-one", 42: "forty-two", 100: "one hundred",
           307: "three hundred seven", 999: "nine hundred ninety-nine", 1001: "one thousand one",
           21000: "twenty-one thousand", 123456: "one hundred twenty-three thousand four hundred fifty-six"}

# strptime patterns (C locale) for the formats, an independent reader of generated dates.
STRPTIME = ["%B %d, %Y", "%d %B %Y", "%m/%d/%Y", "%b %d %Y", "%Y.%m.%d", "%A, %B %d, %Y", "%a %d %b %Y", "%d of %B %Y"]


def _read_date(source: str) -> str:
    text = re.sub(r"^(\d+)(st|nd|rd|th) of", r"\1 of", source)
    for pattern in STRPTIME:
        try:
            return datetime.strptime(text, pattern).date().isoformat()
        except ValueError:
            pass
    raise AssertionError(f"no strptime pattern reads {source!r}")


ORACLES = {
    "reverse": lambda s: s[::-1],
    "copy": lambda s: s,
    "sort": lambda s: "".join(sorted(s)),
    "addition": lambda s: str(sum(int(x) for x in s.split("+"))),
    "dates": _read_date,
}

INVALID = {
    "reverse": ["", "abC", "ab c", "ab1"],
    "copy": ["", "Abc"],
    "sort": ["", "a-b"],
    "addition": ["", "1+", "+1", "1+2+3", "1234+5", "01+2", "1 + 2", "1-2", "\u0663+1", "12"],
    "dates": ["", "2021-03-03", "March 32, 2021", "02/29/2021", "13/01/2021", "Tuesday, March 3, 2021",
              "3th of March 2021", "Mar 3, 2021", "Smarch 3, 2021", "March 3, 21", "0000.01.01"],
    "numbers": ["", "42", "three hundred and seven", "twenty one", "twelve hundred", "one thousand thousand",
                "forty-", "ninety hundred thousand", "one thousand", "vierzig"],
}

# The smallest input spaces each task allows; both splits must still be non-empty.
SMALLEST = [("reverse", {"min_len": 1, "max_len": 1}), ("copy", {"min_len": 2, "max_len": 2}),
            ("sort", {"min_len": 1, "max_len": 1}), ("addition", {"max_digits": 1}), ("numbers", {"max_value": 10}),
            ("dates", {"min_year": 2000, "max_year": 2000})]


@pytest.fixture(scope="module")
def tasks():
    """Each task with default params and its tokenizer (trained once per module)."""
    out = {}
    for name in TASKS:
        task = make_task(name)
        out[name] = (task, task.make_tokenizer(0))
    return out


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_target_matches_independent_oracle(name):
    task = make_task(name)
    for split in ("train", "heldout"):
        for source, target in task.pairs(300, seed=3, split=split):
            assert target == task.target(source) == ORACLES[name](source), source


def test_numbers_match_hand_written_translations():
    task = make_task("numbers", max_value=999999)
    for n, german in GERMAN.items():
        assert german_number(n) == german
        assert task.target(english_number(n)) == german
    for n, english in ENGLISH.items():
        assert english_number(n) == english
    assert task.target("Forty-Two") == task.target("  forty-two ") == "zweiundvierzig"


def test_numbers_english_reads_back_for_every_small_number_and_a_sample():
    task = make_task("numbers", max_value=999999)
    rng = random.Random(0)
    for n in [*range(2000), *(rng.randint(0, 999999) for _ in range(2000))]:
        assert task.number(english_number(n)) == n


def test_numbers_generated_pairs_agree_with_reference():
    task = make_task("numbers", max_value=999999)
    for source, target in task.pairs(3000, seed=1):
        assert english_number(task.number(source)) == source and german_number(task.number(source)) == target


def test_dates_every_format_reads_back_every_day_of_a_leap_year():
    task = make_task("dates")
    for day in (date(2000, 1, 1) + timedelta(days=i) for i in range(366)):
        for form in DATE_FORMATS:
            text = form.render(day)
            assert task.target(text) == task.target(text.upper()) == day.isoformat(), text
            assert _read_date(text) == day.isoformat()


def test_dates_known_renderings():
    rendered = [f.render(date(2021, 3, 3)) for f in DATE_FORMATS]
    assert rendered == ["March 3, 2021", "3 March 2021", "03/03/2021", "Mar 3 2021", "2021.03.03",
                        "Wednesday, March 3, 2021", "Wed 3 Mar 2021", "3rd of March 2021"]
    task = make_task("dates")
    assert task.target("04/05/2021") == "2021-04-05"  # US order: month first
    assert task.target("22nd of June 1999") == "1999-06-22" and task.target("1/2/1903") == "1903-01-02"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_examples_are_heldout_and_answerable(name, tasks):
    task, tokenizer = tasks[name]
    examples = task.examples()
    assert examples and len(set(examples)) == len(examples)
    for source in examples:
        assert is_heldout(source)
        target = task.target(source)
        if name in ORACLES:
            assert target == ORACLES[name](source)
        assert [tokenizer.decode(tokenizer.encode(text)) for text in (source, target)] == [source, target]


def test_examples_show_each_date_format_and_number_shapes():
    examples = make_task("dates").examples()
    assert len(examples) == len(DATE_FORMATS)
    assert all(f.pattern.fullmatch(e) for f, e in zip(DATE_FORMATS, examples))
    numbers = make_task("numbers", max_value=999999).examples()
    assert any("-" in e and " " not in e for e in numbers) and any("thousand" in e for e in numbers)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_sources_raise_task_error(name):
    task = make_task(name)
    for source in INVALID[name]:
        with pytest.raises(TaskError):
            task.target(source)
        assert task.answer(source) is None  # the pages' "no right answer to show"
    example = task.examples()[0]
    assert task.answer(example) == task.target(example)


@pytest.mark.parametrize("name, params", [
    ("addition", {"max_digits": 0}), ("addition", {"max_digits": 9}), ("addition", {"max_digits": "3"}),
    ("addition", {"max_digits": True}), ("addition", {"digits": 3}), ("dates", {"min_year": 2000, "max_year": 1999}),
    ("dates", {"min_year": 999}), ("dates", {"max_year": 10000}), ("numbers", {"max_value": 9}),
    ("numbers", {"max_value": 1_000_000}), ("numbers", {"max_value": 99.5}), ("reverse", {"max_len": 49}),
    ("reverse", {"min_len": True}), ("copy", {"min_len": 5, "max_len": 2}), ("sort", {"max_len": "abc"}),
    ("nonsense", {}),
])
def test_bad_params_raise_readable_task_error(name, params):
    with pytest.raises(TaskError) as err:
        make_task(name, **params)
    assert any(word in str(err.value) for word in (params or [name]))  # names the parameter (or task) at fault


@pytest.mark.parametrize("name", sorted(TASKS))
def test_pairs_are_deterministic_per_seed(name):
    task = make_task(name)
    assert task.pairs(40, seed=7) == task.pairs(40, seed=7)
    assert task.pairs(40, seed=7) != task.pairs(40, seed=8)
    with pytest.raises(TaskError):
        task.pairs(1, seed=0, split="test")


@pytest.mark.parametrize("name, params", [(name, {}) for name in sorted(TASKS)] + SMALLEST)
def test_train_and_heldout_never_share_a_source(name, params):
    """Per task (defaults and smallest input spaces): both splits exist and are disjoint."""
    task = make_task(name, **params)
    train = {s for s, _ in task.pairs(400, seed=5, split="train")}
    heldout = {s for s, _ in task.pairs(100, seed=5, split="heldout")}
    assert train and heldout and not train & heldout
    assert not any(map(task.in_heldout, train)) and all(map(task.in_heldout, heldout))
    assert all(map(is_heldout, heldout))  # a task may keep more in training, never hold out more


def test_python_hash_matches_tensor_hash():
    rng = random.Random(0)
    texts = ["", "a", "abc", "Wednesday, March 3, 2021", "zweiundvierzig ßöü", "\u2581x\U0001F600"]
    texts += ["".join(rng.choice("abcxyz09 -") for _ in range(rng.randint(1, 40))) for _ in range(200)]
    width = max(map(len, texts))
    codes = torch.tensor([[ord(c) for c in t] + [0] * (width - len(t)) for t in texts])
    hashed = stable_hash(codes, torch.tensor([len(t) for t in texts]))
    assert [bool(h % 10 == 0) for h in hashed] == [is_heldout(t) for t in texts]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_batch_rows_decode_to_train_pairs(name, tasks):
    task, tokenizer = tasks[name]
    src, tgt = task.batch(64, torch.Generator().manual_seed(0), tokenizer)
    assert src.shape[0] == tgt.shape[0] == 64 and src.dtype == tgt.dtype == torch.int64
    assert (tgt[:, 0] == BOS).all()
    for s_row, t_row in zip(src.tolist(), tgt.tolist()):
        s_len, t_len = s_row.index(EOS), t_row.index(EOS)
        assert set(s_row[s_len + 1:]) <= {PAD} and set(t_row[t_len + 1:]) <= {PAD}
        assert PAD not in s_row[:s_len] and PAD not in t_row[:t_len]
        source = tokenizer.decode(s_row)
        assert tokenizer.encode(source) == s_row[:s_len]
        assert not is_heldout(source)
        assert tokenizer.decode(t_row) == task.target(source)
    assert (src[:, -1] != PAD).any() and (tgt[:, -1] != PAD).any()  # no all-pad column at the end
    again = task.batch(64, torch.Generator().manual_seed(0), tokenizer)
    assert torch.equal(again[0], src) and torch.equal(again[1], tgt)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_lengths_stay_within_declared_maxima(name, tasks):
    task, tokenizer = tasks[name]
    for source, target in task.pairs(500, seed=2):
        assert len(source) <= task.max_source_chars and len(target) <= task.max_target_chars
        assert len(tokenizer.encode(source)) <= task.max_source_chars


@pytest.mark.parametrize("name", ["reverse", "copy", "sort"])
def test_letter_alignment_points_at_the_copied_letter(name, tasks):
    task, _ = tasks[name]
    for source, target in task.pairs(100, seed=4):
        align = task.alignment(source)
        assert len(align) == len(target) and sorted(align) == list(range(len(source)))
        assert "".join(source[i] for i in align) == target


@pytest.mark.parametrize("name", ["addition", "dates", "numbers"])
def test_alignment_is_undefined_where_no_single_position_fits(name, tasks):
    task, _ = tasks[name]
    assert task.alignment(task.examples()[0]) is None


def test_letter_batch_is_as_wide_as_its_longest_string():
    """Like encode_pairs, a letter batch pads to its longest string, not to the task's max_len: the model
    never spends time on all-pad columns."""
    task = make_task("copy", min_len=1, max_len=40)
    src, tgt = task.batch(3, torch.Generator().manual_seed(2), task.make_tokenizer())
    longest = int((src != PAD).sum(dim=1).max()) - 1  # letters, without </s>
    assert longest < 40 and src.shape[1] == longest + 1 and tgt.shape[1] == longest + 2


def test_letter_batch_never_yields_heldout_strings():
    task = make_task("reverse", min_len=2, max_len=2)  # 676 strings, so held-out ones would turn up often
    tokenizer = task.make_tokenizer()
    src, _ = task.batch(3000, torch.Generator().manual_seed(1), tokenizer)
    sources = {tokenizer.decode(row) for row in src.tolist()}
    assert len(src) == 3000 and len(sources) > 500
    assert not any(map(is_heldout, sources))
    assert any(is_heldout(a + b) for a in "abcdefghij" for b in "abcdefghij")


def test_tokenizers_cover_their_tasks(tasks):
    assert isinstance(tasks["addition"][1], CharTokenizer) and isinstance(tasks["dates"][1], CharTokenizer)
    numbers, tokenizer = tasks["numbers"]
    assert isinstance(tokenizer, SentencePieceTokenizer) and tokenizer.vocab_size <= numbers.vocab_size
    for n in range(numbers.max_value + 1):
        for text in (english_number(n), german_number(n)):
            assert tokenizer.decode(tokenizer.encode(text)) == text
    with pytest.raises(TokenizerError, match="'Q'"):
        tokenizer.encode("forty-Qtwo")


def test_numbers_tokenizer_is_seeded_and_splits_german_units_before_tens(tasks):
    numbers, tokenizer = tasks["numbers"]
    assert numbers.make_tokenizer(0).model == tokenizer.model
    assert numbers.make_tokenizer(1).model != tokenizer.model
    for n in (42, 307, 999):  # each German morpheme is one piece, the same wherever it stands
        assert tokenizer.pieces(tokenizer.encode(german_number(n))) == german_morphemes(n)
    assert tokenizer.pieces(tokenizer.encode("zwanzig")) == tokenizer.pieces(tokenizer.encode("einundzwanzig"))[-1:]
    english = tokenizer.pieces(tokenizer.encode("two hundred forty-two"))
    assert english == ["two", "\u2581hundred", "\u2581forty", "-", "two"]


def test_registry_names_and_letter_tasks():
    assert set(TASKS) == {"reverse", "copy", "sort", "addition", "dates", "numbers", "zh_numbers"}
    assert all(TASKS[name].name == name for name in TASKS)
    assert issubclass(TASKS["reverse"], LetterTask)


@pytest.mark.parametrize("name", ["addition", "dates", "numbers", "zh_numbers"])
def test_heldout_draws_are_varied(name):
    """No handful of tiny inputs dominates evaluation: 1000 held-out draws hold many distinct sources."""
    sources = [s for s, _ in make_task(name).pairs(1000, seed=0, split="heldout")]
    assert len(set(sources)) > 60


def test_addition_trains_on_every_single_digit_sum():
    """Holding out 1+0 and 0+1 once meant the answer "1" never appeared in training (the shipped model
    then wrote "11"); all 100 single-digit sums are training inputs, everything else follows the hash split."""
    task = make_task("addition")
    singles = [f"{a}+{b}" for a in range(10) for b in range(10)]
    assert not any(map(task.in_heldout, singles))
    assert any(map(is_heldout, singles))  # the plain hash split would have held some out
    heldout = [s for s, _ in task.pairs(300, seed=3, split="heldout")]
    assert heldout and all(len(s) > 3 and is_heldout(s) for s in heldout)
    assert "1" in {t for _, t in task.pairs(3000, seed=3, split="train")}
    assert make_task("addition", max_digits=1).pairs(5, seed=0, split="heldout")  # tiny variant keeps a split
