""" "Did you mean": the valid choice a user most likely meant, ranked by how people misspell.

A leaf (plain functions, no project imports). People rarely mistype at random: they leave out a
vendor or family word (NVIDIA_A100 for NVIDIA_TESLA_A100), drop a qualifier, write a key without
the section it lives in (`--set epochs=5` for trainer.epochs), change a separator (a100_80gbx8)
or a digit (us-central9). So candidates are ranked, in this order, by:

1. the same text once case and separators (`_`, `-`, `.`) are ignored;
2. a dotted choice whose last part is the value (epochs -> trainer.epochs);
3. how many of the value's distinctive tokens the choice carries (a token is distinctive when
   fewer than half of the choices carry it: NVIDIA says nothing among accelerators);
4. how many of the other tokens differ from one of the choice's only in their numbers
   (central9 ~ central1, t5 ~ t4);
5. the same last token (NVIDIA_A100 ends like NVIDIA_TESLA_A100, not like NVIDIA_A100_80GB);
6. the fewest tokens the value does not have (NVIDIA_H100 -> NVIDIA_H100_80GB before _MEGA_80GB);
7. plain string similarity (difflib's ratio), then the nearest number (h100x9 -> h100x8, not
   h100x1), then the shallower choice.

A choice is offered only when it matches on 1-4 or is similar enough (ratio >= 0.6). When one
choice is the same text once case and separators are ignored, or the only one a single letter away
(a letter left out, added, changed, or two swapped: us-centrl1, us-cnetral1), it is offered alone:
the user meant it, and a list beside it reads as doubt. A digit off (us-central9) keeps the list.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

_SEPARATORS = re.compile(r"[_\-.]+")
_DIGITS = re.compile(r"[0-9]+")
CUTOFF = 0.6  # difflib's default similarity for a close match


def _tokens(text: str) -> list[str]:
    return [t for t in _SEPARATORS.split(text.lower()) if t]


def _shape(token: str) -> str | None:
    """A token with its numbers blanked (central9 -> central#), or None if it has none."""
    shape = _DIGITS.sub("#", token)
    return shape if shape != token else None


def _number(text: str) -> int | None:
    found = _DIGITS.findall(text)
    return int(found[-1]) if found else None


def nearest(value: str, choices: Iterable[Any], n: int = 3) -> list[str]:
    """The choices a user who wrote `value` most likely meant, best first.

    Args:
        value: what the user wrote (a key, an enum value, a region, a preset name).
        choices: the valid values (any iterable of strings, e.g. a dict's keys); dotted choices
            (``trainer.epochs``) also match on their last part.
        n: at most this many suggestions.

    Returns:
        Up to `n` choices, best first; empty when none is close.
    """
    options = list(dict.fromkeys(str(c) for c in choices))
    value = str(value)
    if not value or not options:
        return []
    low = value.lower()
    squashed = _SEPARATORS.sub("", low)
    tokens = set(_tokens(value))
    option_tokens = {c: set(_tokens(c)) for c in options}
    common = {t for t in tokens if sum(t in option_tokens[c] for c in options) * 2 >= len(options)}
    distinctive = tokens - common
    last_token = _tokens(value)[-1] if tokens else ""

    ranked = []
    for choice in options:
        last_part = choice.rsplit(".", 1)[-1]
        ctoks = option_tokens[choice]
        exact = _SEPARATORS.sub("", choice.lower()) == squashed
        under_section = "." in choice and last_part.lower() == low
        shared = len(distinctive & ctoks)
        choice_shapes = {_shape(t) for t in ctoks} - {None}
        shapes = sum(1 for t in distinctive - ctoks if _shape(t) and _shape(t) in choice_shapes)
        ctok_list = _tokens(choice)
        same_last = bool(ctok_list) and ctok_list[-1] == last_token
        extra = len(ctoks - tokens)
        ratio = max(
            difflib.SequenceMatcher(None, low, choice.lower()).ratio(),
            difflib.SequenceMatcher(None, low, last_part.lower()).ratio(),
        )
        if not (exact or under_section or shared or shapes or ratio >= CUTOFF):
            continue
        a, b = _number(low), _number(choice)
        digits_off = abs(a - b) if a is not None and b is not None else float("inf")
        ranked.append(
            (
                (
                    exact,
                    under_section,
                    shared,
                    shapes,
                    same_last,
                    -extra,
                    ratio,
                    -digits_off,
                    -choice.count("."),
                ),
                choice,
            )
        )
    ranked.sort(key=lambda item: item[0], reverse=True)
    if ranked and ranked[0][0][0]:  # the same text but for case and separators
        return [ranked[0][1]]
    letter_off = [choice for _, choice in ranked if _one_letter_off(low, choice.lower())]
    if len(letter_off) == 1:
        return letter_off
    return [choice for _, choice in ranked[:n]]


def _one_letter_off(a: str, b: str) -> bool:
    """a and b differ by one letter (not a digit) left out, added or changed, or two swapped."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        if a[i + 1 :] == b[i + 1 :]:  # one changed
            return a[i].isalpha() and b[i].isalpha()
        return a[i + 2 :] == b[i + 2 :] and a[i : i + 2] == b[i : i + 2][::-1]  # two swapped
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer[i].isalpha() and longer[i + 1 :] == shorter[i:]


def suggest(value: str, choices: Iterable[Any]) -> str | None:
    """The one choice to offer in a "did you mean" hint.

    Args:
        value: what the user wrote.
        choices: the valid values (see `nearest`).

    Returns:
        The best choice, or None when none is close.
    """
    found = nearest(value, choices, n=1)
    return found[0] if found else None
