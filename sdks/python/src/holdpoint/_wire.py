"""The wire as the Rust domain computes it: canonical JSON, SHA-256 digests,
subject tokens, command ids and command subjects.

Every function here matches ``services/domain`` (``digest.rs``, ``ids.rs``,
``command.rs``) byte for byte; ``schemas/command-vectors.json``, generated from
the Rust code, pins them (``tests/test_vectors.py`` checks every vector).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = [
    "DEFAULT_SUBJECT_PREFIX",
    "arguments_digest",
    "canonical_json",
    "canonical_number",
    "command_id",
    "command_subject",
    "digest",
    "format_timestamp",
    "parse_timestamp",
    "partition_key",
    "subject_token",
    "verb",
]

DEFAULT_SUBJECT_PREFIX = "hp"
"""The subjects' prefix of the default topology (``hp.cmd.…``, ``hp.evt.…``)."""

_PLAIN_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")


def digest(*parts: str) -> str:
    """Lower-case hex SHA-256 of ``parts``, each followed by a NUL byte (UTF-8)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _format_float(f: float) -> str:
    """``f`` as serde_json writes an ``f64`` (the ``zmij`` shortest form).

    The digits are the shortest that read back as ``f`` (Python's ``repr`` gives
    the same ones); the layout is zmij's: fixed notation for a decimal exponent in
    -5..=15 (``100.0``, ``0.00001``, ``1.5``), else ``d.ddde±x`` with an unpadded
    exponent (``1e-7``, ``1.5e+300``).
    """
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    sign = "-" if f < 0 else ""
    text = repr(abs(f))
    mantissa, _, exp_text = text.partition("e")
    exp = int(exp_text) if exp_text else 0
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # The decimal exponent of the first significant digit.
    if whole.strip("0"):
        point = len(whole.lstrip("0")) + exp - 1
    else:
        point = exp - (len(frac) - len(frac.lstrip("0"))) - 1
    digits = digits.rstrip("0") or "0"
    if -5 <= point <= 15:
        if point >= len(digits) - 1:
            return f"{sign}{digits}{'0' * (point - len(digits) + 1)}.0"
        if point >= 0:
            return f"{sign}{digits[: point + 1]}.{digits[point + 1 :]}"
        return f"{sign}0.{'0' * (-point - 1)}{digits}"
    head = digits[0] if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{head}e{'+' if point >= 0 else '-'}{abs(point)}"


def canonical_number(n: int | float) -> str:
    """A number as :func:`canonical_json` writes it: an integer as its decimal
    digits (any size), a float in serde_json's shortest ``f64`` form (``1.5``,
    ``100.0``, ``1e-7``). Non-finite floats raise :class:`ValueError` (JSON has
    none)."""
    if isinstance(n, bool):
        raise TypeError("a bool is not a number")
    if isinstance(n, int):
        return str(n)
    if not math.isfinite(n):
        raise ValueError(f"{n!r} is not a JSON number")
    return _format_float(float(n))


def _write(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, (int, float)):
        out.append(canonical_number(v))
    elif isinstance(v, Mapping):
        out.append("{")
        # Rust sorts keys by their UTF-8 bytes.
        for i, k in enumerate(sorted(v, key=lambda k: str(k).encode("utf-8"))):
            if not isinstance(k, str):
                raise TypeError(f"object key {k!r} is not a string")
            if i:
                out.append(",")
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(":")
            _write(v[k], out)
        out.append("}")
    elif isinstance(v, Sequence) and not isinstance(v, (bytes, bytearray)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(v).__name__} is not JSON")


def canonical_json(v: Any) -> str:
    """``v`` serialized with object keys sorted (by UTF-8 bytes), numbers in
    :func:`canonical_number`'s form and no whitespace; strings escaped as
    serde_json escapes them (non-ASCII kept as it is)."""
    out: list[str] = []
    _write(v, out)
    return "".join(out)


def arguments_digest(arguments: Any) -> str:
    """Hex SHA-256 of the canonical JSON of a call's arguments: the
    ``call.argumentsDigest`` an approval binds to."""
    return digest(canonical_json(arguments))


def subject_token(id_: str) -> str:
    """An id as one NATS subject token: as it is when it matches
    ``[A-Za-z0-9][A-Za-z0-9_-]*``, else ``_`` and its unpadded base64url bytes."""
    if _PLAIN_TOKEN.match(id_):
        return id_
    return "_" + base64.urlsafe_b64encode(id_.encode("utf-8")).decode("ascii").rstrip("=")


def format_timestamp(t: datetime) -> str:
    """``t`` in UTC as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (sub-milliseconds cut). A naive
    datetime is refused: say which zone it is in."""
    if t.tzinfo is None:
        raise ValueError("a deadline needs a timezone-aware datetime")
    u = t.astimezone(timezone.utc)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


_VERBS = {
    "session-open",
    "session-close",
    "session-end",
    "open",
    "close",
    "answer",
    "tool-result",
    "deadline",
    "reassign",
    "expire",
    "message",
    "turn-start",
    "turn-finish",
}


def verb(envelope: Mapping[str, Any]) -> str:
    """The subject verb of a command envelope (its ``command.type``)."""
    t = envelope["command"]["type"]
    if t not in _VERBS:
        raise ValueError(f"unknown command type {t!r}")
    return str(t)


def _timestamp_text(value: Any) -> str:
    """A deadline as the id recipe writes it: the timestamp re-formatted in UTC
    with milliseconds, or ``""`` when absent."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return format_timestamp(value)
    return format_timestamp(parse_timestamp(str(value)))


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def parse_timestamp(text: str) -> datetime:
    """Parses an RFC 3339 timestamp (any number of fractional digits, any offset)
    into an aware datetime; raises :class:`ValueError` otherwise."""
    m = _RFC3339.match(text)
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    if m.group(8):
        tz = timezone.utc
    else:
        minutes = int(m.group(10)) * 60 + int(m.group(11))
        tz = timezone(timedelta(minutes=minutes if m.group(9) == "+" else -minutes))
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)


