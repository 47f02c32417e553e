"""The runtime side against a real Holdpoint (``holdpoint up``, or a nats-server
with workers started and stopped by the test): hold a call, a person approves over
REST, the tool result is reported, ``tool-call-finished`` arrives once; a command
retried after a timeout is decided once; ``follow`` resumes from a sequence."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import holdpoint
from holdpoint import (
    AgentManifest,
    ConnectionsDisabled,
    Expiry,
    HoldpointRest,
    OutcomeTimeout,
    Placement,
    Question,
    Runtime,
    tool_ok,
)

from .conftest import ROOT, Holdpoint, collect, until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def stored(rt: Runtime, subject: str) -> int:
    """How many messages the events stream holds on ``subject``."""
    info = await rt._js.stream_info("HP_EVENTS", subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


def named(events: list[holdpoint.Followed], type_: str, interaction: str) -> list[holdpoint.Followed]:
    """The followed events of ``type_`` about ``interaction``."""
    out = []
    for f in events:
        data = f.event.get("data") or {}
        about = {f.event.get("subject"), data.get("interactionId"), data.get("callId")}
        if f.name == type_ and interaction in about:
            assert f.type == f"dev.holdpoint.{type_}"
            out.append(f)
    return out


async def test_hold_approve_report_finishes_once(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    session, task = unique("sess"), unique("task")
    effect, call = unique("eff"), unique("call")
    at = Placement(session, "main", task, unique("ctx"))
    seen: list[holdpoint.Followed] = []
    follower = asyncio.create_task(collect(await rt.follow(task=task), seen))
    try:
        assert await rt.open_session(session) == "opened"
        arguments = {"title": "Fix — ünïcode", "n": 12345678901234567890123, "x": [1.5, {"b": 2, "a": 1}]}
        assert await rt.hold_for_approval(
            at, effect_id=effect, call_id=call, server="github",
            tool="create_pull_request", arguments=arguments, reason="writes to a repository",
        ) == effect
        # The same hold again is a replay of the first: no second opening.
        assert await rt.hold_for_approval(
            at, effect_id=effect, call_id=call, server="github",
            tool="create_pull_request", arguments=arguments, reason="writes to a repository",
        ) == effect

        view = await rest.get(effect)
        assert view["state"] == "pending"
        digest = view["call"]["argumentsDigest"]
        assert digest == holdpoint.arguments_digest(arguments)
        pending = [i["interactionId"] async for i in rest.pending()]
        assert effect in pending

        # A digest the person did not see is refused and releases nothing.
        with pytest.raises(holdpoint.ArgumentsChangedError) as refused:
            await rest.approve(effect, approved=True, arguments_digest="0" * 64)
        assert refused.value.status == 409
        key = unique("key")
        await rest.approve(effect, approved=True, arguments_digest=digest, idempotency_key=key)
        # The same press again (same key) is the same answer; another key conflicts.
        await rest.approve(effect, approved=True, arguments_digest=digest, idempotency_key=key)
        with pytest.raises(holdpoint.NoLongerWaitingError):
            await rest.approve(effect, approved=False, retry_for=0)

        await until("the release", lambda: named(seen, "interaction-resolved", effect))
        assert await rt.report_tool_result(effect, tool_ok({"url": "https://example.test/pr/1"})) == "finished"
        # Reported again: the same command, decided once.
        assert await rt.report_tool_result(effect, tool_ok({"url": "https://example.test/pr/1"})) == "finished"
        finished = await until("tool-call-finished", lambda: named(seen, "tool-call-finished", call))
        assert finished[0].event["data"]["result"] == {"status": "ok", "output": {"url": "https://example.test/pr/1"}}
        assert len(named(seen, "approval-requested", effect)) == 1

        # Stored once: a follower from the start of the stream sees one of each.
        replay: list[holdpoint.Followed] = []
        again = asyncio.create_task(collect(await rt.follow(task=task, from_start=True), replay))
        try:
            await until("the replay", lambda: named(replay, "tool-call-finished", call))
            # Caught up with what the live follower saw of this task: every event once.
            await until("the replay to catch up", lambda: replay[-1].sequence >= seen[-1].sequence)
            assert [f.sequence for f in replay] == [f.sequence for f in seen], "the live follower saw the same events"
            assert len(named(replay, "tool-call-finished", call)) == 1
            assert len(named(replay, "approval-requested", effect)) == 1
        finally:
            again.cancel()
        assert [f.sequence for f in replay] == sorted({f.sequence for f in replay})
        assert await stored(rt, f"hp.evt.acme.{task}.tool-call-finished") == 1
        assert await stored(rt, f"hp.evt.acme.{task}.approval-requested") == 1

        audit = await rest.audit()
        assert any(effect in str(r) for r in audit.get("items", [])), audit
    finally:
        follower.cancel()
        await rest.aclose()
        await rt.close()
    assert len(named(seen, "tool-call-finished", call)) == 1


async def test_follow_resumes_after_a_sequence(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        at = Placement(session, "main", task, unique("ctx"))
        first: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task, name="approval-requested"), first))
        e1 = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={})
        await until("the first opening", lambda: named(first, "approval-requested", e1))
        follower.cancel()
        resume_after = first[-1].sequence

        e2 = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={})
        e3 = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={})
        resumed: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task, name="approval-requested", after=resume_after), resumed))
        try:
            await until("both later openings", lambda: named(resumed, "approval-requested", e3))
        finally:
            follower.cancel()
        # In stream order, each once: e3 is the task's last opening stored, so
        # a follower that saw it saw everything after resume_after.
        assert await stored(rt, f"hp.evt.acme.{task}.approval-requested") == 3
        got = [f.event["subject"] for f in resumed]
        assert got == [e2, e3], got
        assert all(f.sequence > resume_after for f in resumed)
    finally:
        await rt.close()


async def test_questions_connections_close_and_deadlines(up: Holdpoint, tmp_path: Any) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        at = Placement(session, "main", task, unique("ctx"))
        qid = await rt.ask_user(
            at, call_id=unique("call"),
            questions=[Question("Which database?", ["Postgres", "SQLite"]), {"text": "Anything else?", "allowText": True}],
        )
        await rest.answer_question(qid, [{"options": [1]}, {"options": [], "text": "no"}])
        assert (await rest.get(qid))["state"] == "finished"

        off = AgentManifest.from_markdown("---\nname: coder\n---\n")
        with pytest.raises(ConnectionsDisabled):
            await rt.request_connection(off, at, call_id=unique("call"), app="calendar", reason="why")
        agent_md = tmp_path / "AGENT.md"
        agent_md.write_text("---\nname: coder\nloop: {connections: true}\n---\n# Coder\n", encoding="utf-8")
        on = AgentManifest.from_path(agent_md)
        long_app, long_reason = "A" * 100, "r" * 300
        con = await rt.request_connection(on, at, call_id=unique("call"), app=long_app, reason=long_reason)
        view = await rest.get(con)
        assert view["kind"] == "connection"
        text = str(view)
        assert "A" * 80 in text and "A" * 81 not in text
        assert "r" * 280 in text and "r" * 281 not in text
        await rest.respond(con, {"connected": True})
        assert (await rest.get(con))["state"] == "finished"

        held = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments=[1])
        # The pinned nats-server (2.15) has message schedules: set, move, clear.
        assert await rt.set_deadline(held, Expiry(expires_in=600)) == "rescheduled"
        at_time = datetime.now(timezone.utc) + timedelta(minutes=30)
        assert await rt.set_deadline(held, Expiry(expires_at=at_time)) == "rescheduled"
        assert (await rest.get(held))["expiresAt"] == holdpoint._wire.format_timestamp(at_time)
        with pytest.raises(holdpoint.DeadlineNotValidError):
            await rt.set_deadline(held, Expiry(expires_at=datetime.now(timezone.utc) - timedelta(minutes=1)))
        assert await rt.set_deadline(held, Expiry()) == "rescheduled"
        assert (await rest.get(held)).get("expiresAt") is None
        assert await rt.close_interaction(held, "canceled") == "closed"
        assert (await rest.get(held))["state"] == "closed"
        # Closing what is closed already changes nothing and says so.
        assert await rt.close_interaction(held, "interrupted") == "closed"
        with pytest.raises(holdpoint.NotFoundError):
            await rt.report_tool_result(unique("eff"), tool_ok(1))
        with pytest.raises(holdpoint.InvalidId):
            Placement("has space", "main", "t", "c")
    finally:
        await rest.aclose()
        await rt.close()


async def test_a_command_retried_after_a_timeout_is_decided_once(split: Holdpoint) -> None:
    worker = split.worker()  # makes the streams and buckets
    worker.stop()
    rt = await Runtime.connect(split.nats_url, "acme", timeout=1.0)
    try:
        session, task = unique("sess"), unique("task")
        with pytest.raises(OutcomeTimeout):
            await rt.open_session(session)
        assert rt.last_publish_duplicate is False
        split.worker()
        # The retry carries the same Nats-Msg-Id: JetStream drops it as a duplicate
        # and the outcome is read from the record the first publish wrote.
        rt.timeout = 15.0
        assert await rt.open_session(session) == "opened"
        assert rt.last_publish_duplicate is True

        at = Placement(session, "main", task, unique("ctx"))
        effect = unique("eff")
        hold: dict[str, Any] = dict(effect_id=effect, call_id=unique("call"), server="s", tool="t", arguments={"a": 1})
        split.procs[-1].stop()
        with pytest.raises(OutcomeTimeout):
            await _with_timeout(rt, 1.0, rt.hold_for_approval(at, **hold))
        split.worker()
        assert await rt.hold_for_approval(at, **hold) == effect
        assert rt.last_publish_duplicate is True
        opened: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task, from_start=True), opened))
        try:
            await until("the opening", lambda: named(opened, "approval-requested", effect))
        finally:
            follower.cancel()
        assert len(named(opened, "approval-requested", effect)) == 1
        # Stored once: the stream holds one approval-requested for the hold sent twice.
        assert await stored(rt, f"hp.evt.acme.{task}.approval-requested") == 1
        record = await rt.record(effect)
        assert record is not None and record["state"] == "pending"
    finally:
        await rt.close()


async def _with_timeout(rt: Runtime, seconds: float, call: Any) -> Any:
    """Runs ``call`` with the runtime's outcome timeout set to ``seconds``."""
    before = rt.timeout
    rt.timeout = seconds
    try:
        return await call
    finally:
        rt.timeout = before


