"""The LangGraph adapter (:mod:`holdpoint.integrations.langgraph`) with the real
``langgraph`` package (a StateGraph with an in-memory checkpointer; no model)
against a real ``holdpoint up``: an interrupt in a node becomes a Holdpoint
interaction, the graph resumes from its checkpointer with the person's answer,
and when two answers race (two people over REST, or REST and A2A) the graph
resumes once, with the one Holdpoint kept;
a released call runs once when the worker is killed (-9) between the approval
and the execution, and when the runtime process itself (checkpointed on disk
with ``AsyncSqliteSaver``) is killed (-9) after the approval and started again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, TypedDict

import pytest

langgraph = pytest.importorskip("langgraph", reason="langgraph is in ops/test.sh's venv")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

import holdpoint  # noqa: E402
from holdpoint import HoldpointRest, Placement, Runtime, tool_ok  # noqa: E402
from holdpoint.integrations.langgraph import GraphInterrupts  # noqa: E402

from .conftest import Holdpoint, Script, until  # noqa: E402


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class State(TypedDict, total=False):
    title: str
    decision: dict[str, Any]
    db: dict[str, Any]
    url: str


class Shop:
    """A graph: an approval, a question, then the side effect (counted)."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def graph(self, saver: InMemorySaver, *, question: bool = True) -> Any:
        def approve(state: State) -> State:
            decision = interrupt({"kind": "approval", "tool": "create_pull_request", "arguments": {"title": state["title"]}})
            return {"decision": decision}

        def ask(state: State) -> State:
            if not state["decision"].get("approved"):
                return {}
            return {"db": interrupt({"questions": [{"text": "Which database?", "options": ["Postgres", "SQLite"]}]})}

        def act(state: State) -> State:
            if not state["decision"].get("approved"):
                return {}
            self.runs.append(state["title"])
            return {"url": "https://github.example/acme/app/pull/42"}

        g = StateGraph(State)
        g.add_node("approve", approve)
        g.add_node("ask", ask)
        g.add_node("act", act)
        g.add_edge(START, "approve")
        if question:
            g.add_edge("approve", "ask")
            g.add_edge("ask", "act")
        else:
            g.add_edge("approve", "act")
        g.add_edge("act", END)
        return g.compile(checkpointer=saver)