def command_id(envelope: Mapping[str, Any]) -> str:
    """The deterministic command id, sent as ``Nats-Msg-Id``: ``cmd-`` and the first
    40 hex digits of the digest of the command's recipe (``CommandEnvelope::
    command_id`` in ``services/domain/src/command.rs``)."""
    org = envelope["org"]
    c = envelope["command"]
    t = verb(envelope)
    if t == "session-open":
        d = digest(org, t, c["session"], c["mode"])
    elif t in ("session-close", "session-end"):
        d = digest(org, t, c["session"])
    elif t == "open":
        content = {k: v for k, v in c.items() if k != "type"}
        d = digest(org, t, c["interactionId"], canonical_json(content))
    elif t == "close":
        d = digest(org, t, c["interactionId"], c["reason"])
    elif t == "answer":
        d = digest(org, t, c.get("taskId") or "", c["interactionId"], c["key"], c["by"])
    elif t == "tool-result":
        # The result is part of the id (another result is refused, not deduplicated).
        d = digest(org, t, c["interactionId"], canonical_json(c["result"]))
    elif t == "deadline":
        expires_in = c.get("expiresIn")
        d = digest(
            org,
            t,
            c["interactionId"],
            _timestamp_text(c.get("expiresAt")),
            "" if expires_in is None else str(int(expires_in)),
            # Appended only when given, as the Rust client does.
            *([c["changeId"]] if c.get("changeId") is not None else []),
        )
    elif t == "reassign":
        # One id per change: a retry is a replay, a later change back is new.
        d = digest(org, t, c["interactionId"], c["changeId"])
    elif t == "expire":
        stage = "expiring" if c["stage"] == "warn" else "expire"
        d = digest(org, stage, c["interactionId"], _timestamp_text(c["expiresAt"]))
    elif t == "message":
        d = digest(org, t, c["session"], c["lane"], c["messageId"])
    else:  # turn-start, turn-finish
        d = digest(org, t, c["session"], c["lane"], c["turnId"])
    return "cmd-" + d[:40]


def partition_key(envelope: Mapping[str, Any]) -> str:
    """The subject token that picks the command's partition: its task, else its
    interaction, else its session (``_`` when none)."""
    c = envelope["command"]
    for field in ("taskId", "interactionId", "session"):
        value = c.get(field)
        if value is not None:
            return subject_token(value)
    return "_"


def command_subject(envelope: Mapping[str, Any], prefix: str = DEFAULT_SUBJECT_PREFIX) -> str:
    """``<prefix>.cmd.<org>.<key>.<verb>``, as the runtime publishes it."""
    return f"{prefix}.cmd.{subject_token(envelope['org'])}.{partition_key(envelope)}.{verb(envelope)}"