async def test_the_readme_quick_start_runs_as_pasted(up: Holdpoint) -> None:
    """README.md's "Python runtime quick start" block is examples/approval_runtime.py,
    and it runs: it holds, a person approves over REST, the tool runs once and its
    tool-call-finished arrives once."""
    example = ROOT / "sdks" / "python" / "examples" / "approval_runtime.py"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python runtime quick start", 1)[1]
    block = section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"
    assert block == example.read_text(encoding="utf-8"), "README's block differs from the example"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(example), up.nats_url, "acme",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    lines: list[str] = []
    try:
        held = await asyncio.wait_for(proc.stdout.readline(), 20)
        lines.append(held.decode())
        effect = held.decode().split()[1].rstrip(":")
        view = await rest.get(effect)
        await rest.approve(effect, approved=True, arguments_digest=view["call"]["argumentsDigest"])
        out, _ = await asyncio.wait_for(proc.communicate(), 20)
        lines.append(out.decode())
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await rest.aclose()
    text = "".join(lines)
    assert proc.returncode == 0, text
    assert text.count("tool-call-released") == 1, text
    assert text.count(" tool-call-finished") == 1, text
    finished = next(line for line in text.splitlines() if line.startswith("finished: "))
    assert "'status': 'ok'" in finished and "'title': 'Fix the build'" in finished, finished


