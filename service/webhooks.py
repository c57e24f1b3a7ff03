"""Standard Webhooks signatures for callbacks (https://www.standardwebhooks.com).

Each callback carries `webhook-id` (the ticket id: the same on every retry, so a receiver can
drop duplicates), `webhook-timestamp` (unix seconds of this attempt) and `webhook-signature`:
`v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, one per configured secret, space
separated. Signing the id and the timestamp with the body lets a receiver refuse a replayed
callback (an old timestamp, or an id already seen); signing with every secret lets it move to a
new secret while the old one is still accepted. Secrets are `whsec_` + base64 of the key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from service.errors import SecretError

PREFIX = "whsec_"
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64  # the range the specification recommends


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret."""
    if not secret.startswith(PREFIX):
        raise SecretError(
            "every secret must be whsec_ + base64 of a random key (python -m service.webhooks new-secret makes one)"
        )
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise SecretError("a secret's part after whsec_ is not valid base64") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise SecretError(f"a secret's key must be {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes, this one is {len(key)}")
    return key


def new_secret() -> str:
    import secrets

    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(secrets: tuple[str, ...], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with each secret."""
    signatures = " ".join(signature(decode_secret(s), msg_id, timestamp, body) for s in secrets)
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signatures}


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["new-secret"]:
        print(new_secret())
        raise SystemExit(0)
    print("usage: python -m service.webhooks new-secret", file=sys.stderr)
    raise SystemExit(2)
