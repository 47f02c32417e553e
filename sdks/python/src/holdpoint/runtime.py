"""The runtime side over NATS: the same JetStream commands, subjects, headers and
command ids as the Rust ``holdpoint-client`` (``services/client``).

Every call is a command published on ``hp.cmd.<org>.<key>.<verb>`` with
``Nats-Msg-Id`` = its deterministic command id (see :mod:`holdpoint._wire`) and
``Hp-Reply-To`` = a subject under this connection's inbox, where the worker replies
its outcome ``{"commandId", "result": {"Ok": …} | {"Err": {code, message}}}``.
When JetStream reports the publish as a duplicate (a retry inside the duplicate
window), the outcome is read from the records instead (``HP_OUTCOMES``, or the
outbox and resolution of the record the command wrote). A stored refusal that is
not a decision (a provisional code, e.g. ``NRY-0004`` before the interaction was
opened) is not replayed: the command is published again under
``<command id>-r<unique>`` so a worker decides it anew, as the Rust client does.
So retrying any call after :class:`~holdpoint.OutcomeTimeout` is safe: it is
decided once.

.. code-block:: python

    rt = await Runtime.connect("nats://127.0.0.1:4222", "acme")
    at = Placement("session-1", "main", "task-1", "ctx-1")
    await rt.open_session("session-1")
    effect = await rt.hold_for_approval(
        at, effect_id="eff_1", call_id="call_1", server="github",
        tool="create_pull_request", arguments={"title": "Fix"},
    )
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import KeyNotFoundError, NotFoundError as JsNotFoundError

from . import _wire
from .errors import (
    ConnectionsDisabled,
    InvalidId,
    OutcomeTimeout,
    error_for,
)
from .manifest import AgentManifest

__all__ = [
    "PROVISIONAL_CODES",
    "approval_request",
    "close_command",
    "connection_request",
    "deadline_command",
    "open_command",
    "question_request",
    "reassign_command",
    "session_command",
    "tool_result_command",
    "turn_command",
    "Decision",
    "Expiry",
    "Followed",
    "decision_of",
    "Placement",
    "Question",
    "Runtime",
    "tool_error",
    "tool_ok",
]

_log = logging.getLogger("holdpoint")

REPLY_HEADER = "Hp-Reply-To"
"""The header naming the subject the worker replies the outcome to."""

PROVISIONAL_CODES = frozenset(
    {
        "NRY-0001", "NRY-0002", "NRY-0003", "NRY-0004", "NRY-0010", "NRY-0020",
        "NRY-0022", "NRY-0023", "NRY-0024", "NRY-0025", "NRY-0026", "NRY-0028",
        "NRY-0029", "NRY-0030", "NRY-0032", "NRY-0033", "NRY-0034", "NRY-0035",
        "NRY-0036", "NRY-0037", "NRY-0038", "NRY-0040", "NRY-0041", "NRY-0050", "NRY-0051",
    }
)
"""Codes whose stored refusal is not a decision (``ErrorCode::is_provisional``;
``schemas/command-vectors.json`` lists them and the tests compare)."""

MAX_ID_LEN = 128
_MAX_REATTEMPTS = 2
_POLL_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.25)

SessionMode = Literal["blocking", "product"]
CloseReason = Literal["interrupted", "superseded", "expired", "canceled"]
OnExpiry = Literal["decide", "close"]


def _check_id(what: str, value: str) -> str:
    """``value`` when it is 1 to 128 printable ASCII characters without spaces."""
    if not isinstance(value, str) or not value:
        raise InvalidId(f"{what} is empty")
    if len(value.encode("utf-8")) > MAX_ID_LEN:
        raise InvalidId(f"{what} is longer than {MAX_ID_LEN} bytes")
    if not all(0x21 <= ord(c) <= 0x7E for c in value):
        raise InvalidId(f"{what} may only hold printable ASCII without spaces")
    return value


def _check_person(value: str) -> str:
    """``value`` when it is a person id: 1 to 256 characters, no control characters."""
    if not isinstance(value, str) or not value:
        raise InvalidId("assignees.people holds an empty person")
    if len(value) > 256 or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise InvalidId("a person is 1 to 256 characters without control characters")
    return value


@dataclass(frozen=True)
class Assignees:
    """Who may answer what is opened (README "Assignees"): people by ``sub`` and
    groups by the configured groups claim (each 1 to 128 printable ASCII
    characters, no spaces). The worker refuses an empty one, more than 32 of
    either, or a name twice (``NRY-0001``); anyone else of the organisation who
    answers gets ``NRY-0037``."""

    people: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for p in self.people:
            _check_person(p)
        for g in self.groups:
            _check_id("group", g)

    def wire(self) -> dict[str, Any]:
        """The ``assignees`` object of the ``open`` command."""
        out: dict[str, Any] = {}
        if self.people:
            out["people"] = list(self.people)
        if self.groups:
            out["groups"] = list(self.groups)
        return out


# The state bucket's key prefix of each kind of record (services/bus/src/topology.rs).
_STATE_KINDS = {"INTERACTIONS": "int", "SESSIONS": "ses", "TASKS": "task"}


@dataclass(frozen=True)
class Expiry:
    """An interaction's deadline as a runtime asks for it: at most one of
    ``expires_at`` (an aware datetime; sent as RFC 3339 UTC with milliseconds) and
    ``expires_in`` (whole seconds from when the worker decides), and what expiry
    decides (``decide``: the kind's default; ``close``). Refused with ``NRY-0022``
    by a nats-server without message schedules, ``NRY-0023`` when past or beyond the
    configured maximum."""

    expires_at: datetime | None = None
    expires_in: int | None = None
    on_expiry: OnExpiry = "decide"


@dataclass(frozen=True)
class Placement:
    """Where an interaction lives: session, lane, A2A task and context (each 1 to
    128 printable ASCII characters, no spaces); optionally the agent its calls are
    held for (``agent``-scoped remembered rules match on it), the deadline of
    what is opened here, who may answer it (``assignees``) and who is added to
    them at the deadline's warning stage if nobody answered by then
    (``escalation``, README "Escalation": the worker refuses it with ``NRY-0001``
    without a deadline, without a configured warning lead, with a deadline closer
    than that lead, or when it and the assignees name more than 32 people or 32
    groups together)."""

    session: str
    lane: str
    task_id: str
    context_id: str
    agent: str | None = None
    expiry: Expiry = field(default_factory=Expiry)
    assignees: Assignees | None = None
    escalation: Assignees | None = None

    def __post_init__(self) -> None:
        _check_id("sessionId", self.session)
        _check_id("lane", self.lane)
        _check_id("taskId", self.task_id)
        _check_id("contextId", self.context_id)
        if self.agent is not None:
            _check_id("agent", self.agent)


@dataclass(frozen=True)
class Question:
    """One question of an ``ask_user`` call: its text (1 to 2,000 characters), the
    options in order (answers index into them; at most 64 of at most 500
    characters), whether several may be chosen and whether free text may come
    with them. ``schema``: a form the answer's ``value`` must fit (README
    "Questions with a form"; only in a call of one question)."""

    text: str
    options: Sequence[str] = ()
    multiple: bool = False
    allow_text: bool = False
    schema: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """The ``QuestionSpec`` JSON (every field written, as Rust writes it; ``schema``
        only when given)."""
        wire: dict[str, Any] = {
            "text": self.text,
            "options": list(self.options),
            "multiple": self.multiple,
            "allowText": self.allow_text,
        }
        if self.schema is not None:
            wire["schema"] = dict(self.schema)
        return wire


@dataclass(frozen=True)
class Followed:
    """A followed event: its ``HP_EVENTS`` stream ``sequence`` (resume after it
    with ``follow(after=sequence)``), its ``subject`` and the CloudEvent as stored
    (``id``, ``type``, ``data``, …)."""

    sequence: int
    subject: str
    event: dict[str, Any]

    @property
    def type(self) -> str:
        """The CloudEvents ``type``, e.g. ``dev.holdpoint.tool-call-finished``."""
        return str(self.event.get("type", ""))

    @property
    def name(self) -> str:
        """The event's name, e.g. ``tool-call-finished`` (the subject's last token)."""
        return self.subject.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Decision:
    """How an approval was decided (:meth:`Runtime.wait_for_decision`):
    ``approved`` with the ``arguments`` to run (the person's edit when
    ``edited``); or not, with the person's ``reason``, or ``closed`` (why it
    closed undecided: ``expired``, ``canceled``, …)."""

    approved: bool
    sequence: int
    arguments: Any = None
    edited: bool = False
    by: str | None = None
    reason: str | None = None
    closed: str | None = None
    approvals: tuple[str, ...] = ()
    """For a hold that needed several approvals (``approvals``) and was released:
    every person whose approval counted, in order (``by`` is the last)."""


def decision_of(f: Followed, effect_id: str) -> Decision | None:
    """The decision the followed event ``f`` carries about approval ``effect_id``."""
    data = f.event.get("data") or {}
    if not isinstance(data, dict):
        return None
    if f.name == "tool-call-released" and data.get("effectId") == effect_id:
        approvers = data.get("approvals")
        return Decision(
            True,
            f.sequence,
            data.get("arguments"),
            bool(data.get("edited")),
            data.get("approvedBy"),
            approvals=tuple(str(a) for a in approvers) if isinstance(approvers, list) else (),
        )
    answer = data.get("answer")
    if (
        f.name == "interaction-resolved"
        and data.get("interactionId") == effect_id
        and isinstance(answer, dict)
        and answer.get("kind") == "approval"
        and answer.get("approved") is False
    ):
        return Decision(False, f.sequence, by=data.get("by"), reason=answer.get("reason"))
    if f.name == "interaction-closed" and data.get("interactionId") == effect_id:
        return Decision(False, f.sequence, closed=str(data.get("reason") or "closed"))
    return None


def tool_ok(output: Any) -> dict[str, Any]:
    """A released call's result when it produced ``output`` (any JSON)."""
    return {"status": "ok", "output": output}