async def event_count(rt: Runtime, task: str, name: str) -> int:
    """How many ``name`` events of ``task`` the events stream holds."""
    subject = f"hp.evt.acme.{task}.{name}"
    info = await rt._js.stream_info("HP_EVENTS", subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


async def pending(rest: HoldpointRest, iid: str) -> bool:
    return bool((await rest.get(iid))["state"] == "pending")


async def test_an_interrupt_is_an_interaction_and_the_graph_resumes_from_its_checkpointer(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
        await rt.open_session(at.session)
        saver, shop = InMemorySaver(), Shop()
        config: dict[str, Any] = {"configurable": {"thread_id": unique("thread")}}
        first = await shop.graph(saver).ainvoke({"title": "Fix the build"}, config)
        assert "__interrupt__" in first
        hp = GraphInterrupts(rt, at, timeout=30)
        resumed = asyncio.create_task(hp.resume(shop.graph(saver), config))
        effect = hp.interaction_id(config["configurable"]["thread_id"], first["__interrupt__"][0].id)
        await until("the approval", lambda: pending(rest, effect))
        view = await rest.get(effect)
        assert view["call"]["tool"] == "create_pull_request" and view["call"]["arguments"] == {"title": "Fix the build"}
        await rest.approve(effect, approved=True, arguments_digest=view["call"]["argumentsDigest"])
        second = await asyncio.wait_for(resumed, 30)
        assert second["decision"]["approved"] is True and second["decision"]["effectId"] == effect
        # The next interrupt (a question), resumed by a new graph object on the same checkpointer.
        qid = hp.interaction_id(config["configurable"]["thread_id"], second["__interrupt__"][0].id)
        resumed = asyncio.create_task(GraphInterrupts(rt, at, timeout=30).resume(shop.graph(saver), config))
        await until("the question", lambda: pending(rest, qid))
        await rest.answer_question(qid, [{"options": [1]}])
        done = await asyncio.wait_for(resumed, 30)
        assert done["db"]["answers"][0]["options"] == [1]
        assert done["url"] == "https://github.example/acme/app/pull/42"
        assert shop.runs == ["Fix the build"]
        assert await rt.report_tool_result(effect, tool_ok({"url": done["url"]})) == "finished"
        # Nothing waits any more: resuming again does nothing.
        assert await GraphInterrupts(rt, at).resume(shop.graph(saver), config) is None
        assert shop.runs == ["Fix the build"]
    finally:
        await rest.aclose()
        await rt.close()


async def test_two_answers_race_and_the_graph_resumes_once(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    ana = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    bob = HoldpointRest(up.api, token=up.token("acme", "bob@acme.example"))
    try:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
        await rt.open_session(at.session)
        for _ in range(4):  # each round a new thread; which answer wins varies
            saver, shop = InMemorySaver(), Shop()
            config: dict[str, Any] = {"configurable": {"thread_id": unique("thread")}}
            first = await shop.graph(saver, question=False).ainvoke({"title": "Fix"}, config)
            hp = GraphInterrupts(rt, at, timeout=30)
            effect = hp.interaction_id(config["configurable"]["thread_id"], first["__interrupt__"][0].id)
            await hp.hold(first["__interrupt__"], config["configurable"]["thread_id"])
            digest = (await ana.get(effect))["call"]["argumentsDigest"]
            # Ana approves and Bob denies at the same moment: Holdpoint keeps one.
            results = await asyncio.gather(
                ana.approve(effect, approved=True, arguments_digest=digest),
                bob.approve(effect, approved=False, reason="no"),
                return_exceptions=True,
            )
            refused = [r for r in results if isinstance(r, Exception)]
            assert len(refused) == 1 and isinstance(refused[0], holdpoint.NoLongerWaitingError), results
            approved_kept = results[0] is None
            resumed = await asyncio.wait_for(hp.resume(shop.graph(saver, question=False), config), 30)
            assert resumed["decision"]["approved"] is approved_kept
            assert "__interrupt__" not in resumed
            assert shop.runs == (["Fix"] if approved_kept else [])
            # A runner restarted on the same checkpointer finds nothing waiting: no second run.
            assert await GraphInterrupts(rt, at, timeout=5).resume(shop.graph(saver, question=False), config) is None
            assert shop.runs == (["Fix"] if approved_kept else [])
            record = await rt.record(effect)
            assert record is not None and record["resolution"] is not None
    finally:
        await ana.aclose()
        await bob.aclose()
        await rt.close()


A2A_URI = "https://docs.nylorun.com/a2a/interactions/v1"


async def a2a_answer(api: str, token: str, at: Placement, interaction: str, approved: bool, message_id: str) -> dict[str, Any]:
    """An interactions/v1 answer over A2A (JSON-RPC ``SendMessage`` on ``/a2a``):
    the JSON-RPC reply's body."""
    import httpx

    message = {
        "role": "ROLE_USER", "messageId": message_id, "taskId": at.task_id, "contextId": at.context_id,
        "parts": [{"data": {"approved": approved}}], "extensions": [A2A_URI],
        "metadata": {A2A_URI: {"interactionId": interaction, "approved": approved}},
    }
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(
            f"{api}/a2a",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "A2A-Extensions": A2A_URI},
        )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_a_rest_and_an_a2a_answer_race_and_the_graph_resumes_once(up: Holdpoint) -> None:
    """Ana approves over REST while Bob denies over A2A at the same moment:
    Holdpoint keeps one (the other is refused with NRY-0009, as a JSON-RPC error
    or the REST exception), the graph resumes once with the kept answer, and the
    call's one release (or none) matches it."""
    rt = await Runtime.connect(up.nats_url, "acme")
    ana = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    bob_token = up.token("acme", "bob@acme.example")
    try:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
        await rt.open_session(at.session)
        for round_ in range(4):  # each round a new thread and task; which answer wins varies
            at = Placement(at.session, "main", unique("task"), at.context_id)
            saver, shop = InMemorySaver(), Shop()
            thread = unique("thread")
            config: dict[str, Any] = {"configurable": {"thread_id": thread}}
            first = await shop.graph(saver, question=False).ainvoke({"title": "Fix"}, config)
            hp = GraphInterrupts(rt, at, timeout=30)
            [held] = await hp.hold(first["__interrupt__"], thread)
            effect = held.interaction_id
            await until("the approval", lambda: pending(ana, effect))
            digest = (await ana.get(effect))["call"]["argumentsDigest"]
            rest_result, a2a_result = await asyncio.gather(
                ana.approve(effect, approved=True, arguments_digest=digest),
                a2a_answer(up.api, bob_token, at, effect, False, f"answer:{effect}"),
                return_exceptions=True,
            )
            a2a_refused = isinstance(a2a_result, dict) and "error" in a2a_result
            rest_refused = isinstance(rest_result, holdpoint.NoLongerWaitingError)
            assert rest_refused != a2a_refused, (rest_result, a2a_result)
            if a2a_refused:
                assert isinstance(a2a_result, dict)
                assert a2a_result["error"]["data"][0]["metadata"]["code"] == "NRY-0009", a2a_result
                assert rest_result is None
            else:
                assert isinstance(a2a_result, dict), a2a_result
                assert a2a_result["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING", a2a_result
            approved_kept = not rest_refused
            resumed = await asyncio.wait_for(hp.resume(shop.graph(saver, question=False), config), 30)
            assert resumed["decision"]["approved"] is approved_kept, (round_, resumed)
            assert "__interrupt__" not in resumed
            assert shop.runs == (["Fix"] if approved_kept else [])
            assert await GraphInterrupts(rt, at, timeout=5).resume(shop.graph(saver, question=False), config) is None
            assert shop.runs == (["Fix"] if approved_kept else [])
            await until("interaction-resolved", lambda: event_count(rt, at.task_id, "interaction-resolved"))
            assert await event_count(rt, at.task_id, "interaction-resolved") == 1
            if approved_kept:
                await until("tool-call-released", lambda: event_count(rt, at.task_id, "tool-call-released"))
                assert await event_count(rt, at.task_id, "tool-call-released") == 1
            else:
                await until("tool-call-finished", lambda: event_count(rt, at.task_id, "tool-call-finished"))
                assert await event_count(rt, at.task_id, "tool-call-released") == 0
                assert await event_count(rt, at.task_id, "tool-call-finished") == 1
    finally:
        await ana.aclose()
        await rt.close()


async def test_a_released_call_runs_once_across_a_worker_kill(split: Holdpoint) -> None:
    worker = split.worker()
    split.ingress()
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
    saver, shop = InMemorySaver(), Shop()
    thread = unique("thread")
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    try:
        # Runner 1: the graph stops at the approval, which is held; the runner's
        # connection goes away.
        rt1 = await Runtime.connect(split.nats_url, "acme")
        await rt1.open_session(at.session)
        first = await shop.graph(saver, question=False).ainvoke({"title": "Fix the build"}, config)
        [held] = await GraphInterrupts(rt1, at, timeout=30).hold(first["__interrupt__"], thread)
        await rt1.close()
        effect = held.interaction_id

        # The person approves; the worker is killed (-9) and a new one started.
        await until("the approval", lambda: pending(rest, effect))
        view = await rest.get(effect)
        await rest.approve(effect, approved=True, arguments_digest=view["call"]["argumentsDigest"])
        worker.p.kill()
        assert worker.p.wait(5) == -9
        split.worker()

        # Runner 2 resumes the graph from its checkpointer: the call runs once.
        rt2 = await Runtime.connect(split.nats_url, "acme")
        try:
            hp = GraphInterrupts(rt2, at, timeout=30)
            done = await asyncio.wait_for(hp.resume(shop.graph(saver, question=False), config), 60)
            assert done["decision"] == {"approved": True, "effectId": effect, "arguments": {"title": "Fix the build"}}
            assert shop.runs == ["Fix the build"]
            assert await rt2.report_tool_result(effect, tool_ok({"url": done["url"]})) == "finished"
            await until("tool-call-finished", lambda: event_count(rt2, at.task_id, "tool-call-finished"), timeout=30)
            # Resumed again (a runner restarted after the graph finished), nothing
            # runs; the result reported again is a replay.
            assert await hp.resume(shop.graph(saver, question=False), config) is None
            assert await rt2.report_tool_result(effect, tool_ok({"url": done["url"]})) == "finished"
            assert shop.runs == ["Fix the build"]
            assert await event_count(rt2, at.task_id, "interaction-resolved") == 1
            assert await event_count(rt2, at.task_id, "tool-call-released") == 1
            assert await event_count(rt2, at.task_id, "tool-call-finished") == 1
            assert (await rest.get(effect))["state"] == "finished"
            record = await rt2.record(effect)
            assert record is not None and record["result"] == {"status": "ok", "output": {"url": done["url"]}}
        finally:
            await rt2.close()
    finally:
        await rest.aclose()


@pytest.mark.parametrize("stop_in_act", ["before", "after"])
async def test_a_runtime_killed_after_the_approval_resumes_from_its_checkpointer_and_runs_the_call_once(
    split: Holdpoint, stop_in_act: str, tmp_path: Path
) -> None:
    """The runtime process is killed (-9) in the node that runs the released
    call: before it ran the call (``before``), or after it ran it and reported
    the result but before the step's checkpoint was written (``after``). Started
    again, it resumes from its SQLite checkpointer without asking again; the
    call has run once and has one ``tool-call-finished``. The worker is killed
    (-9) and a new one started after the approval, too."""
    worker = split.worker()
    split.ingress()
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="langgraph-checkpoint-sqlite is in ops/test.sh's venv")
    session, task, thread = unique("sess"), unique("task"), unique("thread")
    db, runs = str(tmp_path / "checkpoints.sqlite"), tmp_path / "runs"
    args = [split.nats_url, session, task, thread, db, str(runs)]
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(split.nats_url, "acme")
    first = await Script.start("langgraph_runtime.py", *args, "--stop-in-act", stop_in_act)
    second: Script | None = None
    try:
        effect = (await first.line("held ")).split()[1]
        await until("the approval", lambda: pending(rest, effect))
        view = await rest.get(effect)
        await rest.approve(effect, approved=True, arguments_digest=view["call"]["argumentsDigest"])
        worker.p.kill()
        assert worker.p.wait(5) == -9
        split.worker()
        await first.line("executing" if stop_in_act == "before" else "reported", timeout=60)
        await first.kill()
        assert first.proc.returncode == -9
        ran_before = runs.read_text().splitlines() if runs.exists() else []
        assert ran_before == ([] if stop_in_act == "before" else ["create_pull_request"])
        if stop_in_act == "before":
            assert (await rt.record(effect) or {}).get("result") is None

        second = await Script.start("langgraph_runtime.py", *args)
        await second.line("restarted")
        done = await second.line("done ", timeout=60)
        assert done == "done https://github.example/acme/app/pull/42"
        assert await asyncio.wait_for(second.proc.wait(), 30) == 0, second.lines
        assert not any(line.startswith("held ") for line in second.lines), "asked again"
        assert runs.read_text().splitlines() == ["create_pull_request"], "the call ran twice"
        await until("tool-call-finished", lambda: event_count(rt, task, "tool-call-finished"), timeout=30)
        assert await event_count(rt, task, "interaction-resolved") == 1
        assert await event_count(rt, task, "tool-call-released") == 1
        assert await event_count(rt, task, "tool-call-finished") == 1
        record = await rt.record(effect)
        assert record is not None and record["result"] == {
            "status": "ok", "output": "https://github.example/acme/app/pull/42",
        }
        assert (await rest.get(effect))["state"] == "finished"
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
        await rest.aclose()
        await rt.close()


async def test_the_integrations_example_runs_as_pasted(up: Holdpoint) -> None:
    """docs/integrations.md's LangGraph block is examples/langgraph_interrupt.py,
    and it runs: held, approved over REST, resumed, the node runs once."""
    import sys

    from .conftest import ROOT

    example = ROOT / "sdks" / "python" / "examples" / "langgraph_interrupt.py"
    doc = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = doc.split("## LangGraph", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"
    assert block == example.read_text(encoding="utf-8"), "docs/integrations.md's block differs from the example"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(example), up.nats_url, "acme",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        held = (await asyncio.wait_for(proc.stdout.readline(), 90)).decode()  # a loaded machine imports slowly
        assert held.startswith("held lg_"), held
        effect = held.split()[1].rstrip(":")
        view = await rest.get(effect)
        await rest.approve(effect, approved=True, arguments_digest=view["call"]["argumentsDigest"])
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await rest.aclose()
    text = held + out.decode()
    assert proc.returncode == 0, text
    assert text.count("ran create_pull_request (Fix the build)") == 1, text
    assert text.rstrip().endswith("done: https://github.example/acme/app/pull/42"), text
    assert (await rest_state(up, effect)) == "finished"


async def rest_state(up: Holdpoint, iid: str) -> str:
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        return str((await rest.get(iid))["state"])
    finally:
        await rest.aclose()
