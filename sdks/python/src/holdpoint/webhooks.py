"""Verifying a webhook delivery's Standard Webhooks signature.

Holdpoint's notifier signs each delivery as Standard Webhooks say: headers
``webhook-id``, ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``
(space-separated ``v1,<base64 HMAC-SHA256>`` entries, more than one while a
rotated secret overlaps), over ``<id>.<timestamp>.<body>`` with the endpoint's
secret ``whsec_<base64 key>``. The body is a CloudEvent (JSON).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import HoldpointError

__all__ = ["WebhookVerificationError", "verify_webhook"]

DEFAULT_TOLERANCE = 300
"""How far, in seconds, ``webhook-timestamp`` may lie from now (the spec's five minutes)."""


class WebhookVerificationError(HoldpointError):
    """A delivery whose signature, timestamp or headers do not verify: do not
    act on it (answer ``400``)."""


def _key(secret: str) -> bytes:
    raw = secret.removeprefix("whsec_")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not whsec_<base64>") from None


def _header(headers: Mapping[str, str], name: str) -> str:
    for k, v in headers.items():
        if k.lower() == name:
            return v
    raise WebhookVerificationError(f"missing header {name}")


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str | Sequence[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> dict[str, Any]:
    """Checks a delivery and returns its CloudEvent (the parsed body).

    ``body``: the request body exactly as received (bytes, or text as sent);
    ``headers``: the request's headers (any case); ``secret``: the endpoint's
    ``whsec_…`` secret, or several (the old and the new one during a rotation);
    ``tolerance``: seconds ``webhook-timestamp`` may differ from ``now`` (default
    300).

    Raises :class:`WebhookVerificationError` when a header is missing, the
    timestamp is too old or too new, no ``v1`` signature matches, or the body is
    not JSON. Comparisons are constant-time."""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    msg_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        ts = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a whole number") from None
    current = time.time() if now is None else now
    if abs(current - ts) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    signed = msg_id.encode("utf-8") + b"." + stamp.encode("ascii") + b"." + raw
    expected = [
        base64.b64encode(hmac.new(_key(s), signed, hashlib.sha256).digest()) for s in secrets
    ]
    for entry in signatures.split():
        version, _, value = entry.partition(",")
        if version != "v1":
            continue
        given = value.encode("ascii", "replace")
        if any(hmac.compare_digest(given, e) for e in expected):
            try:
                event = json.loads(raw)
            except ValueError:
                raise WebhookVerificationError("the body is not JSON") from None
            if not isinstance(event, dict):
                raise WebhookVerificationError("the body is not a JSON object")
            return event
    raise WebhookVerificationError("no signature matches")
