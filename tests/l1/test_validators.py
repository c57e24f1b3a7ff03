"""Validators against published test vectors (python-stdnum does the checksums)."""

from __future__ import annotations

import pytest

from service.l1.validators import NATIONAL_ID_VALIDATORS, VALIDATORS, iban_mod97, luhn, national_id


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
        "GB25 1234 1234 5698 7654 32",  # checksum holds, but a GB bank code is four letters
        "QQ12 3456 7890 1234 5678 90",  # no such country: the old check let any code pass at 15-34
        "FR76 1027 8060 4100 0203 4567 812",  # made-up number
        "XX00",
        "1234 5678 9012 3456",
    ],
)
def test_iban_rejects(iban):
    assert not iban_mod97(iban)


# Per scheme: identifiers whose checksum holds (stdnum's documented examples and numbers
# built with each scheme's check digit), then the same with one character changed, or a
# number the scheme refuses for another reason (reserved area, impossible date, one digit).
NATIONAL_IDS = {
    "de_idnr": (["36 574 261 809"], ["36574261808", "11111111111"]),
    "fr_nir": (["2 95 10 99 126 111 93"], ["295109912611194"]),
    "es_dni": (["54362315-K", "54362315k"], ["54362315-A"]),
    "es_nie": (["X-2482300W", "y1234567x"], ["x-2482300a"]),
    "it_codicefiscale": (["RCCMNL83S18D969H"], ["RCCMNL83S18D969A"]),
    "nl_bsn": (["1112.22.333", "123456782"], ["111222334", "111111110"]),
    "pl_pesel": (["44051401359", "02070803628"], ["44051401358"]),
    "br_cpf": (["390.533.447-05", "123.456.789-09"], ["390.533.447-04", "111.111.111-11"]),
    "pt_nif": (["501 964 843", "234567899"], ["501964842"]),
    "cn_ric": (["360426199101010071", "11010519491231002x"], ["360426199101010072"]),
    "kr_rrn": (["971013-9019902"], ["971013-9019903", "971313-9019902"]),
    "jp_my_number": (["6214 9832 0257", "123456789018"], ["621498320258"]),
    "ru_inn": (["123456789047", "7707083893"], ["123456789048"]),
    "us_ssn": (["536-90-4399"], ["000-12-3456", "666-12-3456"]),
    "gb_nhs": (["943 476 5870"], ["943 476 5871"]),
    "ca_sin": (["123-456-782"], ["123-456-783"]),
}


@pytest.mark.parametrize(
    ("scheme", "number"),
    [(scheme, number) for scheme, (valid, _) in NATIONAL_IDS.items() for number in valid],
)
def test_national_id_accepts_valid(scheme, number):
    check = NATIONAL_ID_VALIDATORS[scheme]
    assert check(number.lower())
    assert check(f"id: {number.lower()}.")  # found inside a labelled match


@pytest.mark.parametrize(
    ("scheme", "number"),
    [(scheme, number) for scheme, (_, invalid) in NATIONAL_IDS.items() for number in invalid],
)
def test_national_id_rejects_invalid(scheme, number):
    assert not NATIONAL_ID_VALIDATORS[scheme](number.lower())


def test_every_scheme_has_a_table_row():
    assert set(NATIONAL_IDS) == set(NATIONAL_ID_VALIDATORS)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("pesel 44051401359", True),  # the label names the scheme
        ("pesel 44051401358", False),
        ("bsn: 123456782", True),
        ("123456782", False),  # a bare 9-digit number: too many schemes would pass it
        ("ssn 536-90-4399", True),
        ("536-90-4399", False),
        ("360426199101010071", True),  # an 18-digit resident-ID shape needs no label
        ("rccmnl83s18d969h", True),
        ("971013-9019902", True),
        ("身份证号 360426199101010071", True),
        ("マイナンバー 6214 9832 0257", True),
        ("주민등록번호 971013-9019902", True),
        ("иhh 123456789047", True),  # ИНН in matching form
        ("nie 44051401359", False),  # Polish "nie" (not) names the Spanish NIE: no such number
    ],
)
def test_national_id_dispatches_on_the_label(text, kept):
    assert national_id(text) is kept


def test_registry_names_the_validators():
    assert VALIDATORS == {
        "luhn": luhn,
        "iban_mod97": iban_mod97,
        **NATIONAL_ID_VALIDATORS,
        "national_id": national_id,
    }