async def test_an_organisations_own_nats_user_is_enough(split_roles: Holdpoint) -> None:
    """With the user `holdpoint nats-config --org acme --role runtime` makes (in
    ops/nats/holdpoint.conf), every runtime verb works: publishes, replies under
    the organisation's inbox prefix, record reads, duplicate replays and follow."""
    hp = split_roles
    hp.worker("worker")
    rt = await Runtime.connect(hp.nats_url, "acme", user="runtime-acme", password="runtime-acme-dev-only")
    try:
        session, task = unique("sess"), unique("task")
        assert await rt.open_session(session) == "opened"
        events = await rt.follow(task=task)
        seen: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(events, seen))
        at = Placement(session, "main", task, unique("ctx"))
        hold: dict[str, Any] = dict(effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={"k": "v"})
        effect = await rt.hold_for_approval(at, **hold)
        # Again: a JetStream duplicate, answered from the records it may read.
        assert await rt.hold_for_approval(at, **hold) == effect
        assert rt.last_publish_duplicate is True
        assert await rt.close_interaction(effect, "interrupted") == "closed"
        try:
            await until("the close", lambda: named(seen, "interaction-closed", effect))
        finally:
            follower.cancel()
        assert len(named(seen, "approval-requested", effect)) == 1
        # The log check below can fail: a publish outside acme is one violation.
        await rt._nc.publish("hp.cmd.beta.task-x.open", b"{}")
        await rt._nc.flush()
        server = hp.procs[0]
        await until("the refused publish in the log", lambda: "hp.cmd.beta.task-x.open" in server.out)
    finally:
        await rt.close()
    violations = [line for line in hp.procs[0].out.splitlines() if "Violation" in line]
    assert len(violations) == 1 and "hp.cmd.beta.task-x.open" in violations[0], violations


