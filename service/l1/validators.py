"""Checks that keep or drop a pattern's candidate match (a rule names one by key).

A pattern finds something shaped like a card number or an IBAN; the validator says whether it
is one. Each takes the matched text (in matching form: lower case, whitespace collapsed) and
returns True to keep the hit.
"""

from __future__ import annotations

from collections.abc import Callable

Validator = Callable[[str], bool]


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit() and ch.isascii())


def luhn(text: str) -> bool:
    """Payment card number: 13–19 digits, Luhn checksum, not one repeated digit."""
    digits = _digits(text)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# ISO 13616 registry lengths for the countries customers write from most often; other
# country codes are accepted at any length between 15 and 34 if the checksum holds.
_IBAN_LENGTHS: dict[str, int] = {
    "ad": 24, "ae": 23, "al": 28, "at": 20, "az": 28, "ba": 20, "be": 16, "bg": 22, "bh": 22,
    "br": 29, "ch": 21, "cr": 22, "cy": 28, "cz": 24, "de": 22, "dk": 18, "do": 28, "ee": 20,
    "eg": 29, "es": 24, "fi": 18, "fo": 18, "fr": 27, "gb": 22, "ge": 22, "gi": 23, "gl": 18,
    "gr": 27, "gt": 28, "hr": 21, "hu": 28, "ie": 22, "il": 23, "is": 26, "it": 27, "jo": 30,
    "kw": 30, "kz": 20, "lb": 28, "li": 21, "lt": 20, "lu": 20, "lv": 21, "mc": 27, "md": 24,
    "me": 22, "mk": 19, "mr": 27, "mt": 31, "mu": 30, "nl": 18, "no": 15, "pk": 24, "pl": 28,
    "ps": 29, "pt": 25, "qa": 29, "ro": 24, "rs": 22, "sa": 24, "se": 24, "si": 19, "sk": 24,
    "sm": 27, "tn": 24, "tr": 26, "ua": 29, "vg": 24, "xk": 20,
}


def iban_mod97(text: str) -> bool:
    """IBAN: country code, check digits, registry length, ISO 7064 mod-97 remainder 1."""
    iban = "".join(ch for ch in text.lower() if ch.isascii() and ch.isalnum())
    if len(iban) < 15 or len(iban) > 34 or not iban[:2].isalpha() or not iban[2:4].isdigit():
        return False
    expected = _IBAN_LENGTHS.get(iban[:2])
    if expected is not None and len(iban) != expected:
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


VALIDATORS: dict[str, Validator] = {
    "luhn": luhn,
    "iban_mod97": iban_mod97,
}
