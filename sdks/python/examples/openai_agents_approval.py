import asyncio
import sys
import uuid

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import TResponseOutputItem
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from holdpoint import Placement, Runtime
from holdpoint.integrations.openai_agents import AgentsApprovals


@function_tool(needs_approval=True)
def create_pull_request(title: str) -> str:
    """Opens a pull request (the side effect: runs once, when a person approved)."""
    print(f"ran create_pull_request ({title})", flush=True)
    return "https://github.example/acme/app/pull/42"


def scripted_model() -> ScriptedModel:
    """A model with no network or API key: asks for the tool, then repeats its output."""

    def answer(call: ModelCall) -> list[TResponseOutputItem]:
        items = call.input if isinstance(call.input, list) else []
        outputs = [i.get("output") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        return [assistant_message(f"the tool said: {outputs[-1] if outputs else ''}")]

    call = function_call("create_pull_request", {"title": "Fix the build"}, call_id=f"call_{uuid.uuid4().hex[:8]}")
    return ScriptedModel([[call], ModelStep.respond(answer)])


async def main(nats_url: str, org: str) -> None:
    set_tracing_disabled(True)
    async with await Runtime.connect(nats_url, org) as rt:
        run = uuid.uuid4().hex[:8]
        at = Placement(f"oai-{run}", "main", f"task-{run}", "ctx-1")
        await rt.open_session(at.session)
        approvals = AgentsApprovals(rt, at, reason=lambda tool, args: "writes to a repository")
        agent = Agent(
            name="coder", instructions="Ship fixes.", model=scripted_model(),
            tools=[approvals.guard(create_pull_request)],
        )
        result = await Runner.run(agent, "Fix the build")
        while result.interruptions:
            for held in await approvals.hold(result.interruptions):
                print(f"held {held.effect_id}: approve it with `holdpoint approve {held.effect_id}`", flush=True)
            state = await approvals.decide(result.to_state())  # waits for the person
            result = await Runner.run(agent, state)
        print(result.final_output, flush=True)


if __name__ == "__main__":
    asyncio.run(main(*(sys.argv[1:] or ["nats://127.0.0.1:4290", "acme"])))
