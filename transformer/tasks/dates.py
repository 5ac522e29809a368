"""The dates task: a date written in one of several human formats -> ISO 8601."""

from __future__ import annotations

import random
import re
import string
from datetime import date, timedelta

from transformer.i18n import Localized, t
from transformer.network.tokenizers import CharTokenizer, Tokenizer
from .base import Task, TaskError, bounded_int

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NUMBER = {name.lower(): i + 1 for i, m in enumerate(MONTHS) for name in (m, m[:3])}
_WEEKDAY_NUMBER = {name.lower(): i for i, w in enumerate(WEEKDAYS) for name in (w, w[:3])}
_LEAP_YEAR = [date(2000, 1, 1) + timedelta(days=i) for i in range(366)]  # every month, day and weekday


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _choice(group: str, names) -> str:
    return f"(?P<{group}>{'|'.join(names)})"


# field -> (how a date renders it, the pattern that reads it back)
_DATE_FIELDS = {
    "year": (lambda d: f"{d.year:04d}", r"(?P<year>[0-9]{4})"),
    "mm": (lambda d: f"{d.month:02d}", r"(?P<mm>[0-9]{1,2})"),
    "dd": (lambda d: f"{d.day:02d}", r"(?P<day>[0-9]{1,2})"),
    "day": (lambda d: str(d.day), r"(?P<day>[0-9]{1,2})"),
    "nth": (lambda d: _ordinal(d.day), r"(?P<nth>[0-9]{1,2}(?:st|nd|rd|th))"),
    "month": (lambda d: MONTHS[d.month - 1], _choice("month", MONTHS)),
    "mon": (lambda d: MONTHS[d.month - 1][:3], _choice("month", (m[:3] for m in MONTHS))),
    "weekday": (lambda d: WEEKDAYS[d.weekday()], _choice("weekday", WEEKDAYS)),
    "wkd": (lambda d: WEEKDAYS[d.weekday()][:3], _choice("weekday", (w[:3] for w in WEEKDAYS))),
}
_FIELD_WIDTH = {f: max(len(render(d)) for d in _LEAP_YEAR) for f, (render, _) in _DATE_FIELDS.items()}


class DateFormat:
    """One human way of writing a date, e.g. "{month} {day}, {year}"; renders dates and reads them back."""

    def __init__(self, template: str):
        parts = [(literal, field) for literal, field, _, _ in string.Formatter().parse(template)]
        self.template = template
        self.fields = [field for _, field in parts if field]
        self.pattern = re.compile("".join(re.escape(lit) + (_DATE_FIELDS[f][1] if f else "") for lit, f in parts),
                                  re.IGNORECASE)
        self.max_chars = sum(len(lit) for lit, _ in parts) + sum(_FIELD_WIDTH[f] for f in self.fields)

    def render(self, day: date) -> str:
        return self.template.format(**{f: _DATE_FIELDS[f][0](day) for f in self.fields})

    def read(self, text: str) -> date | None:
        """The date `text` names in this format; None if it is not in this format; TaskError if impossible."""
        match = self.pattern.fullmatch(text)
        if not match:
            return None
        got = {k: v.lower() for k, v in match.groupdict().items()}
        month = int(got["mm"]) if "mm" in got else _MONTH_NUMBER[got["month"]]
        day = int(got["day"] if "day" in got else got["nth"][:-2])
        if "nth" in got and got["nth"] != _ordinal(day):
            raise TaskError(t("messages.ordinal", day=f"{day}{got['nth'][-2:]}", right=repr(_ordinal(day))))
        try:
            result = date(int(got["year"]), month, day)
        except ValueError:
            raise TaskError(t("messages.no_such_date", text=repr(text))) from None
        if "weekday" in got and _WEEKDAY_NUMBER[got["weekday"]] != result.weekday():
            raise TaskError(t("messages.weekday", date=result.isoformat(), was=WEEKDAYS[result.weekday()],
                              said=match["weekday"]))
        return result


# Slashed dates are US style, month first: "03/04/2021" is March 4. No two-digit years.
DATE_FORMATS = tuple(map(DateFormat, (
    "{month} {day}, {year}",             # March 3, 2021
    "{day} {month} {year}",              # 3 March 2021
    "{mm}/{dd}/{year}",                  # 03/03/2021
    "{mon} {day} {year}",                # Mar 3 2021
    "{year}.{mm}.{dd}",                  # 2021.03.03
    "{weekday}, {month} {day}, {year}",  # Wednesday, March 3, 2021
    "{wkd} {day} {mon} {year}",          # Wed 3 Mar 2021
    "{nth} of {month} {year}",           # 3rd of March 2021
)))


class Dates(Task):
    """A random date written in one of `DATE_FORMATS` -> ISO 8601 "YYYY-MM-DD".

    Sources are generated in the formats' own capitalisation; `target` reads them in any case and
    accepts one- or two-digit days and months. Any real date with a four-digit year is a valid input,
    the year range only bounds what is generated."""

    name, title = "dates", Localized("tasks.dates.title")
    description = Localized("tasks.dates.description")
    alphabet = "".join(sorted({c for f in DATE_FORMATS for d in _LEAP_YEAR for c in f.render(d)} | set("-")))

    def __init__(self, min_year: int = 1950, max_year: int = 2049):
        super().__init__(min_year=bounded_int("min_year", min_year, 1000, 9999),
                         max_year=bounded_int("max_year", max_year, 1000, 9999))
        if min_year > max_year:
            raise TaskError(t("messages.years_order", lo=min_year, hi=max_year))
        self.min_year, self.max_year = min_year, max_year
        self._days = (date(min_year, 1, 1).toordinal(), date(max_year, 12, 31).toordinal())

    @property
    def max_source_chars(self) -> int:
        return max(f.max_chars for f in DATE_FORMATS)

    @property
    def max_target_chars(self) -> int:
        return len("YYYY-MM-DD")

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        return CharTokenizer(self.alphabet)

    def random_source(self, rng: random.Random) -> str:
        day = date.fromordinal(rng.randint(*self._days))
        return rng.choice(DATE_FORMATS).render(day)

    def target(self, source: str) -> str:
        for form in DATE_FORMATS:
            if (day := form.read(source)) is not None:
                return day.isoformat()
        shown = ", ".join(repr(f.render(date(2021, 3, 3))) for f in DATE_FORMATS)
        raise TaskError(t("messages.not_a_date", got=repr(source), formats=shown))

    def examples(self) -> list[str]:
        return self._heldout_like([f.pattern.fullmatch for f in DATE_FORMATS])