def tool_error(code: str, message: str) -> dict[str, Any]:
    """A released call's result when it failed with a stable ``code`` (e.g.
    ``tool.failed``) and a ``message`` for the model."""
    return {"status": "error", "code": code, "message": message}


def _question_wire(q: Question | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(q, Question):
        return q.to_wire()
    return Question(
        text=q["text"],
        options=list(q.get("options", ())),
        multiple=bool(q.get("multiple", False)),
        allow_text=bool(q.get("allowText", q.get("allow_text", False))),
        schema=q.get("schema"),
    ).to_wire()


def _outcome(value: Any) -> dict[str, Any] | None:
    """``value`` when it is an outcome object (``{"commandId", "result"}``)."""
    if isinstance(value, dict) and isinstance(value.get("result"), dict):
        return value
    return None


def _is_decision(outcome: Mapping[str, Any]) -> bool:
    err = outcome.get("result", {}).get("Err")
    return not (isinstance(err, Mapping) and err.get("code") in PROVISIONAL_CODES)


# -- the commands, as the Rust client builds them --------------------------------


def open_command(
    at: Placement, interaction_id: str, call_id: str, request: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``open`` command for an interaction at ``at`` asking ``request`` (an
    ``approval``, ``question`` or ``connection`` request, ``kind``-tagged)."""
    command: dict[str, Any] = {
        "type": "open",
        "interactionId": _check_id("interactionId", interaction_id),
        "session": at.session,
        "lane": at.lane,
        "taskId": at.task_id,
        "contextId": at.context_id,
        "callId": _check_id("callId", call_id),
    }
    if at.agent is not None:
        command["agent"] = at.agent
    command["request"] = dict(request)
    if at.expiry.expires_at is not None:
        command["expiresAt"] = _wire.format_timestamp(at.expiry.expires_at)
    if at.expiry.expires_in is not None:
        command["expiresIn"] = int(at.expiry.expires_in)
    if at.expiry.on_expiry != "decide":
        command["onExpiry"] = at.expiry.on_expiry
    if at.assignees is not None:
        command["assignees"] = at.assignees.wire()
    if at.escalation is not None:
        command["escalation"] = at.escalation.wire()
    return command


def approval_request(
    server: str,
    tool: str,
    arguments: Any,
    reason: str | None = None,
    editable: bool = False,
    approvals: int | None = None,
) -> dict[str, Any]:
    """An approval request: the held call's server, tool, arguments and why;
    ``editable`` (written only when true, as the Rust client does) lets the person
    edit the arguments before approving. ``approvals`` (written only when given,
    as the Rust client does): how many distinct people must approve before the
    call is released, 2 to 5 (``None`` or 1: one person decides); not with
    ``editable`` (the worker refuses it with ``NRY-0001``)."""
    request: dict[str, Any] = {"kind": "approval", "server": server, "tool": tool, "arguments": arguments}
    if reason is not None:
        request["reason"] = reason
    if editable:
        request["editable"] = True
    if approvals is not None:
        request["approvals"] = int(approvals)
    return request


def question_request(questions: Sequence[Question | Mapping[str, Any]]) -> dict[str, Any]:
    """A question request with 1 to 4 questions (every field written)."""
    return {"kind": "question", "questions": [_question_wire(q) for q in questions]}


def connection_request(app: str, reason: str) -> dict[str, Any]:
    """A connection request, ``app`` and ``reason`` as given (the worker cuts them)."""
    return {"kind": "connection", "app": app, "reason": reason}


def session_command(
    verb: Literal["session-open", "session-close", "session-end"],
    session: str,
    mode: SessionMode = "blocking",
    lane_capacity: int | None = None,
) -> dict[str, Any]:
    """A session command (``mode`` and ``lane_capacity`` for ``session-open`` only)."""
    command: dict[str, Any] = {"type": verb, "session": _check_id("sessionId", session)}
    if verb == "session-open":
        command["mode"] = mode
        if lane_capacity is not None:
            command["laneCapacity"] = int(lane_capacity)
    return command


def close_command(interaction_id: str, reason: CloseReason, task_id: str | None) -> dict[str, Any]:
    """The host's ``close`` of a pending interaction (routed by its task when known)."""
    command: dict[str, Any] = {
        "type": "close",
        "interactionId": _check_id("interactionId", interaction_id),
        "reason": reason,
    }
    if task_id is not None:
        command["taskId"] = task_id
    return command


def deadline_command(
    interaction_id: str, expiry: Expiry, task_id: str | None, change_id: str | None = None
) -> dict[str, Any]:
    """A ``deadline`` command: set, move or (neither time) clear. ``change_id``
    (1 to 128 printable ASCII characters, no spaces) names the change: part of the
    command id, so a retry is a replay and setting a deadline back to an earlier
    one is a change of its own."""
    command: dict[str, Any] = {
        "type": "deadline",
        "interactionId": _check_id("interactionId", interaction_id),
    }
    if change_id is not None:
        command["changeId"] = _check_id("changeId", change_id)
    if task_id is not None:
        command["taskId"] = task_id
    if expiry.expires_at is not None:
        command["expiresAt"] = _wire.format_timestamp(expiry.expires_at)
    if expiry.expires_in is not None:
        command["expiresIn"] = int(expiry.expires_in)
    return command


def reassign_command(
    interaction_id: str, change_id: str, assignees: Assignees | None, task_id: str | None
) -> dict[str, Any]:
    """A ``reassign`` command: ``assignees`` may answer from now on (``None``:
    anyone of the organisation). ``change_id`` (1 to 128 printable ASCII
    characters, no spaces) names this change: the same id again is a replay."""
    command: dict[str, Any] = {
        "type": "reassign",
        "interactionId": _check_id("interactionId", interaction_id),
    }
    if task_id is not None:
        command["taskId"] = task_id
    command["changeId"] = _check_id("changeId", change_id)
    if assignees is not None:
        command["assignees"] = assignees.wire()
    return command


def tool_result_command(
    effect_id: str, result: Mapping[str, Any], task_id: str | None
) -> dict[str, Any]:
    """A ``tool-result`` command: the released call's result."""
    command: dict[str, Any] = {
        "type": "tool-result",
        "interactionId": _check_id("interactionId", effect_id),
        "result": dict(result),
    }
    if task_id is not None:
        command["taskId"] = task_id
    return command


def turn_command(verb: Literal["turn-start", "turn-finish"], session: str, lane: str, turn_id: str) -> dict[str, Any]:
    """A ``turn-start`` or ``turn-finish`` command."""
    return {
        "type": verb,
        "session": _check_id("sessionId", session),
        "lane": _check_id("lane", lane),
        "turnId": _check_id("turnId", turn_id),
    }


class Runtime:
    """One organisation's runtime handle over NATS. Build it with
    :meth:`Runtime.connect`; use it as an async context manager, or call
    :meth:`close`.

    Every method sends one command and waits (``timeout`` seconds, default 10) for
    the worker's outcome; a refusal raises the catalog's exception for its code
    (e.g. :class:`~holdpoint.NoLongerWaitingError`), no outcome in time raises
    :class:`~holdpoint.OutcomeTimeout` (retrying the same call is safe).

    Building one on a connection of your own (``Runtime(nc, org)``) works when
    that connection may subscribe to its inbox prefix: an organisation's own
    NATS user needs ``inbox_prefix="_INBOX.org-<org>"`` on ``nats.connect``, which
    :meth:`connect` sets itself.
    """

    def __init__(
        self,
        nc: NatsClient,
        org: str,
        *,
        timeout: float = 10.0,
        subject_prefix: str = _wire.DEFAULT_SUBJECT_PREFIX,
        owns_connection: bool = False,
    ) -> None:
        self._nc = nc
        self._js: JetStreamContext = nc.jetstream()
        self.org = _check_id("orgId", org)
        self.timeout = timeout
        self._prefix = subject_prefix
        self._name = subject_prefix.upper()
        self._owns = owns_connection
        self._inbox: str | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._reply_sub: Any = None
        self._kv: dict[str, Any] = {}
        self.last_publish_duplicate: bool | None = None
        """Whether the last command's first publish was a JetStream duplicate (a
        retry of a command already stored): for tests and diagnostics."""

    @classmethod
    async def connect(
        cls,
        url: str | list[str],
        org: str,
        *,
        timeout: float = 10.0,
        name: str = "holdpoint-runtime-python",
        **nats_options: Any,
    ) -> Runtime:
        """Connects to NATS at ``url`` for organisation ``org``. The inbox prefix is
        the organisation's own (``_INBOX.org-<org>``), so a NATS user made for this
        organisation alone (``holdpoint nats-config --role runtime``) works.
        ``nats_options`` go to :func:`nats.connect` (credentials, TLS, …).

        Raises :class:`~holdpoint.InvalidId` for a bad ``org``, and nats-py's
        errors when NATS is unreachable."""
        _check_id("orgId", org)
        nc = await nats.connect(
            url,
            name=name,
            inbox_prefix=f"_INBOX.org-{_wire.subject_token(org)}",
            **nats_options,
        )
        rt = cls(nc, org, timeout=timeout, owns_connection=True)
        await rt._start()
        return rt

    async def _start(self) -> None:
        if self._reply_sub is not None:
            return
        self._inbox = self._nc.new_inbox()
        self._reply_sub = await self._nc.subscribe(f"{self._inbox}.>", cb=self._on_reply)

    async def _on_reply(self, msg: Msg) -> None:
        try:
            token = int(msg.subject.rsplit(".", 1)[-1])
            outcome = json.loads(msg.data)
        except (ValueError, UnicodeDecodeError):
            return
        fut = self._pending.pop(token, None)
        outcome = _outcome(outcome)
        if fut is not None and not fut.done() and outcome is not None:
            fut.set_result(outcome)

    async def close(self) -> None:
        """Stops waiting for replies and, when :meth:`connect` made the connection,
        drains it (closes it when draining does not end within 5 s)."""
        if self._reply_sub is not None:
            try:
                await self._reply_sub.unsubscribe()
            except nats.errors.Error:
                pass
            self._reply_sub = None
        if self._owns and not self._nc.is_closed:
            # Draining needs the server; a connection still reconnecting is closed.
            try:
                await asyncio.wait_for(self._nc.drain(), 5.0)
            except (asyncio.TimeoutError, nats.errors.Error):
                await self._nc.close()

    async def __aenter__(self) -> Runtime:
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the protocol -------------------------------------------------------------

    def envelope(self, command: Mapping[str, Any]) -> dict[str, Any]:
        """``{"org": <this org>, "command": command}``: what is published."""
        return {"org": self.org, "command": dict(command)}

    async def send(self, command: Mapping[str, Any], *, timeout: float | None = None) -> str:
        """Sends ``command`` (a ``Command`` JSON object, ``type``-tagged as in
        ``schemas/command.json``) and waits for its outcome. Returns the accepted
        outcome (``opened``, ``closed``, ``finished``, ``rescheduled``,
        ``unchanged``, …).

        Raises the catalog's exception for a refusal, or
        :class:`~holdpoint.OutcomeTimeout` (retry safe)."""
        await self._start()
        env = self.envelope(command)
        outcome = await self._submit(env, self.timeout if timeout is None else timeout)
        result = outcome.get("result", {})
        if "Ok" in result:
            return str(result["Ok"])
        err = result.get("Err") or {}
        raise error_for(str(err.get("code", "")), str(err.get("message", "")), body=outcome)

    async def _submit(self, env: dict[str, Any], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        cmd = _wire.command_id(env)
        attempt = 0
        while True:
            msg_id = cmd if attempt == 0 else f"{cmd}-r{uuid.uuid4().hex}"
            outcome, duplicate = await self._publish_and_wait(env, cmd, msg_id, deadline)
            if duplicate and not _is_decision(outcome) and attempt < _MAX_REATTEMPTS:
                attempt += 1
                continue
            return outcome

    async def _publish_and_wait(
        self, env: dict[str, Any], cmd: str, msg_id: str, deadline: float
    ) -> tuple[dict[str, Any], bool]:
        self._next += 1
        token = self._next
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[token] = fut
        try:
            headers = {"Nats-Msg-Id": msg_id, REPLY_HEADER: f"{self._inbox}.{token}"}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OutcomeTimeout("no time left to publish the command")
            try:
                ack = await self._js.publish(
                    _wire.command_subject(env, self._prefix),
                    json.dumps(env, ensure_ascii=False, allow_nan=False).encode("utf-8"),
                    timeout=remaining,
                    headers=headers,
                )
            except (asyncio.TimeoutError, nats.errors.Error) as e:
                raise OutcomeTimeout(f"command not accepted by NATS: {e!r}") from e
            duplicate = bool(ack.duplicate)
            if msg_id == cmd:
                self.last_publish_duplicate = duplicate
            if not duplicate:
                try:
                    outcome = await asyncio.wait_for(
                        asyncio.shield(fut), max(0.0, deadline - time.monotonic())
                    )
                    return outcome, False
                except asyncio.TimeoutError:
                    pass
            # A duplicate (or a lost reply): read the recorded outcome until the deadline.
            attempt = 0
            while True:
                try:
                    found = await asyncio.wait_for(
                        self._recorded_outcome(env, cmd, msg_id),
                        max(0.001, deadline - time.monotonic()),
                    )
                except (asyncio.TimeoutError, nats.errors.Error):
                    found = None  # read again until the deadline
                if found is not None:
                    return found, duplicate
                if fut.done():
                    return fut.result(), duplicate
                pause = _POLL_DELAYS[min(attempt, len(_POLL_DELAYS) - 1)]
                attempt += 1
                if time.monotonic() + pause > deadline:
                    raise OutcomeTimeout("no outcome within the deadline")
                await asyncio.sleep(pause)
        finally:
            self._pending.pop(token, None)

    async def _kv_get(self, bucket: str, key: str) -> dict[str, Any] | None:
        """The JSON object at ``key`` of the records of kind ``bucket``
        (``INTERACTIONS``, ``SESSIONS``, ``TASKS``: keys ``<kind>.<org>.…`` of the
        state bucket ``HP_STATE``; any other: bucket ``HP_<bucket>``); ``None`` when
        absent, deleted, or not a JSON object (a record this version cannot read)."""
        kind = _STATE_KINDS.get(bucket)
        if kind is not None:
            bucket, key = "STATE", f"{kind}.{key}"
        kv = self._kv.get(bucket)
        if kv is None:
            kv = await self._js.key_value(f"{self._name}_{bucket}")
            self._kv[bucket] = kv
        try:
            entry = await kv.get(key)
        except (KeyNotFoundError, JsNotFoundError):
            return None
        if entry.value is None or entry.operation not in (None, "PUT"):
            return None
        try:
            value = json.loads(entry.value)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    async def _recorded_outcome(
        self, env: dict[str, Any], cmd: str, msg_id: str
    ) -> dict[str, Any] | None:
        stored = _outcome(await self._kv_get("OUTCOMES", msg_id))
        if stored is not None and _is_decision(stored):
            return stored
        if cmd != msg_id:
            return stored
        decided = await self._recorded_decision(env, cmd)
        return decided if decided is not None else stored

    async def _recorded_decision(self, env: dict[str, Any], cmd: str) -> dict[str, Any] | None:
        c = env["command"]
        org = _wire.subject_token(env["org"])
        t = c["type"]
        if t in ("message", "turn-start", "turn-finish"):
            key = f"{org}.{_wire.subject_token(c['session'])}.{_wire.subject_token(c['lane'])}"
            record = await self._kv_get("SESSIONS", key)
        elif t in ("session-open", "session-close", "session-end"):
            record = await self._kv_get("SESSIONS", f"{org}.{_wire.subject_token(c['session'])}")
        elif "interactionId" in c:
            key = f"{org}.{_wire.subject_token(c['interactionId'])}"
            record = await self._kv_get("INTERACTIONS", key)
            resolution = (record or {}).get("resolution")
            if isinstance(resolution, dict) and resolution.get("commandId") == cmd:
                return _outcome(resolution.get("outcome"))
        else:
            return None
        outbox = (record or {}).get("outbox", [])
        for transition in outbox if isinstance(outbox, list) else []:
            if isinstance(transition, dict) and transition.get("commandId") == cmd:
                return _outcome(transition.get("outcome"))
        return None

    async def _task_of(self, interaction_id: str) -> str | None:
        """The interaction's task (its commands' partition), ``None`` when there is
        no such interaction (the worker then answers ``NRY-0004``)."""
        key = f"{_wire.subject_token(self.org)}.{_wire.subject_token(interaction_id)}"
        try:
            record = await self._kv_get("INTERACTIONS", key)
        except (asyncio.TimeoutError, nats.errors.Error) as e:
            raise OutcomeTimeout(f"could not read interaction {interaction_id}: {e!r}") from e
        task = None if record is None else record.get("taskId")
        return task if isinstance(task, str) else None

    # -- sessions -----------------------------------------------------------------

    async def open_session(
        self, session: str, mode: SessionMode = "blocking", *, lane_capacity: int | None = None
    ) -> str:
        """Opens ``session`` in ``mode`` (``blocking``: the call waits for the
        answer; ``product``: answers become lane messages). ``lane_capacity``:
        messages a busy lane keeps (default 8). Returns ``opened``."""
        return await self.send(session_command("session-open", session, mode, lane_capacity))

    async def close_session(self, session: str) -> str:
        """Closes ``session`` to new messages. Returns ``closed``."""
        return await self.send(session_command("session-close", session))

    async def end_session(self, session: str) -> str:
        """Ends ``session``: its interactions then answer ``NRY-0002``."""
        return await self.send(session_command("session-end", session))

    # -- interactions -------------------------------------------------------------

    async def hold_for_approval(
        self,
        at: Placement,
        *,
        effect_id: str,
        call_id: str,
        server: str,
        tool: str,
        arguments: Any,
        reason: str | None = None,
        editable: bool = False,
        approvals: int | None = None,
    ) -> str:
        """The tool policy holds a call: opens an approval whose id is
        ``effect_id`` (also the executor's idempotency key). ``server`` and
        ``tool`` are one-line names of at most 200 characters; ``arguments`` (any
        JSON, at most 256 KiB and 32 levels) are released exactly as held, and the
        approval binds to their digest (:func:`holdpoint.arguments_digest`).
        Returns the interaction id. Opening again with the same content is a
        replay; with other content ``NRY-0021``. ``editable``: the person may
        edit the arguments before approving; set it only when the executor runs
        the ``arguments`` of ``tool-call-released`` (``edited: true`` then).

        ``approvals``: how many distinct people must approve before the call is
        released, 2 to 5 (README "Two-person approvals"; ``None`` or 1, one
        person decides). Each approval but the last is counted
        (``approval-counted``; REST answers ``202`` with the progress); the last
        releases the call, and ``tool-call-released`` lists every approver in
        ``approvals`` (:attr:`Decision.approvals`). One denial decides at once;
        remembered allow rules never count. Outside 1 to 5, or with
        ``editable``, the worker refuses it with
        :class:`~holdpoint.InvalidRequestError` (``NRY-0001``)."""
        request = approval_request(server, tool, arguments, reason, editable, approvals)
        await self.send(open_command(at, effect_id, call_id, request))
        return effect_id

    async def ask_user(
        self,
        at: Placement,
        *,
        call_id: str,
        questions: Sequence[Question | Mapping[str, Any]],
        question_id: str | uuid.UUID | None = None,
    ) -> str:
        """``ask_user``: opens a question with 1 to 4 questions. The question id is
        a new UUID unless ``question_id`` is given (give it to make a retry
        idempotent). Returns the question id."""
        qid = str(question_id) if question_id is not None else str(uuid.uuid4())
        await self.send(open_command(at, qid, call_id, question_request(questions)))
        return qid

    async def ask_user_form(
        self,
        at: Placement,
        *,
        call_id: str,
        text: str,
        schema: Mapping[str, Any],
        question_id: str | uuid.UUID | None = None,
    ) -> str:
        """``ask_user`` with a form: one question whose answer is a JSON object that
        fits ``schema``, the restricted JSON Schema of MCP elicitation's form mode.
        A schema outside that subset is refused when opened (``NRY-0035``); a
        ``value`` that does not fit is refused with the pointer of its first misfit
        (``NRY-0036``). Returns the question id."""
        return await self.ask_user(
            at, call_id=call_id, questions=[Question(text=text, schema=schema)], question_id=question_id
        )

    async def request_connection(
        self,
        agent: AgentManifest,
        at: Placement,
        *,
        call_id: str,
        app: str,
        reason: str,
        interaction_id: str | None = None,
    ) -> str:
        """``request_connection {app, reason}`` for ``agent``: refused with
        :class:`~holdpoint.ConnectionsDisabled` (nothing sent) unless the agent's
        ``AGENT.md`` says ``loop: {connections: true}``. ``app`` and ``reason`` are
        sent as given; the worker trims them and cuts them at 80 and 280
        characters. The id is ``con_<32 hex>`` unless ``interaction_id`` is given
        (give it to make a retry idempotent). Returns the interaction id."""
        if not agent.connections_enabled:
            raise ConnectionsDisabled(
                f"request_connection is off for agent {agent.name or ''!r}: "
                "set `loop.connections: true` in its AGENT.md"
            )
        iid = interaction_id if interaction_id is not None else f"con_{uuid.uuid4().hex}"
        await self.send(open_command(at, iid, call_id, connection_request(app, reason)))
        return iid

    async def close_interaction(self, interaction_id: str, reason: CloseReason) -> str:
        """The host closes a pending interaction (``interrupted``, ``superseded``,
        ``expired`` or ``canceled``); a blocked call then finishes with
        ``interaction.closed``. Returns ``closed``; ``NRY-0009`` when it no longer
        waits, ``NRY-0004`` when there is no such interaction."""
        _check_id("interactionId", interaction_id)
        task = await self._task_of(interaction_id)
        return await self.send(close_command(interaction_id, reason, task))

    async def set_deadline(self, interaction_id: str, expiry: Expiry) -> str:
        """Sets, moves or clears (neither time given) a pending interaction's
        deadline; only the runtime may. Returns ``rescheduled``; ``NRY-0023`` when it
        no longer waits or the deadline is past or too far, ``NRY-0022`` on a server
        without schedules."""
        _check_id("interactionId", interaction_id)
        task = await self._task_of(interaction_id)
        change = f"chg-{uuid.uuid4().hex}"
        return await self.send(deadline_command(interaction_id, expiry, task, change))

    async def reassign(
        self, interaction_id: str, assignees: Assignees | None, *, change_id: str | None = None
    ) -> str:
        """Changes who may answer a pending interaction (README "Assignees"):
        ``assignees``, or ``None`` for anyone of the organisation; only the runtime
        may. Each change is one ``interaction-reassigned`` event and one
        ``assignees-changed`` audit record. ``change_id`` names the change (a new
        one per call by default), so a retry of this call is published once.
        Returns ``reassigned``, or ``unchanged`` when it already has these
        assignees; ``NRY-0001`` when they are out of bounds (or do not fit beside
        an escalation still to come), ``NRY-0021`` when it no longer waits,
        ``NRY-0004`` when there is no such interaction."""
        _check_id("interactionId", interaction_id)
        change = change_id if change_id is not None else f"chg-{uuid.uuid4().hex}"
        task = await self._task_of(interaction_id)
        return await self.send(reassign_command(interaction_id, change, assignees, task))

    async def report_tool_result(self, effect_id: str, result: Mapping[str, Any]) -> str:
        """The tool executor reports a released call's result (:func:`tool_ok` or
        :func:`tool_error`); it becomes that call's ``tool-call-finished``. Returns
        ``finished``."""
        _check_id("interactionId", effect_id)
        task = await self._task_of(effect_id)
        return await self.send(tool_result_command(effect_id, result, task))

    async def start_turn(self, session: str, lane: str, turn_id: str) -> str:
        """A turn started on a lane without a person's message (the lane is busy)."""
        return await self.send(turn_command("turn-start", session, lane, turn_id))

    async def finish_turn(self, session: str, lane: str, turn_id: str) -> str:
        """The running turn on a lane ended; the next queued message's turn starts."""
        return await self.send(turn_command("turn-finish", session, lane, turn_id))

    async def record(self, interaction_id: str) -> dict[str, Any] | None:
        """The interaction's stored record (state bucket ``HP_STATE``, key
        ``int.<org>.<id>``: ``state``,
        ``resolution``, ``closure``, ``result`` once its call finished, …), or
        ``None`` when there is no such interaction. Read-only; for adapters that
        must know whether a released call already reported its result."""
        _check_id("interactionId", interaction_id)
        key = f"{_wire.subject_token(self.org)}.{_wire.subject_token(interaction_id)}"
        try:
            return await self._kv_get("INTERACTIONS", key)
        except (asyncio.TimeoutError, nats.errors.Error) as e:
            raise OutcomeTimeout(f"could not read interaction {interaction_id}: {e!r}") from e

    async def wait_for_decision(
        self, task: str, effect_id: str, *, after: int | None = None, timeout: float | None = None
    ) -> Decision:
        """Waits for the decision on the approval ``effect_id`` of ``task``, read
        from the task's events (from the start of the stream unless ``after`` is
        given, so a decision made while this process was down is found): approved
        with the ``arguments`` to run on ``tool-call-released``; not approved, with
        the person's ``reason``, on a denial; not approved, with ``closed``, when
        it closed (or expired) undecided. :class:`~holdpoint.OutcomeTimeout` after
        ``timeout`` seconds (default: wait for ever)."""
        _check_id("interactionId", effect_id)
        events = await (self.follow(task=task, after=after) if after is not None else self.follow(task=task, from_start=True))

        async def first() -> Decision:
            async for f in events:
                d = decision_of(f, effect_id)
                if d is not None:
                    return d
            raise OutcomeTimeout(f"stopped waiting for a decision on {effect_id}")  # pragma: no cover

        try:
            return await asyncio.wait_for(first(), timeout)
        except asyncio.TimeoutError:
            raise OutcomeTimeout(f"no decision on {effect_id} within {timeout} s") from None
        finally:
            # Cancelled mid-read, the generator is still running: it is closed
            # when collected.
            with contextlib.suppress(RuntimeError):
                await events.aclose()  # type: ignore[attr-defined]

    # -- events -------------------------------------------------------------------

    async def last_event_sequence(self) -> int:
        """The events stream's last sequence (0 when empty)."""
        info = await self._js.stream_info(f"{self._name}_EVENTS")
        return int(info.state.last_seq)

    async def follow(
        self,
        *,
        task: str | None = None,
        name: str | None = None,
        after: int | None = None,
        from_start: bool = False,
        batch: int = 64,
    ) -> AsyncIterator[Followed]:
        """Follows this organisation's events on ``HP_EVENTS`` (filter
        ``hp.evt.<org>.<task|*>.<name|*>``), in stream order, each once.

        Starts after sequence ``after`` when given (resume with the last
        :attr:`Followed.sequence` seen), else from the first retained event with
        ``from_start``, else with events stored from now on. The consumer is a
        named pull consumer without acks (what an organisation's own NATS user may
        create); when it fails or NATS reconnects, a new one starts after the last
        sequence delivered, so nothing repeats and nothing is skipped. The iterator
        never ends by itself: stop reading (``break``) to stop.

        The start is pinned when this returns (``events = await rt.follow(...)``),
        so an event stored after that is delivered even when iterating begins
        later."""
        org = _wire.subject_token(self.org)
        task_token = "*" if task is None else _wire.subject_token(task)
        subject = f"{self._prefix}.evt.{org}.{task_token}.{name or '*'}"
        if after is not None:
            next_seq = int(after) + 1
        elif from_start:
            next_seq = 1
        else:
            next_seq = await self.last_event_sequence() + 1
        return self._follow(subject, next_seq, batch)

    async def _follow(self, subject: str, next_seq: int, batch: int) -> AsyncIterator[Followed]:
        stream = f"{self._name}_EVENTS"
        while True:
            consumer = uuid.uuid4().hex
            try:
                await self._js.add_consumer(
                    stream,
                    config=ConsumerConfig(
                        name=consumer,
                        filter_subject=subject,
                        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                        opt_start_seq=max(1, next_seq),
                        ack_policy=AckPolicy.NONE,
                        inactive_threshold=30.0,
                        mem_storage=True,
                        num_replicas=1,
                    ),
                )
                sub = await self._js.pull_subscribe_bind(consumer, stream=stream)
            except (asyncio.TimeoutError, nats.errors.Error):
                await asyncio.sleep(0.5)
                continue
            delivered = 0
            reconnects = self._nc.stats.get("reconnects", 0)
            try:
                while True:
                    try:
                        msgs = await sub.fetch(batch, timeout=1.0)
                    except asyncio.TimeoutError:
                        _raise_if_cancelled()
                        # A consumer kept in memory is gone after the server
                        # restarted: after a reconnect, start a new one.
                        if self._nc.stats.get("reconnects", 0) != reconnects:
                            break
                        continue
                    except nats.errors.Error:
                        await asyncio.sleep(0.2)
                        break
                    gap = False
                    for m in msgs:
                        # A consumer sequence that skips means a lost delivery:
                        # start a new consumer after the last event delivered.
                        if m.metadata.sequence.consumer != delivered + 1:
                            gap = True
                            break
                        delivered += 1
                        seq = m.metadata.sequence.stream
                        if seq < next_seq:
                            continue  # already delivered by an earlier consumer
                        next_seq = seq + 1
                        try:
                            event = json.loads(m.data)
                        except ValueError:
                            event = None
                        if not isinstance(event, dict):
                            # Not a CloudEvent Holdpoint wrote: skipped, never fatal.
                            _log.warning("skipping undecodable event at sequence %d on %s", seq, m.subject)
                            continue
                        yield Followed(sequence=seq, subject=m.subject, event=event)
                    if gap:
                        break
            finally:
                # The consumer goes away by itself once inactive (an organisation's
                # own NATS user may not delete consumers).
                try:
                    await sub.unsubscribe()
                except nats.errors.Error:
                    pass


def _raise_if_cancelled() -> None:
    """Raises ``CancelledError`` when the current task is being cancelled.

    nats-py's ``fetch`` waits under ``asyncio.wait_for``, which on Python 3.10 and
    3.11 can turn a cancellation that lands together with its timeout into a
    ``TimeoutError`` (CPython issue 86296, fixed in 3.12): a follow that took it
    for an empty fetch would go on forever (a test run hung in its event loop's
    teardown, cancelling such a task). ``Task.cancelling`` (3.11+) still says a
    cancellation is pending; on 3.10 it cannot be told.
    """
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    if cancelling is not None and cancelling():
        raise asyncio.CancelledError
