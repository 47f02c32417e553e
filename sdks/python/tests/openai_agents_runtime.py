"""An OpenAI Agents SDK runtime as a process of its own, for
test_openai_agents.py's restart test (not a test module): an agent whose
``create_pull_request`` tool needs approval, held in Holdpoint through
:class:`AgentsApprovals` and guarded by :meth:`AgentsApprovals.guard`, its
``RunState`` saved to a file at the interruption (``RunState.to_string()``), as a
runner that can die saves it.

    python openai_agents_runtime.py NATS_URL SESSION TASK CALL_ID STATE RUNS [--stop-in-tool before|after]

Started with no ``STATE`` file, it runs the agent to the interruption, holds it
(printing ``held <effect>``), saves the state and waits for the decision;
started with one (a restart), it prints ``restarted`` and resumes from it. The
tool's side effect appends a line to the file ``RUNS``. ``--stop-in-tool
before`` makes the tool print ``executing`` and wait for ever before the side
effect; ``after`` makes the guarded tool print ``reported`` and wait for ever
once the call ran and its result was reported to Holdpoint, before the run
goes on (the test kills it -9 there). At the end it prints ``done <output>``.

The model is the Agents SDK's ``ScriptedModel`` (no network, no API key): each
call asks for the tool until the input holds the tool's output, then repeats it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Runner, RunState, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from holdpoint import Placement, Runtime
from holdpoint.integrations.openai_agents import AgentsApprovals


def build(approvals: AgentsApprovals, call_id: str, runs: str, stop_in_tool: str | None) -> Agent[Any]:
    @function_tool(needs_approval=True)
    async def create_pull_request(title: str) -> str:
        """Opens a pull request."""
        if stop_in_tool == "before":
            print("executing", flush=True)
            await asyncio.Event().wait()  # killed -9 here by the test
        with open(runs, "a", encoding="utf-8") as f:  # the side effect, counted by the test
            f.write(f"create_pull_request {title}\n")
        return "https://github.example/acme/app/pull/42"

    def step(call: ModelCall) -> list[Any]:
        items = call.input if isinstance(call.input, list) else []
        outputs = [i.get("output") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outputs:
            return [function_call("create_pull_request", {"title": "Fix the build"}, call_id=call_id)]
        return [assistant_message(f"the tool said: {outputs[-1]}")]

    guarded = approvals.guard(create_pull_request)
    if stop_in_tool == "after":
        invoke = guarded.on_invoke_tool

        async def then_stop(ctx: Any, input_json: str) -> Any:
            await invoke(ctx, input_json)  # ran, and its result reported
            print("reported", flush=True)
            await asyncio.Event().wait()  # killed -9 here by the test

        guarded = dataclasses.replace(guarded, on_invoke_tool=then_stop)
    assert isinstance(guarded, FunctionTool)
    model = ScriptedModel([ModelStep.respond(step), ModelStep.respond(step)])
    return Agent(name="coder", instructions="Ship fixes.", model=model, tools=[guarded])


async def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("nats_url", "session", "task", "call_id", "state", "runs"):
        p.add_argument(name)
    p.add_argument("--stop-in-tool", choices=["before", "after"])
    a = p.parse_args()
    set_tracing_disabled(True)
    saved = Path(a.state)
    async with await Runtime.connect(a.nats_url, "acme") as rt:
        at = Placement(a.session, "main", a.task, "ctx-1")
        approvals = AgentsApprovals(rt, at, reason=lambda tool, args: "writes to a repository", timeout=60)
        agent = build(approvals, a.call_id, a.runs, a.stop_in_tool)
        if saved.exists():
            print("restarted", flush=True)
            state = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
        else:
            await rt.open_session(at.session)
            result = await Runner.run(agent, "Fix the build")
            held = await approvals.hold(result.interruptions)
            state = result.to_state()
            tmp = saved.with_suffix(".tmp")
            tmp.write_text(state.to_string(), encoding="utf-8")
            os.replace(tmp, saved)
            for h in held:
                print(f"held {h.effect_id}", flush=True)
        result = await Runner.run(agent, await approvals.decide(state))
        while result.interruptions:  # pragma: no cover - the script asks for one call
            result = await Runner.run(agent, await approvals.decide(result.to_state()))
        print(f"done {result.final_output}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
