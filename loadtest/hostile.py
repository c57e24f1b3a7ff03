"""Generate the hostile-input corpus: at least 200 malformed or unauthorised requests, each owed a 4xx.

    python loadtest/hostile.py --summary            # counts per category
    python loadtest/hostile.py --out var/hostile.jsonl   # one JSON line per case (body base64)

Categories: huge bodies (also chunked), binary, invalid UTF-8, deep JSON nesting, wrong types and
shapes, control and bidi characters (raw in JSON strings, in headers), 10,000 tiny fields,
odd numbers, HTTP-level mistakes (auth, roles, methods, content types, routes, query
parameters). Deterministic (seeded), so a failing case has a stable name. Every case is one
HTTP request; tests/drills/test_hostile.py sends them to a live API on loopback and checks
each answer is a 4xx problem body while the service stays up and its memory stays bounded.
Bodies that are odd but valid (bidi text inside a ticket body, say) are not here: they are
tickets, and they get a 202.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass, field

JSON = "application/json"
MAX_REQUEST_BYTES = 64 * 1024  # TRIAGE_MAX_REQUEST_BYTES default


@dataclass(frozen=True)
class Case:
    name: str
    category: str
    body: bytes = b""
    method: str = "POST"
    path: str = "/v1/tickets"
    content_type: str | None = JSON
    headers: dict[str, bytes] = field(default_factory=dict)
    auth: str | None = "ingest"  # "ingest", "operator", None, or a literal Authorization value
    chunked: bool = False
    expect: tuple[int, ...] = ()  # exact statuses when known; empty = any 4xx
    # A header a client may send oddly but harmlessly (a request id in Latin-1, say) is ignored
    # or replaced: the ticket is then accepted. Either way never a 5xx.
    may_accept: bool = False

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "category": self.category,
            "method": self.method,
            "path": self.path,
            "content_type": self.content_type,
            "headers": {k: base64.b64encode(v).decode() for k, v in self.headers.items()},
            "auth": self.auth,
            "chunked": self.chunked,
            "expect": list(self.expect),
            "may_accept": self.may_accept,
            "body_b64": base64.b64encode(self.body).decode(),
            "body_bytes": len(self.body),
        }


def _ticket(**fields) -> bytes:
    return json.dumps({"body": "Where is my order?", **fields}).encode()


def huge() -> list[Case]:
    cases = []
    for size in (MAX_REQUEST_BYTES + 1, 100_000, 1_000_000, 5_000_000):
        filler = b"a" * size
        cases.append(Case(f"huge-json-{size}", "huge", b'{"body":"' + filler + b'"}', expect=(413,)))
        cases.append(Case(f"huge-garbage-{size}", "huge", filler, expect=(413,)))
    cases.append(Case("huge-chunked-200k", "huge", b"x" * 200_000, chunked=True, expect=(413,)))
    cases.append(Case("huge-chunked-2m", "huge", b'{"body":"' + b"b" * 2_000_000 + b'"}', chunked=True, expect=(413,)))
    # Over the text limit (TRIAGE_MAX_TEXT_BYTES, 32 KiB) but under the request limit.
    cases.append(Case("text-over-32k", "huge", _ticket(body="c" * 40_000), expect=(413,)))
    cases.append(
        Case("subject-plus-body-over-32k", "huge", _ticket(subject="s" * 1000, body="d" * 32_000), expect=(400, 413))
    )
    return cases


def binary(rng: random.Random) -> list[Case]:
    cases = []
    for n in range(50):
        length = rng.choice((1, 2, 3, 7, 16, 64, 255, 1024, 4096, 30_000))
        blob = bytes(rng.randrange(256) for _ in range(length))
        if blob[:1] in (b"{", b"[", b'"') or blob.strip() == b"":
            blob = b"\x80" + blob  # never accidentally JSON or empty
        ctype = JSON if n % 5 else "application/octet-stream"
        cases.append(Case(f"binary-{n:02d}-{length}", "binary", blob, content_type=ctype))
    cases.append(
        Case("binary-gzip-magic", "binary", b"\x1f\x8b\x08\x00" + b"\x00" * 20, headers={"Content-Encoding": b"gzip"})
    )
    cases.append(Case("binary-pdf", "binary", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"))
    return cases


INVALID_UTF8 = [
    b"\xff",
    b"\xfe\xff",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\x80",
    b"\xbf",
    b"\xc1\xbf",
]


def invalid_utf8() -> list[Case]:
    cases = []
    for n, bad in enumerate(INVALID_UTF8):
        cases.append(Case(f"utf8-body-{n:02d}", "invalid_utf8", b'{"body":"ok ' + bad + b' ok"}'))
    for n, bad in enumerate(INVALID_UTF8[:6]):
        cases.append(Case(f"utf8-subject-{n:02d}", "invalid_utf8", b'{"body":"ok","subject":"' + bad + b'"}'))
        cases.append(Case(f"utf8-key-{n:02d}", "invalid_utf8", b'{"bo' + bad + b'dy":"ok"}'))
    # Escaped lone surrogates: valid JSON grammar, not valid Unicode.
    cases.append(Case("utf16-lone-high-surrogate", "invalid_utf8", b'{"body":"x \\ud800 y"}'))
    cases.append(Case("utf16-lone-low-surrogate", "invalid_utf8", b'{"body":"x \\udc00 y"}'))
    cases.append(Case("utf16-encoded-body", "invalid_utf8", '{"body":"x"}'.encode("utf-16")))
    cases.append(Case("utf32-encoded-body", "invalid_utf8", '{"body":"x"}'.encode("utf-32")))
    return cases


NESTING_DEPTHS = (64, 256, 512, 1000, 2000, 10_000, 30_000)


def nesting() -> list[Case]:
    cases = []
    for depth in NESTING_DEPTHS:
        cases.append(
            Case(
                f"nest-array-in-metadata-{depth}",
                "nesting",
                b'{"body":"x","metadata":' + b"[" * depth + b"]" * depth + b"}",
            )
        )
        cases.append(
            Case(f"nest-object-as-body-{depth}", "nesting", b'{"body":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}")
        )
        cases.append(Case(f"nest-top-level-array-{depth}", "nesting", b"[" * depth + b"]" * depth))
        cases.append(Case(f"nest-unclosed-{depth}", "nesting", b'{"body":' + b"[" * depth))
    return cases


WRONG_VALUES = {"int": 1, "float": 1.5, "true": True, "list": ["x"], "object": {"a": "b"}, "empty-list": []}


def wrong_types() -> list[Case]:
    cases = []
    for fld in ("body", "subject", "language", "customer_id", "channel", "callback_url"):
        for label, value in WRONG_VALUES.items():
            payload = {"body": "Where is my order?", fld: value}
            cases.append(Case(f"type-{fld}-{label}", "wrong_types", json.dumps(payload).encode(), expect=(400,)))
    cases += [
        Case("type-body-null", "wrong_types", b'{"body":null}', expect=(400,)),
        Case("type-metadata-list", "wrong_types", _ticket(metadata=["a"]), expect=(400,)),
        Case("type-metadata-int-value", "wrong_types", _ticket(metadata={"a": 1}), expect=(400,)),
        Case("type-metadata-nested", "wrong_types", _ticket(metadata={"a": {"b": "c"}}), expect=(400,)),
        Case(
            "type-metadata-65-entries", "wrong_types", _ticket(metadata={str(i): "v" for i in range(65)}), expect=(400,)
        ),
        Case("shape-top-array", "wrong_types", b'[{"body":"x"}]', expect=(400,)),
        Case("shape-top-string", "wrong_types", b'"body"', expect=(400,)),
        Case("shape-top-number", "wrong_types", b"42", expect=(400,)),
        Case("shape-top-null", "wrong_types", b"null", expect=(400, 422)),
        Case("shape-top-true", "wrong_types", b"true", expect=(400,)),
        Case("shape-missing-body", "wrong_types", b'{"subject":"hello"}', expect=(400,)),
        Case("shape-empty-object", "wrong_types", b"{}", expect=(400,)),
        Case("shape-empty-request", "wrong_types", b"", expect=(400, 422)),
        Case("shape-whitespace-request", "wrong_types", b"   \n", expect=(400, 422)),
        Case("value-empty-body", "wrong_types", _ticket(body=""), expect=(422,)),
        Case("value-blank-body", "wrong_types", _ticket(body=" \n\t "), expect=(422,)),
        Case("value-unknown-field", "wrong_types", _ticket(priority="urgent"), expect=(400,)),
        Case("value-duplicate-unknown", "wrong_types", b'{"body":"x","id":"t_1","id":"t_2"}', expect=(400,)),
        Case("value-language-1025", "wrong_types", _ticket(language="l" * 1025), expect=(400,)),
        Case("value-customer-id-1025", "wrong_types", _ticket(customer_id="c" * 1025), expect=(400,)),
        Case("value-subject-1025", "wrong_types", _ticket(subject="s" * 1025), expect=(400,)),
        Case("value-callback-not-allowed", "wrong_types", _ticket(callback_url="http://10.0.0.1/hook"), expect=(400,)),
        Case("value-callback-file", "wrong_types", _ticket(callback_url="file:///etc/passwd"), expect=(400,)),
        Case("value-callback-javascript", "wrong_types", _ticket(callback_url="javascript:alert(1)"), expect=(400,)),
        Case("json-trailing-garbage", "wrong_types", b'{"body":"x"} {"body":"y"}', expect=(400,)),
        Case("json-truncated", "wrong_types", b'{"body":"x"', expect=(400,)),
        Case("json-single-quotes", "wrong_types", b"{'body':'x'}", expect=(400,)),
        Case("json-comment", "wrong_types", b'{"body":"x" /* hi */}', expect=(400,)),
        Case("json-trailing-comma", "wrong_types", b'{"body":"x",}', expect=(400,)),
    ]
    return cases


CONTROL = (b"\x00", b"\x01", b"\x07", b"\x08", b"\x0b", b"\x0c", b"\x1b", b"\x1f", b"\n", b"\t")
BIDI = ("\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u200f", "\u061c", "\u2069")


def control_bidi() -> list[Case]:
    cases = []
    for n, char in enumerate(CONTROL):
        # Raw (unescaped) control characters are not allowed inside JSON strings.
        cases.append(Case(f"ctrl-raw-in-body-{n:02d}", "control_bidi", b'{"body":"a' + char + b'b"}', expect=(400,)))
    cases.append(Case("ctrl-nul-outside-string", "control_bidi", b'{"body":"x"\x00}', expect=(400,)))
    for n, char in enumerate((b"\x01", b"\x7f", b"\x1b[31m", b"\x00")):
        if char == b"\x00":
            continue  # a NUL cannot travel in an HTTP header at all
        cases.append(
            Case(
                f"ctrl-idempotency-key-{n}",
                "control_bidi",
                _ticket(),
                headers={"Idempotency-Key": b"key" + char + b"1"},
                expect=(400,),
            )
        )
    for n, char in enumerate(BIDI):
        cases.append(
            Case(
                f"bidi-idempotency-key-{n}",
                "control_bidi",
                _ticket(),
                headers={"Idempotency-Key": ("key" + char + "1").encode()},
                expect=(400,),
            )
        )
        cases.append(
            Case(
                f"bidi-field-name-{n}",
                "control_bidi",
                json.dumps({"body": "x", "bo" + char + "dy": "y"}).encode(),
                expect=(400,),
            )
        )
    cases.append(
        Case("idempotency-key-201", "control_bidi", _ticket(), headers={"Idempotency-Key": b"k" * 201}, expect=(400,))
    )
    return cases


def many_fields() -> list[Case]:
    wide = b"{" + b",".join(b'"f%d":0' % i for i in range(10_000)) + b',"body":"x"}'
    narrow = b'{"body":"x","metadata":{' + b",".join(b'"%d":""' % i for i in range(10_000)) + b"}}"
    tiny_keys = (
        b'{"body":"x","metadata":{' + b",".join(b'"%s":""' % format(i, "x").encode() for i in range(10_000)) + b"}}"
    )
    array = b'{"body":[' + b",".join(b'"x"' for _ in range(10_000)) + b"]}"
    numbers = b'{"body":"x","metadata":[' + b",".join(b"0" for _ in range(10_000)) + b"]}"
    repeated = b"{" + b",".join(b'"body":"x"' for _ in range(10_000)) + b"}"
    return [
        Case("fields-10000-top-level", "many_fields", wide),
        Case("fields-10000-metadata", "many_fields", narrow),
        Case("fields-10000-metadata-hex-keys", "many_fields", tiny_keys),
        Case("fields-10000-body-array", "many_fields", array),
        Case("fields-10000-numbers", "many_fields", numbers),
        Case("fields-10000-repeated-body", "many_fields", repeated),
    ]


def numbers() -> list[Case]:
    return [
        Case(f"number-{name}", "numbers", b'{"body":' + raw + b"}", expect=(400,))
        for name, raw in (
            ("1e999", b"1e999"),
            ("nan", b"NaN"),
            ("infinity", b"Infinity"),
            ("neg-zero", b"-0"),
            ("huge-int", b"9" * 5000),
            ("hex", b"0x1F"),
            ("leading-zero", b"007"),
        )
    ]


def http_level() -> list[Case]:
    ticket = _ticket()
    return [
        Case("auth-missing", "http", ticket, auth=None, expect=(401,)),
        Case("auth-wrong-token", "http", ticket, auth="Bearer not-a-real-token-0123456789", expect=(401,)),
        Case("auth-basic", "http", ticket, auth="Basic Zm9vOmJhcg==", expect=(401,)),
        Case("auth-bearer-without-token", "http", ticket, auth="Bearer", expect=(401,)),
        Case("auth-token-in-query", "http", ticket, auth=None, path="/v1/tickets?token=x", expect=(401,)),
        Case("role-operator-posts-ticket", "http", ticket, auth="operator", expect=(403,)),
        Case("role-ingest-reads-queue", "http", method="GET", path="/v1/queues/red", content_type=None, expect=(403,)),
        Case(
            "role-ingest-decides",
            "http",
            b'{"operator":"x","action":"approve","correct_level":"green"}',
            path="/v1/tickets/t_0/decision",
            expect=(403,),
        ),
        Case("method-get-collection", "http", method="GET", content_type=None, expect=(405,)),
        Case("method-put", "http", ticket, method="PUT", expect=(405,)),
        Case("method-delete", "http", method="DELETE", path="/v1/tickets/t_0", content_type=None, expect=(405,)),
        Case("method-patch", "http", ticket, method="PATCH", expect=(405,)),
        Case("ctype-form", "http", b"body=hello", content_type="application/x-www-form-urlencoded"),
        Case(
            "ctype-multipart",
            "http",
            b'--b\r\nContent-Disposition: form-data; name="body"\r\n\r\nhi\r\n--b--\r\n',
            content_type="multipart/form-data; boundary=b",
        ),
        Case("route-unknown", "http", ticket, path="/v1/ticket", expect=(404,)),
        Case(
            "route-traversal",
            "http",
            method="GET",
            path="/v1/tickets/..%2f..%2fetc%2fpasswd",
            content_type=None,
            expect=(404,),
        ),
        Case("route-long-id", "http", method="GET", path="/v1/tickets/" + "a" * 8000, content_type=None, expect=(404,)),
        Case("route-version", "http", ticket, path="/v2/tickets", expect=(404,)),
        Case(
            "queue-unknown",
            "http",
            method="GET",
            path="/v1/queues/purple",
            content_type=None,
            auth="operator",
            expect=(400, 404),
        ),
        Case(
            "queue-limit-huge",
            "http",
            method="GET",
            path="/v1/queues/red?limit=100000",
            content_type=None,
            auth="operator",
            expect=(400,),
        ),
        Case(
            "queue-limit-negative",
            "http",
            method="GET",
            path="/v1/queues/red?limit=-1",
            content_type=None,
            auth="operator",
            expect=(400,),
        ),
        Case(
            "queue-limit-text",
            "http",
            method="GET",
            path="/v1/queues/red?limit=ten",
            content_type=None,
            auth="operator",
            expect=(400,),
        ),
        Case(
            "queue-cursor-garbage",
            "http",
            method="GET",
            path="/v1/queues/red?cursor=%00%ff",
            content_type=None,
            auth="operator",
            expect=(400,),
        ),
        Case(
            "decision-missing-ticket",
            "http",
            b'{"operator":"ops","action":"approve","correct_level":"yellow"}',
            path="/v1/tickets/t_does_not_exist/decision",
            auth="operator",
            expect=(404,),
        ),
        Case(
            "decision-bad-action",
            "http",
            b'{"operator":"ops","action":"ship-it","correct_level":"yellow"}',
            path="/v1/tickets/t_0/decision",
            auth="operator",
            expect=(400,),
        ),
        Case(
            "decision-bad-level",
            "http",
            b'{"operator":"ops","action":"approve","correct_level":"purple"}',
            path="/v1/tickets/t_0/decision",
            auth="operator",
            expect=(400,),
        ),
        Case(
            "decision-empty-operator",
            "http",
            b'{"operator":" ","action":"approve","correct_level":"yellow"}',
            path="/v1/tickets/t_0/decision",
            auth="operator",
            expect=(400, 404),
        ),
        Case(
            "decision-unknown-flag",
            "http",
            b'{"operator":"o","action":"escalate","correct_level":"red","flags":{"evil":true}}',
            path="/v1/tickets/t_0/decision",
            auth="operator",
            expect=(400, 404),
        ),
    ]


# Header values in several encodings: invalid UTF-8, Latin-1, UTF-8 outside ASCII, UTF-16,
# an overlong form, control characters, a lone surrogate's UTF-8 bytes, very long, empty.
# (A value with a NUL or with leading or trailing blanks cannot be sent: the client refuses.)
HEADER_VALUES: dict[str, bytes] = {
    "invalid-utf8-fffe": b"\xff\xfe",
    "invalid-utf8-lone-continuation": b"abc\x80def",
    "latin1": "caf\u00e9-r\u00e9sum\u00e9".encode("latin-1"),
    "utf8-accents": "caf\u00e9-r\u00e9sum\u00e9".encode(),
    "utf8-emoji": "id-\U0001f600".encode(),
    "utf8-bidi": "id-\u202e-x".encode(),
    "utf16": "\u0133\u2122\u4e2d".encode("utf-16-be"),  # no NUL byte: a NUL cannot travel
    "overlong-slash": b"a\xc0\xafb",
    "surrogate-bytes": b"x\xed\xa0\x80y",
    "control-chars": b"a\x01\x1b[31mb\x7f",
    "long-8k": b"r" * 8000,
    "empty": b"",
}


def headers() -> list[Case]:
    """Every header a client controls, fuzzed: X-Request-ID (ignored or replaced: accepted),
    Idempotency-Key (400 unless printable ASCII), Content-Type (accepted or a 4xx),
    Authorization (401)."""
    ticket = _ticket()
    cases = []
    for label, value in HEADER_VALUES.items():
        cases.append(
            Case(f"header-request-id-{label}", "headers", ticket, headers={"X-Request-ID": value}, may_accept=True)
        )
        cases.append(
            Case(
                f"header-idempotency-key-{label}", "headers", ticket, headers={"Idempotency-Key": value}, expect=(400,)
            )
        )
        cases.append(
            Case(
                f"header-content-type-{label}",
                "headers",
                ticket,
                content_type=None,
                headers={"Content-Type": value},
                may_accept=True,
            )
        )
        cases.append(
            Case(
                f"header-authorization-{label}",
                "headers",
                ticket,
                auth=None,
                headers={"Authorization": value},
                expect=(401,),
            )
        )
        if value:
            cases.append(
                Case(
                    f"header-authorization-bearer-{label}",
                    "headers",
                    ticket,
                    auth=None,
                    headers={"Authorization": b"Bearer " + value},
                    expect=(401,),
                )
            )
    cases.append(
        Case(
            "header-content-type-json-utf16-charset",
            "headers",
            ticket,
            content_type="application/json; charset=utf-16",
            may_accept=True,
        )
    )
    cases.append(
        Case(
            "header-content-type-json-bad-charset",
            "headers",
            ticket,
            content_type=None,
            headers={"Content-Type": b"application/json; charset=\xff\xfe"},
            may_accept=True,
        )
    )
    return cases


def generate(seed: int = 7) -> list[Case]:
    rng = random.Random(seed)
    cases = (
        huge()
        + binary(rng)
        + invalid_utf8()
        + nesting()
        + wrong_types()
        + control_bidi()
        + many_fields()
        + numbers()
        + http_level()
        + headers()
    )
    names = Counter(case.name for case in cases)
    duplicates = [name for name, n in names.items() if n > 1]
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the corpus as JSON Lines")
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    cases = generate(args.seed)
    if args.out:
        with open(args.out, "w") as handle:
            for case in cases:
                handle.write(json.dumps(case.to_json()) + "\n")
    counts = Counter(case.category for case in cases)
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
