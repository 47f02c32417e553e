"""Holdpoint for MCP elicitation (the official ``mcp`` Python SDK): an
``elicitation_callback`` for an MCP client, so that a server's
``elicitation/create`` is answered by a person through Holdpoint.

- **Form mode** becomes a Holdpoint question (``ask_user``): one question per
  field of the requested schema (a boolean as Yes/No, an ``enum`` or ``oneOf``
  as its options, an array of an enum as a multiple choice, a string or number
  as free text; an optional field can be left empty), at most four per question,
  a longer form asked in parts. The answer is read by the schema's types and
  checked against the requested schema (``jsonschema``, with formats) before it
  is returned as ``accept``; an answer that does not fit is asked again (saying
  why), at most ``attempts`` times, then ``cancel``. A person who answers with
  the value ``"decline"`` (``respond`` over REST, or an A2A text part) declines;
  an answer with an object value (an A2A data part) is taken as the content
  itself, checked the same way. A question that expires or closes undecided is
  ``cancel``.
- **URL mode** becomes a connection request (``request_connection``, so the
  agent's ``AGENT.md`` must say ``loop: {connections: true}``; otherwise the
  callback answers an MCP error): the app is the URL's host, the reason the
  server's message and the URL (cut by Holdpoint at 280 characters). Connected
  is ``accept``, not connected ``decline``, expired or closed ``cancel``.

Holdpoint's questions have no schema field yet: the requested schema is kept by
this callback (in the question's text as hints, and for the check), not stored
with the interaction.

Give the callback a ``key`` (the run's id) to make it crash-safe: the same key
in a restarted runtime asks the same interactions again, as replays, and gets
the answers given meanwhile.

.. code-block:: python

    elicit = HoldpointElicitation(rt, at, agent=AgentManifest.from_path("AGENT.md"), key=run_id)
    async with Client(server, elicitation_callback=elicit) as client:
        await client.call_tool("book_table", {})
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jsonschema  # type: ignore[import-untyped]  # (no stubs pinned; the calls are few)
from mcp import types
from mcp.client.session import ClientRequestContext

from .. import _wire
from .._errors_generated import CommandConflictsWithRecordError
from ..manifest import AgentManifest
from ..runtime import Followed, Placement, Question, Runtime

__all__ = ["DECLINE", "Field", "HoldpointElicitation", "fields_of", "questions_for", "read_answers"]

DECLINE = "decline"
"""The answer value with which a person declines an elicitation."""

_SKIP = "Leave empty"
_MAX_OPTIONS = 64
_PER_QUESTION = 4


@dataclass(frozen=True)
class Field:
    """One field of a requested schema as it is asked: its name, the question,
    and how an answer is read (``boolean``, ``choice``, ``multi`` or ``text``)
    with the values its options stand for."""

    name: str
    question: Question
    kind: str
    values: tuple[Any, ...] = ()
    required: bool = False


def _choices(prop: Mapping[str, Any]) -> tuple[list[Any], list[str]] | None:
    """The values and labels of an enum-like property (``enum`` with optional
    ``enumNames``, or ``oneOf``/``anyOf`` of ``const`` with ``title``)."""
    if isinstance(prop.get("enum"), list):
        values = list(prop["enum"])
        names = prop.get("enumNames")
        labels = [str(n) for n in names] if isinstance(names, list) and len(names) == len(values) else [str(v) for v in values]
        return values, labels
    for key in ("oneOf", "anyOf"):
        alts = prop.get(key)
        if isinstance(alts, list) and alts and all(isinstance(a, Mapping) and "const" in a for a in alts):
            return [a["const"] for a in alts], [str(a.get("title", a["const"])) for a in alts]
    return None


def _hint(prop: Mapping[str, Any], required: bool) -> str:
    parts = [str(prop.get("type", "text"))]
    for key, label in (("minimum", "at least"), ("maximum", "at most"), ("minLength", "min length"),
                       ("maxLength", "max length"), ("format", "format"), ("pattern", "pattern")):
        if key in prop:
            parts.append(f"{label} {prop[key]}")
    if "default" in prop:
        parts.append(f"default {prop['default']}")
    parts.append("required" if required else "optional")
    return "; ".join(parts)


def fields_of(schema: Mapping[str, Any]) -> list[Field]:
    """The fields of a form's requested schema (its top-level ``properties``, in
    order), each as a Holdpoint question."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            continue
        req = name in required
        label = str(prop.get("description") or prop.get("title") or name)
        text = f"{label} ({_hint(prop, req)})"[:2000]
        skip = [] if req else [_SKIP]
        t = prop.get("type")
        choices = _choices(prop)
        items = prop.get("items") if isinstance(prop.get("items"), Mapping) else None
        item_choices = _choices(items) if items is not None else None
        if t == "boolean":
            fields.append(Field(name, Question(text, ["Yes", "No", *skip]), "boolean", (True, False), req))
        elif choices is not None and len(choices[0]) + len(skip) <= _MAX_OPTIONS:
            values, labels = choices
            fields.append(Field(name, Question(text, [lab[:500] for lab in labels] + skip), "choice", tuple(values), req))
        elif t == "array" and item_choices is not None and len(item_choices[0]) <= _MAX_OPTIONS:
            values, labels = item_choices
            # Multiple choice: choosing none leaves an optional field empty.
            fields.append(Field(name, Question(text, [lab[:500] for lab in labels], multiple=True), "multi", tuple(values), req))
        else:
            if choices is not None:
                text = f"{text[:1500]} One of: {', '.join(choices[1])}"[:2000]
            fields.append(Field(name, Question(text, skip, allow_text=True), "text", (), req))
    return fields


