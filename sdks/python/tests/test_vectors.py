"""Every vector of schemas/command-vectors.json (generated from the Rust domain by
tests/integration/vectors.rs): the Python SDK computes the same subject,
Nats-Msg-Id, canonical JSON and arguments digest, and its command builders give
the very command Rust serializes."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from holdpoint import _wire, runtime
from holdpoint.runtime import Expiry, Placement

from .conftest import ROOT

def _int(text: str) -> int | float:
    """An integer as the domain reads it: ``-0`` is the float ``-0.0`` (its
    canonical form), which a Python ``int`` cannot hold. A Python caller never
    sends ``-0``: ``json.dumps`` writes its own values, which read back as written."""
    return -0.0 if text == "-0" else int(text)


VECTORS = json.loads(
    (ROOT / "schemas" / "command-vectors.json").read_text(encoding="utf-8"), parse_int=_int
)


def ids(v: dict[str, Any]) -> str:
    return str(v["name"])


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=ids)
def test_wire_matches_rust(v: dict[str, Any]) -> None:
    env = v["command"]
    assert _wire.canonical_json(env) == v["canonical"]
    assert _wire.command_id(env) == v["msgId"]
    assert _wire.command_subject(env) == v["subject"]
    if "argumentsDigest" in v:
        assert _wire.arguments_digest(env["command"]["request"]["arguments"]) == v["argumentsDigest"]


def who(a: dict[str, Any] | None) -> runtime.Assignees | None:
    """The SDK's assignees from an ``assignees`` / ``escalation`` object."""
    if a is None:
        return None
    return runtime.Assignees(people=tuple(a.get("people", ())), groups=tuple(a.get("groups", ())))


def rebuild(c: dict[str, Any]) -> dict[str, Any]:
    """The command as the SDK's builders make it from the vector's fields."""
    t = c["type"]
    if t.startswith("session-"):
        return runtime.session_command(t, c["session"], c.get("mode", "blocking"), c.get("laneCapacity"))
    if t == "open":
        expires_at = c.get("expiresAt")
        at = Placement(
            c["session"],
            c["lane"],
            c["taskId"],
            c["contextId"],
            agent=c.get("agent"),
            expiry=Expiry(
                expires_at=_wire.parse_timestamp(expires_at) if expires_at else None,
                expires_in=c.get("expiresIn"),
                on_expiry=c.get("onExpiry", "decide"),
            ),
            assignees=who(c.get("assignees")),
            escalation=who(c.get("escalation")),
        )
        r = c["request"]
        if r["kind"] == "approval":
            request = runtime.approval_request(
                r["server"], r["tool"], r["arguments"], r.get("reason"), editable=r.get("editable", False)
            )
        elif r["kind"] == "question":
            # Built from the SDK's own Question objects, defaults left out.
            qs = [
                runtime.Question(q["text"], q["options"], q["multiple"], q["allowText"], q.get("schema"))
                for q in r["questions"]
            ]
            request = runtime.question_request(qs)
        else:
            request = runtime.connection_request(r["app"], r["reason"])
        return runtime.open_command(at, c["interactionId"], c["callId"], request)
    if t == "close":
        return runtime.close_command(c["interactionId"], c["reason"], c.get("taskId"))
    if t == "deadline":
        when = c.get("expiresAt")
        expiry = Expiry(
            expires_at=_wire.parse_timestamp(when) if when else None, expires_in=c.get("expiresIn")
        )
        return runtime.deadline_command(
            c["interactionId"], expiry, c.get("taskId"), c.get("changeId")
        )
    if t == "reassign":
        return runtime.reassign_command(c["interactionId"], c["changeId"], who(c.get("assignees")), c.get("taskId"))
    if t == "tool-result":
        return runtime.tool_result_command(c["interactionId"], c["result"], c.get("taskId"))
    return runtime.turn_command(t, c["session"], c["lane"], c["turnId"])


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=ids)
def test_builders_make_the_rust_command(v: dict[str, Any]) -> None:
    built = {"org": v["command"]["org"], "command": rebuild(v["command"]["command"])}
    assert built == v["command"]
    assert _wire.command_id(built) == v["msgId"]
    assert _wire.command_subject(built) == v["subject"]


def test_question_defaults_are_written_out() -> None:
    """Rust writes `multiple` and `allowText` even when false; the id depends on it."""
    v = next(v for v in VECTORS["vectors"] if v["name"].startswith("open question"))
    raw = json.loads(v["input"])["command"]["request"]["questions"]
    assert runtime.question_request(raw) == v["command"]["command"]["request"]


def test_provisional_codes_match_the_domain() -> None:
    assert runtime.PROVISIONAL_CODES == frozenset(VECTORS["provisional"])


def test_timestamps_are_written_in_utc_with_milliseconds() -> None:
    t = _wire.parse_timestamp("2031-06-01T12:00:00.5+02:00")
    assert _wire.format_timestamp(t) == "2031-06-01T10:00:00.500Z"
    with pytest.raises(ValueError):
        _wire.format_timestamp(datetime(2031, 1, 1))
