"""Checks that keep or drop a pattern's candidate match (a rule names one by key).

A pattern finds something shaped like a card number, an IBAN or a national identifier; the
validator says whether it is one. Each takes the matched text (in matching form: lower case,
whitespace collapsed; a label such as "pesel:" may be part of it) and returns True to keep
the hit. Checksums and per-country formats are python-stdnum's: it follows the registries
(ISO 13616 for IBANs, each country's rules for its identifiers), so this module does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

from stdnum import iban as _iban
from stdnum import luhn as _luhn
from stdnum.br import cpf
from stdnum.ca import sin
from stdnum.cn import ric
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.exceptions import ValidationError
from stdnum.fr import nir
from stdnum.gb import nhs
from stdnum.it import codicefiscale
from stdnum.jp import in_ as my_number
from stdnum.kr import rrn
from stdnum.nl import bsn
from stdnum.pl import pesel
from stdnum.pt import nif as pt_nif
from stdnum.ru import inn
from stdnum.us import ssn

Validator = Callable[[str], bool]


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit() and ch.isascii())


def luhn(text: str) -> bool:
    """Payment card number: 13–19 digits, Luhn checksum, not one repeated digit."""
    digits = _digits(text)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    return _luhn.is_valid(digits)


def iban_mod97(text: str) -> bool:
    """IBAN: the country's registered length and format (BBAN structure), mod-97 check.

    Country modules that also look the bank code up in a bundled registry (Belgium's does)
    are not applied: a registry that lags behind the banks would drop a real IBAN.
    """
    return _iban.is_valid(text, check_country=False)


# A national identifier: its scheme's module and the token shape handed to it. The shape
# finds the number inside a labelled match ("pesel: 44051401359"): the candidate is the last
# token of that shape in the matched text.
_NATIONAL: dict[str, tuple[ModuleType, str]] = {
    "de_idnr": (idnr, r"\d(?:[ /.]?\d){10}"),
    "fr_nir": (nir, r"[12](?:[ .]?[0-9ab]){14}"),
    "es_dni": (dni, r"\d{8}[ -]?[a-z]"),
    "es_nie": (nie, r"[xyz][ -]?\d{7}[ -]?[a-z]"),
    "it_codicefiscale": (codicefiscale, r"[a-z]{6}\d{2}[a-z]\d{2}[a-z]\d{3}[a-z]"),
    "nl_bsn": (bsn, r"\d(?:[ .]?\d){7,8}"),
    "pl_pesel": (pesel, r"\d{11}"),
    "br_cpf": (cpf, r"\d{3}\.?\d{3}\.?\d{3}-?\d{2}"),
    "pt_nif": (pt_nif, r"\d{3} ?\d{3} ?\d{3}"),
    "cn_ric": (ric, r"\d{17}[\dx]"),
    "kr_rrn": (rrn, r"\d{6}-?\d{7}"),
    "jp_my_number": (my_number, r"\d{4}[ -]?\d{4}[ -]?\d{4}"),
    "ru_inn": (inn, r"\d{12}|\d{10}"),
    "us_ssn": (ssn, r"\d{3}-\d{2}-\d{4}"),
    "gb_nhs": (nhs, r"\d{3}[ -]?\d{3}[ -]?\d{4}"),
    "ca_sin": (sin, r"\d{3}[ -]?\d{3}[ -]?\d{3}"),
}


def _national_checker(key: str) -> Validator:
    module, shape = _NATIONAL[key]
    token = re.compile(rf"(?<![0-9a-z])(?:{shape})(?![0-9a-z])", re.ASCII)

    def check(text: str) -> bool:
        candidates = token.findall(text.lower())
        if not candidates:
            return False
        number = candidates[-1].upper()
        try:
            module.validate(number)
        except ValidationError:
            return False
        # Runs of one or two digits pass several checksums (111111111…); no one holds them.
        return len(set(_digits(number))) > 2

    check.__name__ = key
    check.__doc__ = f"{module.__name__} (python-stdnum), found by the shape {shape!r}"
    return check


NATIONAL_ID_VALIDATORS: dict[str, Validator] = {key: _national_checker(key) for key in _NATIONAL}

# Labels people write before an identifier, in matching form (Cyrillic look-alikes folded as
# normalise.py does: "инн" → "иhh"), and the scheme each names. A labelled candidate is
# checked against that scheme only; an unlabelled one only against schemes whose shape is
# distinctive, because a bare 9-digit number passes one of the 9-digit checksums one time
# in four.
_LABELS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), key)
    for pattern, key in (
        (r"steuer-?id|steuer-?identifikationsnummer|\bidnr\b|identifikationsnummer", "de_idnr"),
        (r"s[ée]curit[ée] sociale|\bs[ée]cu\b|\bnir\b|\binsee\b|carte vitale", "fr_nir"),
        (r"\bnie\b", "es_nie"),
        (r"\bdni\b", "es_dni"),
        (r"codice fiscale", "it_codicefiscale"),
        (r"\bbsn\b|burgerservicenummer|sofinummer", "nl_bsn"),
        (r"pesel", "pl_pesel"),
        (r"\bcpf\b", "br_cpf"),
        (r"\bnif\b|contribuinte", "pt_nif"),
        (r"身份证|公民身份号码", "cn_ric"),
        (r"주민등록번호|주민번호", "kr_rrn"),
        (r"マイナンバー|個人番号", "jp_my_number"),
        (r"иhh|\binn\b", "ru_inn"),
        (r"\bssn\b|social security", "us_ssn"),
        (r"\bnhs\b", "gb_nhs"),
        (r"\bsin\b|social insurance", "ca_sin"),
    )
)
_DISTINCTIVE = ("cn_ric", "kr_rrn", "it_codicefiscale", "es_nie", "es_dni", "fr_nir")


def national_id(text: str) -> bool:
    """A national identifier whose checksum holds: the labelled scheme, else a distinctive shape."""
    lowered = text.lower()
    keys = [key for label, key in _LABELS if label.search(lowered)] or _DISTINCTIVE
    return any(NATIONAL_ID_VALIDATORS[key](lowered) for key in keys)


VALIDATORS: dict[str, Validator] = {
    "luhn": luhn,
    "iban_mod97": iban_mod97,
    **NATIONAL_ID_VALIDATORS,
    "national_id": national_id,
}
