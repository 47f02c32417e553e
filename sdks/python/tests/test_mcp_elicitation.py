"""The MCP elicitation adapter (:mod:`holdpoint.integrations.mcp_elicitation`)
with the real ``mcp`` SDK (an ``MCPServer`` whose tools elicit, and a ``Client``
connected to it in-process over the JSON-RPC session) against a real Holdpoint:
form mode becomes a question whose answer is checked against the requested
schema and returned as ``accept``; a decline is ``decline``, an expiry or a
closing ``cancel``; URL mode becomes a connection request. With a ``key``, a
retried elicitation (a runtime restarted, the worker killed -9 meanwhile) is the
same interaction: answered once, the tool runs once, one
``tool-call-finished``; so is one in a real runtime process
(``tests/mcp_runtime.py``) killed (-9) and started again."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from pathlib import Path
from typing import Any, Literal

import pytest

mcp = pytest.importorskip("mcp", reason="mcp is in ops/test.sh's venv")
if sys.version_info < (3, 11):  # pragma: no cover - these tests read exception groups (3.11)
    pytest.skip("these tests read the MCP client's exception groups (Python 3.11+)", allow_module_level=True)

from mcp import Client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from holdpoint import AgentManifest, Expiry, HoldpointRest, Placement, Runtime  # noqa: E402
from holdpoint.integrations.mcp_elicitation import HoldpointElicitation  # noqa: E402

from .conftest import Holdpoint, Script, until  # noqa: E402


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Booking(BaseModel):
    date: str = Field(description="Which day?")
    seats: int = Field(ge=1, le=8, description="How many seats?")
    window: bool = Field(default=False, description="A window table?")
    area: Literal["inside", "terrace"] = "inside"


server = MCPServer("restaurant")


@server.tool()
async def book(ctx: Context) -> str:
    """Books a table after asking the user for the details."""
    r = await ctx.elicit("Book a table", Booking)
    return f"{r.action}:{r.data.model_dump_json()}" if r.action == "accept" else r.action


BOOKED: list[str] = []
"""What ``book_once`` did (its side effect): one entry per accepted booking."""


@server.tool()
async def book_once(ctx: Context) -> str:
    """Books a table after asking the user; the booking is counted."""
    r = await ctx.elicit("Book a table", Booking)
    if r.action != "accept":
        return r.action
    BOOKED.append(r.data.model_dump_json())
    return f"booked:{r.data.model_dump_json()}"


@server.tool()
async def book_other(ctx: Context) -> str:
    """Elicits with another message than ``book``."""
    r = await ctx.elicit("Book a table for the team dinner", Booking)
    return r.action


@server.tool()
async def connect_calendar(ctx: Context) -> str:
    """Asks the user to connect their calendar out of band."""
    r = await ctx.elicit_url("Connect your calendar", "https://calendar.example/oauth?x=1", "el-1")
    return r.action


class Setup:
    def __init__(self, rt: Runtime, rest: HoldpointRest, at: Placement, elicit: HoldpointElicitation) -> None:
        self.rt, self.rest, self.at, self.elicit = rt, rest, at, elicit

    async def asked(self, n: int = 1) -> str:
        """The id of the ``n``-th interaction the elicitation opened, once it is pending."""
        iid: str = await until("the question", lambda: len(self.elicit.last_interactions) >= n and self.elicit.last_interactions[n - 1])
        await until("it to be pending", lambda: self._pending(iid))
        return iid

    async def _pending(self, iid: str) -> bool:
        return bool((await self.rest.get(iid))["state"] == "pending")


async def setup(
    up: Holdpoint,
    *,
    expiry: Expiry | None = None,
    agent: AgentManifest | None = None,
    at: Placement | None = None,
    key: str | None = None,
) -> Setup:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    if at is None:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"), expiry=expiry or Expiry())
        await rt.open_session(at.session)
    return Setup(rt, rest, at, HoldpointElicitation(rt, at, agent=agent, timeout=60, key=key))


async def event_count(rt: Runtime, task: str, name: str) -> int:
    """How many ``name`` events of ``task`` the events stream holds."""
    subject = f"hp.evt.acme.{task}.{name}"
    info = await rt._js.stream_info("HP_EVENTS", subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


def _mcp_error(e: BaseException) -> MCPError | None:
    """The MCPError inside ``e`` (the client's task groups wrap it)."""
    if isinstance(e, MCPError):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            found = _mcp_error(inner)
            if found is not None:
                return found
    return None


async def call(s: Setup, tool: str) -> tuple[str, bool]:
    """Calls ``tool``: its text and whether it failed (an MCP error: its message)."""
    try:
        async with Client(server, elicitation_callback=s.elicit, mode="legacy") as client:
            result = await client.call_tool(tool, {})
    except BaseException as e:
        err = _mcp_error(e)
        if err is None:
            raise
        return str(err), True
    text = "".join(getattr(c, "text", "") for c in result.content)
    return text, bool(result.is_error)


async def close(s: Setup) -> None:
    await s.rest.aclose()
    await s.rt.close()


async def test_form_mode_is_a_question_whose_answer_fits_the_schema(up: Holdpoint) -> None:
    s = await setup(up)
    try:
        running = asyncio.create_task(call(s, "book"))
        qid = await s.asked()
        view = await s.rest.get(qid)
        assert view["kind"] == "question"
        texts = [q["text"] for q in view["detail"]["questions"]]
        assert texts[0].startswith("Book a table") and "Which day?" in texts[0]
        assert [q["options"] for q in view["detail"]["questions"]] == [[], [], ["Yes", "No", "Leave empty"], ["inside", "terrace", "Leave empty"]]
        # 12 seats is more than the schema's maximum: asked again, saying why.
        await s.rest.answer_question(qid, [{"options": [], "text": "2031-06-01"}, {"options": [], "text": "12"}, {"options": [0]}, {"options": [1]}])
        again = await s.asked(2)
        assert "did not fit" in (await s.rest.get(again))["detail"]["questions"][0]["text"]
        await s.rest.answer_question(again, [{"options": [], "text": "2031-06-01"}, {"options": [], "text": "4"}, {"options": [0]}, {"options": [2]}])
        text, error = await asyncio.wait_for(running, 30)
        assert not error
        assert text == 'accept:{"date":"2031-06-01","seats":4,"window":true,"area":"inside"}'
    finally:
        await close(s)


async def test_a_decline_is_decline(up: Holdpoint) -> None:
    s = await setup(up)
    try:
        running = asyncio.create_task(call(s, "book"))
        qid = await s.asked()
        await s.rest.respond(qid, "decline")
        assert await asyncio.wait_for(running, 30) == ("decline", False)
    finally:
        await close(s)


async def test_an_expiry_or_a_closing_is_cancel(up: Holdpoint) -> None:
    s = await setup(up, expiry=Expiry(expires_in=1))
    try:
        assert await asyncio.wait_for(call(s, "book"), 60) == ("cancel", False)
    finally:
        await close(s)
    s = await setup(up)
    try:
        running = asyncio.create_task(call(s, "book"))
        qid = await s.asked()
        assert await s.rt.close_interaction(qid, "canceled") == "closed"
        assert await asyncio.wait_for(running, 30) == ("cancel", False)
    finally:
        await close(s)


async def test_url_mode_is_a_connection_request(up: Holdpoint) -> None:
    on = AgentManifest.from_markdown("---\nname: coder\nloop:\n  connections: true\n---\n")
    for connected, action in ((True, "accept"), (False, "decline")):
        s = await setup(up, agent=on)
        try:
            running = asyncio.create_task(call(s, "connect_calendar"))
            iid = await s.asked()
            view = await s.rest.get(iid)
            assert view["kind"] == "connection"
            assert "calendar.example" in str(view) and "Connect your calendar" in str(view)
            assert (view["detail"]["app"], view["detail"]["reason"]) == (
                "calendar.example", "Connect your calendar https://calendar.example/oauth?x=1",
            ), view
            await s.rest.respond(iid, {"connected": connected})
            assert await asyncio.wait_for(running, 30) == (action, False)
            assert (await s.rest.get(iid))["state"] in ("resolved", "finished")
        finally:
            await close(s)
    # Closed undecided, or expired: cancel.
    s = await setup(up, agent=on)
    try:
        running = asyncio.create_task(call(s, "connect_calendar"))
        iid = await s.asked()
        assert await s.rt.close_interaction(iid, "canceled") == "closed"
        assert await asyncio.wait_for(running, 30) == ("cancel", False)
    finally:
        await close(s)
    s = await setup(up, agent=on, expiry=Expiry(expires_in=1))
    try:
        assert await asyncio.wait_for(call(s, "connect_calendar"), 60) == ("cancel", False)
        assert len(s.elicit.last_interactions) == 1
        assert (await s.rest.get(s.elicit.last_interactions[0]))["state"] != "pending"
    finally:
        await close(s)
    # Without loop.connections in AGENT.md: refused, nothing asked.
    s = await setup(up)
    try:
        text, error = await asyncio.wait_for(call(s, "connect_calendar"), 30)
        assert error and "loop" in text, text
        assert s.elicit.last_interactions == []
    finally:
        await close(s)


async def test_with_a_key_a_retried_elicitation_is_the_same_interaction_across_a_worker_kill(split: Holdpoint) -> None:
    worker = split.worker()
    split.ingress()
    key = unique("booking")
    BOOKED.clear()
    # Runtime 1: the tool elicits, the question is asked; the runtime goes away
    # (its call cancelled, its connection closed) before the person answers.
    s1 = await setup(split, key=key)
    at = s1.at
    try:
        running = asyncio.create_task(call(s1, "book_once"))
        qid = await s1.asked()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    finally:
        await close(s1)
    # The person answers while no runtime is up; the worker is killed (-9) and a
    # new one started.
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    try:
        await rest.answer_question(qid, [{"options": [], "text": "2031-06-01"}, {"options": [], "text": "2"}, {"options": [1]}, {"options": [1]}])
    finally:
        await rest.aclose()
    worker.p.kill()
    assert worker.p.wait(5) == -9
    split.worker()
    # Runtime 2, a new callback with the same key, replays the tool call: the
    # elicitation is the same interaction, its answer is found, nothing is asked
    # again, and the tool runs once.
    s2 = await setup(split, at=at, key=key)
    try:
        text, error = await asyncio.wait_for(call(s2, "book_once"), 60)
        assert not error, text
        assert text == 'booked:{"date":"2031-06-01","seats":2,"window":false,"area":"terrace"}'
        assert s2.elicit.last_interactions == [qid]
        assert BOOKED == ['{"date":"2031-06-01","seats":2,"window":false,"area":"terrace"}']
        await until("tool-call-finished", lambda: event_count(s2.rt, at.task_id, "tool-call-finished"), timeout=30)
        assert await event_count(s2.rt, at.task_id, "interaction-resolved") == 1
        assert await event_count(s2.rt, at.task_id, "tool-call-finished") == 1
        assert (await s2.rest.get(qid))["state"] == "finished"
    finally:
        await close(s2)
    # Without the key, a new callback asks a new interaction (the contrast: the
    # key is what makes the retry the same one).
    s3 = await setup(split, at=at)
    try:
        running = asyncio.create_task(call(s3, "book_once"))
        other = await s3.asked()
        assert other != qid
        assert await s3.rt.close_interaction(other, "canceled") == "closed"
        assert await asyncio.wait_for(running, 30) == ("cancel", False)
        assert len(BOOKED) == 1
    finally:
        await close(s3)


async def test_a_runtime_process_killed_after_the_answer_replays_the_elicitation_once(split: Holdpoint, tmp_path: Path) -> None:
    """tests/mcp_runtime.py as a real process: its tool elicits (a question with
    the callback's key); the person answers; the worker is killed (-9) and a new
    one started; the runtime process is killed (-9) in the tool after the
    elicitation was accepted, before the booking. Started again with the same
    key, it replays the tool call: the same interaction, its answer found,
    nothing asked anew, the booking made once, one ``tool-call-finished``."""
    worker = split.worker()
    split.ingress()
    session, task, key = unique("sess"), unique("task"), unique("booking")
    runs = tmp_path / "runs"
    args = [split.nats_url, session, task, key, str(runs)]
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(split.nats_url, "acme")
    first = await Script.start("mcp_runtime.py", *args, "--stop-before-booking")
    second: Script | None = None
    try:
        qid = (await first.line("asked ")).split()[1]
        await until("the question", lambda: _state_is(rest, qid, "pending"))
        await rest.answer_question(qid, [{"options": [], "text": "2031-06-01"}, {"options": [], "text": "2"}, {"options": [1]}])
        worker.p.kill()
        assert worker.p.wait(5) == -9
        split.worker()
        await first.line("executing", timeout=60)
        await first.kill()
        assert first.proc.returncode == -9
        assert not runs.exists()

        second = await Script.start("mcp_runtime.py", *args)
        assert await second.line("asked ") == f"asked {qid}"
        done = await second.line("done ", timeout=60)
        assert done == 'done booked:{"date":"2031-06-01","seats":2,"area":"terrace"}', second.lines
        assert await asyncio.wait_for(second.proc.wait(), 30) == 0, second.lines
        assert runs.read_text().splitlines() == ['{"date":"2031-06-01","seats":2,"area":"terrace"}'], "booked twice"
        await until("tool-call-finished", lambda: event_count(rt, task, "tool-call-finished"), timeout=30)
        assert await event_count(rt, task, "question-asked") == 1
        assert await event_count(rt, task, "interaction-resolved") == 1
        assert await event_count(rt, task, "tool-call-finished") == 1
        assert (await rest.get(qid))["state"] == "finished"
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
        await rest.aclose()
        await rt.close()


async def _state_is(rest: HoldpointRest, iid: str, state: str) -> bool:
    return bool((await rest.get(iid))["state"] == state)


async def test_a_key_reused_for_another_elicitation_is_an_mcp_error(up: Holdpoint) -> None:
    key = unique("booking")
    s1 = await setup(up, key=key)
    try:
        running = asyncio.create_task(call(s1, "book"))
        qid = await s1.asked()
        await s1.rest.respond(qid, "decline")
        assert await asyncio.wait_for(running, 30) == ("decline", False)
    finally:
        await close(s1)
    # The same key and session, another elicitation (the calendar's URL mode
    # would be a connection; a form with another message is another question).
    s2 = await setup(up, at=s1.at, key=key)
    try:
        text, error = await asyncio.wait_for(call(s2, "book_other"), 30)
        assert error and key in text and "another elicitation" in text, text
    finally:
        await close(s2)


def test_the_schema_is_read_into_questions() -> None:
    from holdpoint.integrations.mcp_elicitation import fields_of, questions_for, read_answers

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "level": {"type": "string", "oneOf": [{"const": "lo", "title": "Low"}, {"const": "hi", "title": "High"}]},
            "ratio": {"type": "number"},
            "n1": {"type": "integer"}, "n2": {"type": "integer"},
        },
        "required": ["level"],
    }
    fields = fields_of(schema)
    assert [f.kind for f in fields] == ["multi", "choice", "text", "text", "text"]
    assert fields[1].question.options == ["Low", "High"]
    assert [len(p) for p in questions_for(fields)] == [4, 1]
    answers: list[dict[str, Any]] = [{"options": [0, 1]}, {"options": [1]}, {"options": [], "text": "0.5"}, {"options": [0]}]
    assert read_answers(fields[:4], answers, schema) == {"tags": ["a", "b"], "level": "hi", "ratio": 0.5}


async def test_the_integrations_example_runs_as_pasted(up: Holdpoint) -> None:
    """docs/integrations.md's MCP block is examples/mcp_elicitation.py, and it
    runs: the form is asked, answered over REST, and the tool gets the content."""
    from .conftest import ROOT

    example = ROOT / "sdks" / "python" / "examples" / "mcp_elicitation.py"
    doc = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = doc.split("## MCP elicitation", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"
    assert block == example.read_text(encoding="utf-8"), "docs/integrations.md's block differs from the example"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(example), up.nats_url, "acme",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        asked = (await asyncio.wait_for(proc.stdout.readline(), 90)).decode()  # a loaded machine imports slowly
        assert asked.startswith("asked mcpq_"), asked
        qid = asked.split()[1]
        await rest.answer_question(qid, [{"options": [], "text": "2031-06-01"}, {"options": [], "text": "2"}, {"options": [1]}])
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await rest.aclose()
    text = asked + out.decode()
    assert proc.returncode == 0, text
    assert text.rstrip().endswith('booked: {"date":"2031-06-01","seats":2,"area":"terrace"}'), text
