"""Frontmatter date values as ISO-8601 text: dates, datetimes, epochs and a few common written forms."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DIGITS = re.compile(r"-?\d{9,}")
_DATE_FORMATS = (
    "%Y/%m/%d",
    "%m/%d/%Y",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d %H:%M:%S",
    "%m/%d/%Y %H:%M",
    "%d %b %Y",
    "%d %B %Y",
    "%b %d, %Y",
    "%B %d, %Y",
    "%b %d %Y",
    "%B %d %Y",
)


def normalise_date(value: Any) -> str | None:
    """ISO-8601 text for a frontmatter date value, or None when it is not a date.

    ``date`` -> ``YYYY-MM-DD``; ``datetime`` -> ISO (with its offset when tz-aware);
    integers are Unix epochs: milliseconds from 1e11 up (Dendron), seconds below, both
    rendered as UTC datetimes; strings: ISO forms (``Z`` allowed), a run of 9+ digits
    as an epoch, and a few common forms (``02/14/2023`` is month/day/year, as in
    ``ms.date``; ``2023/02/14``; ``14 Feb 2023``; ``February 14, 2023``).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (int, float)):
        return _from_epoch(value)
    if isinstance(value, str):
        return _from_string(value.strip())
    return None


def _from_epoch(number: int | float) -> str | None:
    """Epoch seconds or milliseconds as UTC ISO; an 8-digit int that is a valid YYYYMMDD is a date."""
    if isinstance(number, int) and 19_000_101 <= number <= 29_991_231:
        year, month, day = number // 10_000, number // 100 % 100, number % 100
        if 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]:
            return date(year, month, day).isoformat()
    seconds = number / 1000 if abs(number) >= 1e11 else number
    try:
        return (_EPOCH + timedelta(seconds=seconds)).isoformat()
    except (OverflowError, ValueError):  # out of datetime's range, NaN, inf: not a date
        return None


def _from_string(text: str) -> str | None:
    """An ISO form, a 9+ digit epoch, or one of ``_DATE_FORMATS``; None when none fits."""
    if _EPOCH_DIGITS.fullmatch(text):
        return _from_epoch(int(text))
    parsers: list[Callable[[str], date | datetime]] = [
        date.fromisoformat if len(text) <= 10 else datetime.fromisoformat
    ]
    parsers += [partial(_strptime, fmt=fmt) for fmt in _DATE_FORMATS]
    for parse in parsers:
        try:
            return parse(text).isoformat()
        except ValueError:  # this form does not fit: try the next one
            continue
    return None


def _strptime(text: str, fmt: str) -> date | datetime:
    parsed = datetime.strptime(text, fmt)
    return parsed if "%H" in fmt else parsed.date()