async def test_follow_goes_on_after_the_server_restarts(split: Holdpoint) -> None:
    """The nats-server stops and starts again (same store, same port): the
    follower reconnects and delivers what was stored since, each event once."""
    worker = split.worker()
    rt = await Runtime.connect(split.nats_url, "acme", max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        at = Placement(session, "main", task, unique("ctx"))
        seen: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task, name="approval-requested"), seen))
        before = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={})
        await until("the first opening", lambda: named(seen, "approval-requested", before))

        worker.stop()
        split.procs[0].stop()  # the nats-server
        split.nats(split.nats_port)
        split.worker()
        # A publish written to the old connection before the client saw it die is
        # lost (an OutcomeTimeout, safe to retry); hold once reconnected.
        await until("the reconnect", lambda: rt._nc.is_connected and rt._nc.stats["reconnects"] >= 1)
        after = await rt.hold_for_approval(at, effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={})
        try:
            await until("the opening after the restart", lambda: named(seen, "approval-requested", after), timeout=20)
        finally:
            follower.cancel()
        assert await stored(rt, f"hp.evt.acme.{task}.approval-requested") == 2
        assert [f.event["subject"] for f in seen] == [before, after]
    finally:
        await rt.close()


async def test_turns_on_a_lane(up: Holdpoint) -> None:
    """start_turn admits a turn once (again: unchanged), another turn conflicts
    while it runs, finish_turn frees the lane; a session that is not there (or
    has ended) is NRY-0002."""
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session = unique("sess")
        with pytest.raises(holdpoint.SessionNotFoundError):
            await rt.start_turn(session, "main", "turn-1")
        assert await rt.open_session(session, "product", lane_capacity=2) == "opened"
        # The same command as the refused one: a duplicate whose stored refusal
        # (NRY-0002) is provisional, so it is published again under a fresh id
        # and decided anew.
        assert await rt.start_turn(session, "main", "turn-1") == "admitted"
        assert rt.last_publish_duplicate is True
        assert await rt.start_turn(session, "main", "turn-1") == "admitted"  # the same command: replayed
        with pytest.raises(holdpoint.CommandConflictsWithRecordError):
            await rt.start_turn(session, "main", "turn-2")
        assert await rt.finish_turn(session, "main", "turn-1") == "unchanged"
        # The same command id is the same command: its refusal, a decision, is
        # replayed even though the lane is free now; another turn is admitted.
        with pytest.raises(holdpoint.CommandConflictsWithRecordError):
            await rt.start_turn(session, "main", "turn-2")
        assert await rt.start_turn(session, "main", "turn-3") == "admitted"
        assert await rt.close_session(session) == "closed"
        assert await rt.end_session(session) == "closed"
        with pytest.raises(holdpoint.SessionNotFoundError):
            await rt.start_turn(session, "main", "turn-4")
    finally:
        await rt.close()


async def test_an_undecodable_event_is_skipped_not_fatal(up: Holdpoint, caplog: pytest.LogCaptureFixture) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        # Something that is not a CloudEvent, stored on the task's subject.
        # (in the state stream, from where the events stream sources it)
        ack = await rt._nc.jetstream().publish(
            f"hp.fx.evt.acme.{task}.evt-planted.approval-requested", b"\xffnot json"
        )
        assert ack.stream == "KV_HP_STATE"
        effect = await rt.hold_for_approval(
            Placement(session, "main", task, unique("ctx")),
            effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={},
        )
        seen: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task, from_start=True), seen))
        try:
            await until("the opening after the garbage", lambda: named(seen, "approval-requested", effect))
        finally:
            follower.cancel()
        # The garbage is the task's first stored event: everything followed came
        # after it, and it was delivered and skipped with a warning naming its
        # sequence in the events stream.
        assert seen, "the opening was followed"
        first = min(f.sequence for f in seen)
        skipped = [s for s in range(1, first) if f"undecodable event at sequence {s} " in caplog.text]
        assert skipped, caplog.text
    finally:
        await rt.close()


