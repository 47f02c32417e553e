"""The OpenAI Agents SDK adapter (:mod:`holdpoint.integrations.openai_agents`)
with the real ``openai-agents`` package and its ``ScriptedModel`` (no network,
no API key) against a real Holdpoint: a tool that needs approval is held, a
person decides over REST, the run resumes with the decision; a denial reaches
the model as ``tool.denied`` with the reason; a released call runs once even
when the worker is killed (-9) and the runner restarted between approval and
execution, and again after the execution: in this process (a new connection on
the saved ``RunState``) and as a real runtime process
(``tests/openai_agents_runtime.py``) killed (-9) and started again."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="openai-agents is in ops/test.sh's venv")

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from holdpoint import HoldpointRest, Placement, Runtime  # noqa: E402
from holdpoint.integrations.openai_agents import AgentsApprovals  # noqa: E402

from .conftest import Holdpoint, Script, until  # noqa: E402

set_tracing_disabled(True)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Shop:
    """The tool with its side effect counted, and what the model was told."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.told: list[str] = []

    def agent(self, approvals: AgentsApprovals, call_id: str) -> Agent[Any]:
        @function_tool(needs_approval=True)
        def create_pull_request(title: str) -> str:
            """Opens a pull request."""
            self.runs.append(title)
            return f"https://github.example/acme/app/pull/{len(self.runs)}"

        def answer(call: ModelCall) -> list[Any]:
            items = call.input if isinstance(call.input, list) else []
            output = next(
                (str(i.get("output")) for i in reversed(items) if isinstance(i, dict) and i.get("type") == "function_call_output"),
                "",
            )
            self.told.append(output)
            return [assistant_message(f"the tool said: {output}")]

        model = ScriptedModel(
            [[function_call("create_pull_request", {"title": "Fix the build"}, call_id=call_id)], ModelStep.respond(answer)]
        )
        return Agent(name="coder", instructions="Ship fixes.", model=model, tools=[approvals.guard(create_pull_request)])


