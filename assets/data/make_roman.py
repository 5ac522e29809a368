"""Writes roman_numerals.tsv beside this script: every number from 1 to 999 and its Roman numeral, one pair
per line (a header row "number<TAB>roman" first). Deterministic: `python assets/data/make_roman.py`."""

from pathlib import Path

SYMBOLS = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
           (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def roman(number: int) -> str:
    """The Roman numeral of 1..3999 (subtractive notation: 4 is IV, 90 is XC)."""
    out = []
    for value, symbol in SYMBOLS:
        count, number = divmod(number, value)
        out.append(symbol * count)
    return "".join(out)


def main() -> None:
    lines = ["number\troman"] + [f"{n}\t{roman(n)}" for n in range(1, 1000)]
    (Path(__file__).parent / "roman_numerals.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
