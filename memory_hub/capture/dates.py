"""Dates in prose: find every date a note mentions, and which of them read as deadlines.

The seed's silent miss was a deadline sitting in prose while the deadline field stayed empty, so a
capture structures its dates when it is written, and ``lookahead --lint`` finds prose deadlines no
field holds. Forms understood (English and Japanese):

* ISO and slashed: ``2026-06-01``, ``2026/6/1``, ``6/15`` (month/day, year inferred)
* Japanese: ``2026年6月1日``, ``6月15日``
* English: ``15 May``, ``May 15``, ``June 1st, 2026``
* relative, only next to a deadline cue: ``by Friday``, ``due tomorrow``, ``金曜まで``, ``明日まで``

A date is a *deadline* when a cue sits next to it: ``by``, ``due``, ``until``, ``before``,
``deadline``, ``まで``, ``までに``, ``締切``/``締め切り``, ``期限``, ``〆切``, ``due:`` … — also when the
cue names what is due first: "Deadline for the runbook: 2026-12-20", "the due date of the audit is
May 3", "ランブックの締切は12月20日".
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}
_MONTH_RE = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
             r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_WEEKDAYS_EN = {"monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
                "thursday": 3, "thu": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5, "sat": 5,
                "sunday": 6, "sun": 6}
_WEEKDAYS_JA = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}

# Absolute forms. Named groups: y, m, d (month may be a name in ``mn``).
_ABSOLUTE = [
    re.compile(r"(?<![\d/.-])(?P<y>20\d{2})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?![\d/])"),
    re.compile(r"(?:(?P<y>20\d{2})\s*年\s*)?(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*日"),
    re.compile(r"(?<![\d/.:-])(?P<m>1[0-2]|0?[1-9])/(?P<d>3[01]|[12]\d|0?[1-9])(?![\d/])"),
    re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mn>{_MONTH_RE})\b\.?(?:,?\s+(?P<y>20\d{{2}}))?",
               re.IGNORECASE),
    re.compile(rf"\b(?P<mn>{_MONTH_RE})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>20\d{{2}}))?",
               re.IGNORECASE),
]
_RELATIVE_EN = re.compile(
    r"\b(?P<cue>by|due|until|till|before|deadline:?)\s+(?:(?P<next>next|this)\s+)?"
    r"(?P<word>today|tonight|tomorrow|end of (?:the )?week|eow|" + "|".join(sorted(_WEEKDAYS_EN, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)
_RELATIVE_JA = re.compile(r"(?P<word>今日|本日|明日|明後日|今週中|来週(?P<nw>[月火水木金土日])曜?|(?P<w>[月火水木金土日])曜(?:日)?)\s*(?:中に|まで|までに|締切|〆切|期限)")

_CUE_BEFORE = re.compile(
    r"(?:\b(?:by|due(?:\s+(?:on|date))?|until|till|before|no later than|deadline|deadline is|eta|expires?(?: on)?)\s*:?\s*(?:on\s+)?"
    r"|(?:期限|締切|締め切り|〆切|納期|期日)\s*(?:は|:|：)?\s*)$",
    re.IGNORECASE,
)
# "Deadline for the runbook: <date>": the cue, what it is for, then a colon or "is" right before the date.
_CUE_FOR = re.compile(
    r"\b(?:deadline|due date|due|target date|cut-?off)\s+(?:for|of|on)\s+[^.!?\n:：]{1,60}?"
    r"(?:\s*[:：]\s*|\s+is\s+(?:on\s+|due\s+)?|\s+(?:falls\s+)?on\s+)$",
    re.IGNORECASE,
)
_CUE_AFTER = re.compile(r"^\s*(?:\([^)]{0,6}\)|（[^）]{0,6}）)?\s*(?:まで|までに|迄|締切|締め切り|〆切|期限|が期限|が締切|締)")


@dataclass(frozen=True)
class DateMention:
    """One date found in text: the date, the words as written, and whether a deadline cue sits by it."""

    date: _dt.date
    text: str
    start: int
    deadline: bool


def _year_for(month: int, day: int, today: _dt.date) -> int:
    """A date written without a year: the next occurrence within ~10 months, else this year."""
    try:
        candidate = _dt.date(today.year, month, day)
    except ValueError:
        return today.year
    if (today - candidate).days > 60:
        return today.year + 1
    return today.year


def _make(y: int | None, m: int, d: int, today: _dt.date) -> _dt.date | None:
    year = y if y is not None else _year_for(m, d, today)
    try:
        return _dt.date(year, m, d)
    except ValueError:
        return None


def _is_cued(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 30):start]
    after = text[end:end + 12]
    if _CUE_BEFORE.search(before) or _CUE_AFTER.match(after):
        return True
    sentence = re.split(r"[.!?。！？\n]\s", text[max(0, start - 90):start])[-1]
    return bool(_CUE_FOR.search(sentence))


def _next_weekday(today: _dt.date, weekday: int, next_week: bool = False) -> _dt.date:
    days = (weekday - today.weekday()) % 7 + (7 if next_week else 0)
    return today + _dt.timedelta(days=days)


def _relative(word: str, today: _dt.date, nxt: str | None) -> _dt.date | None:
    w = word.lower()
    if w in ("today", "tonight"):
        return today
    if w == "tomorrow":
        return today + _dt.timedelta(days=1)
    if w in ("eow",) or w.startswith("end of"):
        return _next_weekday(today, 4)
    if w in _WEEKDAYS_EN:
        return _next_weekday(today, _WEEKDAYS_EN[w], next_week=(nxt or "").lower() == "next")
    return None


def find_dates(text: str, today: _dt.date | None = None) -> list[DateMention]:
    """Every date mentioned in ``text``, in order, each flagged when a deadline cue sits next to it.

    ``today`` anchors years left out ("6/15") and relative words ("by Friday").
    """
    today = today or _dt.date.today()
    found: list[DateMention] = []
    taken: list[tuple[int, int]] = []

    def free(s: int, e: int) -> bool:
        return all(e <= a or s >= b for a, b in taken)

    for pattern in _ABSOLUTE:
        for m in pattern.finditer(text):
            if not free(m.start(), m.end()):
                continue
            groups = m.groupdict()
            y = int(groups["y"]) if groups.get("y") else None
            month = _MONTHS[groups["mn"].lower()[:3]] if groups.get("mn") else int(groups["m"])
            date = _make(y, month, int(groups["d"]), today)
            if date is None:
                continue
            taken.append((m.start(), m.end()))
            found.append(DateMention(date, m.group(0).strip(), m.start(), _is_cued(text, m.start(), m.end())))
    for m in _RELATIVE_EN.finditer(text):
        if not free(m.start("word"), m.end()):
            continue
        date = _relative(m.group("word"), today, m.group("next"))
        if date is not None:
            taken.append((m.start(), m.end()))
            found.append(DateMention(date, m.group(0), m.start(), True))
    for m in _RELATIVE_JA.finditer(text):
        if not free(m.start(), m.end()):
            continue
        word = m.group("word")
        date: _dt.date | None
        if word.startswith(("今日", "本日")):
            date = today
        elif word.startswith("明後日"):
            date = today + _dt.timedelta(days=2)
        elif word.startswith("明日"):
            date = today + _dt.timedelta(days=1)
        elif word.startswith("今週中"):
            date = _next_weekday(today, 4)
        elif m.group("nw"):
            date = _next_weekday(today, _WEEKDAYS_JA[m.group("nw")], next_week=True)
        elif m.group("w"):
            date = _next_weekday(today, _WEEKDAYS_JA[m.group("w")])
        else:
            date = None
        if date is not None:
            taken.append((m.start(), m.end()))
            found.append(DateMention(date, m.group(0), m.start(), True))
    found.sort(key=lambda d: d.start)
    return found


def find_deadline(text: str, today: _dt.date | None = None) -> _dt.date | None:
    """The earliest deadline-cued date in ``text`` that is not in the past, else the earliest cued one."""
    cued = [d.date for d in find_dates(text, today) if d.deadline]
    if not cued:
        return None
    today = today or _dt.date.today()
    upcoming = [d for d in cued if d >= today]
    return min(upcoming) if upcoming else min(cued)


def parse_field_date(value: object) -> _dt.date | None:
    """A frontmatter date value (``2026-06-01``, a datetime string, or a date) as a date."""
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if not isinstance(value, str):
        return None
    m = re.match(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})", value)
    if not m:
        return None
    try:
        return _dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None