def questions_for(fields: Sequence[Field]) -> list[list[Field]]:
    """``fields`` in parts of at most four (a Holdpoint question's limit)."""
    return [list(fields[i : i + _PER_QUESTION]) for i in range(0, len(fields), _PER_QUESTION)]


def _read_text(text: str, prop: Mapping[str, Any]) -> Any:
    t = prop.get("type")
    if t == "integer":
        try:
            return int(text.strip())
        except ValueError:
            return text
    if t == "number":
        try:
            f = float(text.strip())
        except ValueError:
            return text
        return int(f) if f.is_integer() and "." not in text and "e" not in text.lower() else f
    return text


def read_answers(fields: Sequence[Field], answers: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The content the per-question ``answers`` stand for, by the fields' kinds
    (a field left empty is absent). Not checked: see the schema check."""
    props = schema.get("properties") or {}
    content: dict[str, Any] = {}
    for field, answer in zip(fields, answers):
        chosen = [int(i) for i in answer.get("options") or []]
        text = answer.get("text")
        if field.kind in ("boolean", "choice"):
            if chosen and chosen[0] < len(field.values):
                content[field.name] = field.values[chosen[0]]
            elif text:
                content[field.name] = text
        elif field.kind == "multi":
            if chosen or field.required:
                content[field.name] = [field.values[i] for i in chosen if i < len(field.values)]
        elif text is not None and text != "" and not chosen:
            content[field.name] = _read_text(str(text), props.get(field.name) or {})
    return content


def _check(content: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """Why ``content`` does not fit ``schema`` (``None`` when it does)."""
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(dict(content)), key=lambda e: list(e.path))
    if not errors:
        return None
    e = errors[0]
    where = ".".join(str(p) for p in e.path)
    return f"{where}: {e.message}" if where else e.message


@dataclass(frozen=True)
class _Outcome:
    kind: str  # "answers", "value", "connection", "expired", "closed"
    answers: Sequence[Mapping[str, Any]] = ()
    value: Any = None


def _outcome_of(f: Followed, interaction_id: str) -> _Outcome | None:
    data = f.event.get("data") or {}
    if not isinstance(data, dict) or data.get("interactionId", data.get("questionId")) != interaction_id:
        return None
    if f.name == "interaction-closed":
        return _Outcome("closed")
    if f.name != "interaction-resolved":
        return None
    if data.get("resolvedBy") == "expiry":
        return _Outcome("expired")
    answer = data.get("answer") or {}
    kind = answer.get("kind")
    if kind == "question":
        return _Outcome("answers", answers=answer.get("answers") or [])
    if kind == "connection":
        return _Outcome("connection", value=bool(answer.get("connected")))
    if kind == "value":
        return _Outcome("value", value=answer.get("value"))
    return _Outcome("closed")


class HoldpointElicitation:
    """An MCP client's ``elicitation_callback`` that asks a person through
    Holdpoint, for runtime ``rt`` at ``at``.

    ``agent``: the agent's manifest; URL mode needs ``loop.connections: true``
    in it. ``attempts``: how often a form is asked when answers do not fit the
    schema (default 3). ``timeout``: seconds to wait for each answer (default:
    for ever; on timeout the elicitation is ``cancel``).

    ``key``: the idempotency key of this callback's elicitations. Without it
    every callback object asks new interactions (its ids carry a random
    nonce). With it, the interaction ids come from the session, the key and the
    elicitation's ordinal (the first, second, … elicitation this object is
    called for), so a callback made again with the same key (a runtime
    restarted, replaying the same tool call) asks its n-th elicitation as the
    same interaction as the n-th of the old one: an answer given while no
    runtime was up is found and returned, and nothing is asked twice. Reusing a
    key for an elicitation with other content is refused by Holdpoint
    (``NRY-0021``) and answered as an MCP error."""

    def __init__(
        self,
        rt: Runtime,
        at: Placement,
        *,
        agent: AgentManifest | None = None,
        attempts: int = 3,
        timeout: float | None = None,
        key: str | None = None,
    ) -> None:
        if key is not None and not key:
            raise ValueError("key must not be empty")
        self.rt = rt
        self.at = at
        self.agent = agent or AgentManifest()
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.key = key
        self._nonce = uuid.uuid4().hex
        self._count = 0
        self.last_interactions: list[str] = []
        """The Holdpoint interactions the last elicitation opened (for logs and tests)."""

    def _id(self, *parts: str) -> str:
        if self.key is not None:
            return _wire.digest(self.at.session, "key", self.key, *parts)[:32]
        return _wire.digest(self.at.session, self._nonce, *parts)[:32]

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self._count += 1
        base = self._id(str(self._count))
        self.last_interactions = []
        try:
            if isinstance(params, types.ElicitRequestURLParams):
                return await self._url(base, params)
            return await self._form(base, params)
        except CommandConflictsWithRecordError as e:
            # Only a key reused for another elicitation gets here (the ids of a
            # callback without a key are its own).
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"key {self.key!r} already asked another elicitation: {e}",
            )

    async def _wait(self, interaction_id: str) -> _Outcome:
        events = await self.rt.follow(task=self.at.task_id, from_start=True)

        async def first() -> _Outcome:
            async for f in events:
                outcome = _outcome_of(f, interaction_id)
                if outcome is not None:
                    return outcome
            return _Outcome("closed")  # pragma: no cover - follow never ends by itself

        try:
            return await asyncio.wait_for(first(), self.timeout)
        except asyncio.TimeoutError:
            return _Outcome("expired")
        finally:
            # Cancelled mid-read, the generator is still running: it is closed
            # when collected.
            with contextlib.suppress(RuntimeError):
                await events.aclose()  # type: ignore[attr-defined]

    async def _form(self, base: str, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        schema = params.requested_schema
        schema_json: dict[str, Any] = (
            schema.model_dump(by_alias=True, exclude_none=True) if hasattr(schema, "model_dump") else dict(schema)
        )
        parts = questions_for(fields_of(schema_json))
        why = ""
        for attempt in range(self.attempts):
            content: dict[str, Any] = {}
            problem: str | None = None
            for i, part in enumerate(parts):
                qid = f"mcpq_{base}_{attempt}_{i}"
                head = params.message if len(parts) == 1 else f"{params.message} (part {i + 1} of {len(parts)})"
                if why:
                    head = f"{head}. The last answer did not fit: {why}"
                questions = [p.question for p in part]
                first = questions[0]
                questions[0] = Question(f"{head[:1000]}\n\n{first.text}"[:2000], first.options, first.multiple, first.allow_text)
                await self.rt.ask_user(self.at, call_id=f"mcp_{base}_{attempt}_{i}", questions=questions, question_id=qid)
                self.last_interactions.append(qid)
                outcome = await self._wait(qid)
                if outcome.kind in ("expired", "closed"):
                    return types.ElicitResult(action="cancel")
                if outcome.kind == "value":
                    value = outcome.value
                    if isinstance(value, str) and value.strip().lower() == DECLINE:
                        return types.ElicitResult(action="decline")
                    if isinstance(value, dict):
                        content = dict(value)  # the content itself (an A2A data part)
                    else:
                        problem = 'answer the questions, or answer "decline"'
                    break
                content.update(read_answers(part, outcome.answers, schema_json))
            if problem is None:
                problem = _check(content, schema_json)
                if problem is None:
                    return types.ElicitResult(action="accept", content=content)
            why = problem
        return types.ElicitResult(action="cancel")

    async def _url(self, base: str, params: types.ElicitRequestURLParams) -> types.ElicitResult | types.ErrorData:
        if not self.agent.connections_enabled:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="URL elicitation is off: the agent's AGENT.md must say loop: {connections: true}",
            )
        host = urlsplit(params.url).hostname or params.url
        iid = f"con_{base}"
        await self.rt.request_connection(
            self.agent, self.at, call_id=f"mcp_{base}", app=host, reason=f"{params.message} {params.url}", interaction_id=iid,
        )
        self.last_interactions.append(iid)
        outcome = await self._wait(iid)
        if outcome.kind == "connection":
            return types.ElicitResult(action="accept" if outcome.value else "decline")
        if outcome.kind == "value":
            return types.ElicitResult(action="accept" if outcome.value in (True, {"connected": True}) else "decline")
        return types.ElicitResult(action="cancel")