async def test_the_worker_records_the_command_under_the_pythons_id(up: Holdpoint) -> None:
    """On real traffic: the worker computes the command id from the body Python
    sent (services/worker) and records the opening under it; it is the id Python
    computed and sent as Nats-Msg-Id, whatever the arguments hold."""
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        at = Placement(
            session,
            "main",
            task,
            unique("ctx"),
            agent="coder",
            expiry=Expiry(expires_in=900, on_expiry="close"),
            assignees=holdpoint.Assignees(people=("ana@acme.example",), groups=("oncall",)),
        )
        arguments = {
            "日本": [1e-5, 1e16, 5e-324, -0.0, 2.0, 0.1, 12345678901234567890123, -(2**63)],
            "😀": {"é": "„Zitat“ \u2028 \x01", "": None, "Z": True},
            "a": [[[]], {}],
        }
        effect = unique("eff")
        command = holdpoint.runtime.open_command(
            at, effect, unique("call"), holdpoint.runtime.approval_request("s", "t", arguments, "why ✓")
        )
        assert await rt.send(command) == "opened"
        key = f"int.acme.{effect}"
        kv = await rt._js.key_value("HP_STATE")
        record = json.loads((await kv.get(key)).value or b"{}")
        recorded = [t["commandId"] for t in record["outbox"]]
        assert holdpoint.command_id(rt.envelope(command)) in recorded, recorded
        # And the digest the worker bound the approval to is Python's.
        assert record["spec"]["argumentsDigest"] == holdpoint.arguments_digest(arguments)
        assert record["assignees"] == {"people": ["ana@acme.example"], "groups": ["oncall"]}
    finally:
        await rt.close()


async def test_the_runtime_reassigns_and_a_new_assignee_may_answer(up: Holdpoint) -> None:
    """``Runtime.reassign``: a person outside the assignees is refused (``NRY-0037``)
    until the runtime reassigns the interaction to them; a retried change (same
    change id) is published once, the same assignees again are ``unchanged``; an
    escalation on a server without a warning lead opens nothing (``NRY-0001``)."""
    rt = await Runtime.connect(up.nats_url, "acme")
    bob = HoldpointRest(up.api, token=up.token("acme", "bob@acme.example"))
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        seen: list[holdpoint.Followed] = []
        follower = asyncio.create_task(collect(await rt.follow(task=task), seen))
        ana = holdpoint.Assignees(people=("ana@acme.example",))
        at = Placement(session, "main", task, unique("ctx"), assignees=ana)
        effect = unique("eff")
        await rt.hold_for_approval(
            at, effect_id=effect, call_id=unique("call"), server="k8s", tool="deploy", arguments={"service": "api"}
        )
        with pytest.raises(holdpoint.NotAnAssigneeError):
            await bob.approve(effect, approved=True, retry_for=0)

        to_bob = holdpoint.Assignees(people=("bob@acme.example",), groups=("oncall",))
        assert await rt.reassign(effect, to_bob, change_id="chg-to-bob") == "reassigned"
        # The same change again (a retry) is a replay; the same assignees under a
        # new change are unchanged.
        assert await rt.reassign(effect, to_bob, change_id="chg-to-bob") == "reassigned"
        assert await rt.reassign(effect, to_bob) == "unchanged"
        changes = await until("the reassignment", lambda: named(seen, "interaction-reassigned", effect))
        assert changes[0].event["data"]["assignees"] == {"people": ["bob@acme.example"], "groups": ["oncall"]}
        assert changes[0].event["data"]["previous"] == {"people": ["ana@acme.example"]}
        with pytest.raises(holdpoint.InvalidRequestError):
            await rt.reassign(effect, holdpoint.Assignees())

        await bob.approve(effect, approved=True)
        await until("the release", lambda: named(seen, "interaction-resolved", effect))
        assert len(named(seen, "interaction-reassigned", effect)) == 1
        with pytest.raises(holdpoint.CommandConflictsWithRecordError):
            await rt.reassign(effect, None)
        follower.cancel()

        # This server has no warning lead: an escalation would never fire.
        escalating = Placement(
            session, "main", unique("task"), unique("ctx"),
            expiry=Expiry(expires_in=600), escalation=holdpoint.Assignees(groups=("oncall",)),
        )
        refused = unique("eff")
        with pytest.raises(holdpoint.InvalidRequestError) as why:
            await rt.hold_for_approval(
                escalating, effect_id=refused, call_id=unique("call"), server="k8s", tool="deploy", arguments={}
            )
        assert "warning lead" in str(why.value)
        assert await rt.record(refused) is None
    finally:
        await bob.aclose()
        await rt.close()