async def event_count(rt: Runtime, task: str, name: str) -> int:
    """How many ``name`` events of ``task`` the events stream holds."""
    subject = f"hp.evt.acme.{task}.{name}"
    info = await rt._js.stream_info("HP_EVENTS", subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


async def finished_count(rt: Runtime, task: str) -> int:
    return await event_count(rt, task, "tool-call-finished")


async def person_decides(rest: HoldpointRest, effect: str, approved: bool, reason: str | None = None) -> None:
    view = await until("the hold", lambda: rest.get(effect))
    assert view["state"] == "pending"
    await rest.approve(effect, approved=approved, reason=reason, arguments_digest=view["call"]["argumentsDigest"])


async def test_approved_over_rest_the_run_resumes_and_the_tool_runs_once(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
        await rt.open_session(at.session)
        approvals = AgentsApprovals(rt, at, reason=lambda tool, args: "writes to a repository", timeout=30)
        shop = Shop()
        agent = shop.agent(approvals, "call_ok")
        result = await Runner.run(agent, "Fix the build")
        assert [i.tool_name for i in result.interruptions] == ["create_pull_request"]
        effect, _ = approvals.ids_of("call_ok")
        decided = asyncio.create_task(approvals.decide(result.to_state()))
        await person_decides(rest, effect, True)
        result = await Runner.run(agent, await decided)
        assert not result.interruptions
        assert shop.runs == ["Fix the build"]
        assert result.final_output == "the tool said: https://github.example/acme/app/pull/1"
        view = await rest.get(effect)
        assert view["state"] == "finished"
        assert view["call"]["tool"] == "create_pull_request" and view["call"]["arguments"] == {"title": "Fix the build"}
        await until("tool-call-finished", lambda: finished_count(rt, at.task_id))
        assert await finished_count(rt, at.task_id) == 1
    finally:
        await rest.aclose()
        await rt.close()


async def test_a_denial_reaches_the_model_as_tool_denied_with_the_reason(up: Holdpoint) -> None:
    rt = await Runtime.connect(up.nats_url, "acme")
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
        await rt.open_session(at.session)
        approvals = AgentsApprovals(rt, at, timeout=30)
        shop = Shop()
        agent = shop.agent(approvals, "call_no")
        result = await Runner.run(agent, "Fix the build")
        effect, _ = approvals.ids_of("call_no")
        decided = asyncio.create_task(approvals.decide(result.to_state()))
        await person_decides(rest, effect, False, "not on a Friday")
        result = await Runner.run(agent, await decided)
        assert shop.runs == []
        assert shop.told == ["tool.denied: not on a Friday"]
        assert result.final_output == "the tool said: tool.denied: not on a Friday"
        await until("tool-call-finished", lambda: finished_count(rt, at.task_id))
        assert (await rest.get(effect))["state"] == "finished"
    finally:
        await rest.aclose()
        await rt.close()


async def test_a_released_call_runs_once_across_a_worker_kill_and_runner_restarts(split: Holdpoint) -> None:
    worker = split.worker()
    split.ingress()
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    at = Placement(unique("sess"), "main", unique("task"), unique("ctx"))
    shop = Shop()
    try:
        # Runner 1: the run stops at the approval; its state is saved; it exits.
        rt1 = await Runtime.connect(split.nats_url, "acme")
        await rt1.open_session(at.session)
        approvals1 = AgentsApprovals(rt1, at, timeout=30)
        result = await Runner.run(shop.agent(approvals1, "call_rs"), "Fix the build")
        await approvals1.hold(result.interruptions)
        saved = result.to_state().to_string()
        await rt1.close()
        effect, _ = approvals1.ids_of("call_rs")

        # The person approves while no runner is up; the worker is killed (-9)
        # and a new one started.
        await person_decides(rest, effect, True)
        worker.p.kill()
        worker.p.wait(5)
        split.worker()

        # Runner 2 resumes from the saved state: the call runs, once.
        rt2 = await Runtime.connect(split.nats_url, "acme")
        try:
            approvals2 = AgentsApprovals(rt2, at, timeout=30)
            agent2 = shop.agent(approvals2, "call_rs")
            state = await approvals2.decide(await RunState.from_string(agent2, saved))
            result = await Runner.run(agent2, state)
            assert shop.runs == ["Fix the build"]
            assert result.final_output == "the tool said: https://github.example/acme/app/pull/1"
        finally:
            await rt2.close()

        # Runner 3: as if runner 2 died after executing and before saving, it
        # resumes from the same saved state. Holdpoint holds the result: the
        # tool is not run again and the model reads the same output.
        rt3 = await Runtime.connect(split.nats_url, "acme")
        try:
            approvals3 = AgentsApprovals(rt3, at, timeout=30)
            agent3 = shop.agent(approvals3, "call_rs")
            state = await approvals3.decide(await RunState.from_string(agent3, saved))
            result = await Runner.run(agent3, state)
            assert shop.runs == ["Fix the build"], "ran twice"
            assert result.final_output == "the tool said: https://github.example/acme/app/pull/1"
            await until("tool-call-finished", lambda: finished_count(rt3, at.task_id))
            assert await finished_count(rt3, at.task_id) == 1
            assert await event_count(rt3, at.task_id, "tool-call-released") == 1
            assert await event_count(rt3, at.task_id, "interaction-resolved") == 1
            record = await rt3.record(effect)
            assert record is not None and record["result"] == {
                "status": "ok", "output": "https://github.example/acme/app/pull/1",
            }, json.dumps(record)
        finally:
            await rt3.close()
    finally:
        await rest.aclose()


@pytest.mark.parametrize("stop_in_tool", ["before", "after"])
async def test_a_runtime_process_killed_after_the_approval_resumes_from_its_saved_state_and_runs_the_call_once(
    split: Holdpoint, stop_in_tool: str, tmp_path: Path
) -> None:
    """tests/openai_agents_runtime.py as a real process: it holds the call and
    saves its ``RunState``; the person approves; the worker is killed (-9) and
    a new one started; the runtime process is killed (-9) in the tool, before the
    side effect (``before``) or after it ran and its result was reported
    (``after``). Started again on the saved state, it resumes without holding
    anew: one release, one execution, one ``tool-call-finished``."""
    worker = split.worker()
    split.ingress()
    session, task, call_id = unique("sess"), unique("task"), unique("call")
    state, runs = tmp_path / "run-state.json", tmp_path / "runs"
    args = [split.nats_url, session, task, call_id, str(state), str(runs)]
    rest = HoldpointRest(split.api, token=split.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(split.nats_url, "acme")
    first = await Script.start("openai_agents_runtime.py", *args, "--stop-in-tool", stop_in_tool)
    second: Script | None = None
    try:
        effect = (await first.line("held ")).split()[1]
        assert state.exists()
        await person_decides(rest, effect, True)
        worker.p.kill()
        assert worker.p.wait(5) == -9
        split.worker()
        await first.line("executing" if stop_in_tool == "before" else "reported", timeout=60)
        await first.kill()
        assert first.proc.returncode == -9
        ran = runs.read_text().splitlines() if runs.exists() else []
        assert ran == ([] if stop_in_tool == "before" else ["create_pull_request Fix the build"])
        if stop_in_tool == "before":
            assert (await rt.record(effect) or {}).get("result") is None

        second = await Script.start("openai_agents_runtime.py", *args)
        await second.line("restarted")
        done = await second.line("done ", timeout=60)
        assert done == "done the tool said: https://github.example/acme/app/pull/42", second.lines
        assert await asyncio.wait_for(second.proc.wait(), 30) == 0, second.lines
        assert not any(line.startswith("held ") for line in second.lines), "held anew"
        assert runs.read_text().splitlines() == ["create_pull_request Fix the build"], "the call ran twice"
        await until("tool-call-finished", lambda: finished_count(rt, task), timeout=30)
        assert await event_count(rt, task, "approval-requested") == 1
        assert await event_count(rt, task, "interaction-resolved") == 1
        assert await event_count(rt, task, "tool-call-released") == 1
        assert await event_count(rt, task, "tool-call-finished") == 1
        record = await rt.record(effect)
        assert record is not None and record["result"] == {
            "status": "ok", "output": "https://github.example/acme/app/pull/42",
        }, json.dumps(record)
        assert (await rest.get(effect))["state"] == "finished"
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
        await rest.aclose()
        await rt.close()


async def test_the_integrations_example_runs_as_pasted(up: Holdpoint) -> None:
    """docs/integrations.md's OpenAI Agents block is examples/openai_agents_approval.py,
    and it runs: held, approved over REST, the tool runs once, the run finishes."""
    from .conftest import ROOT

    example = ROOT / "sdks" / "python" / "examples" / "openai_agents_approval.py"
    doc = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = doc.split("## OpenAI Agents SDK", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"
    assert block == example.read_text(encoding="utf-8"), "docs/integrations.md's block differs from the example"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(example), up.nats_url, "acme",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        held = (await asyncio.wait_for(proc.stdout.readline(), 90)).decode()  # a loaded machine imports slowly
        assert held.startswith("held oai_"), held
        await person_decides(rest, held.split()[1].rstrip(":"), True)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await rest.aclose()
    text = held + out.decode()
    assert proc.returncode == 0, text
    assert text.count("ran create_pull_request (Fix the build)") == 1, text
    assert text.rstrip().endswith("the tool said: https://github.example/acme/app/pull/42"), text
