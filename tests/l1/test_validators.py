"""Validators against published test vectors."""

from __future__ import annotations

import pytest

from service.l1.validators import VALIDATORS, iban_mod97, luhn


@pytest.mark.parametrize(
    "number",
    [
        "4111 1111 1111 1111",  # Visa test number
        "4012888888881881",
        "5555-5555-5555-4444",  # Mastercard
        "378282246310005",  # Amex (15 digits)
        "6011111111111117",  # Discover
        "3530111333300000",  # JCB
        "6011000990139424",
    ],
)
def test_luhn_accepts_valid_card_numbers(number):
    assert luhn(number)


@pytest.mark.parametrize(
    "number",
    [
        "4111 1111 1111 1112",  # last digit changed
        "0000 0000 0000 0000",  # passes the sum, but one repeated digit
        "4111 1111 111",  # too short
        "4111 1111 1111 1111 1111",  # too long (20)
        "no digits",
    ],
)
def test_luhn_rejects(number):
    assert not luhn(number)


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 32",
        "DE89 3704 0044 0532 0130 00",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91ABNA0417164300",
        "BE68 5390 0754 7034",
        "ES91 2100 0418 4502 0005 1332",
        "CH93 0076 2011 6238 5295 7",
        "gb82west12345698765432",  # the matching form is lower case
    ],
)
def test_iban_accepts_valid(iban):
    assert iban_mod97(iban)


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 33",  # checksum broken
        "DE89 3704 0044 0532 0130 0",  # one character short for DE
        "FR76 1027 8060 4100 0203 4567 812",  # made-up number
        "XX00",
        "1234 5678 9012 3456",
    ],
)
def test_iban_rejects(iban):
    assert not iban_mod97(iban)


def test_registry_names_the_validators():
    assert VALIDATORS == {"luhn": luhn, "iban_mod97": iban_mod97}
