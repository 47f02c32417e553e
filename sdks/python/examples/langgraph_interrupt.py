import asyncio
import sys
import uuid
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from holdpoint import Placement, Runtime, tool_ok
from holdpoint.integrations.langgraph import GraphInterrupts


class State(TypedDict, total=False):
    title: str
    decision: dict[str, Any]
    url: str


def approve(state: State) -> State:
    # Becomes a Holdpoint approval; the graph stops here until a person decides.
    return {"decision": interrupt({"kind": "approval", "tool": "create_pull_request", "arguments": {"title": state["title"]}})}


def act(state: State) -> State:
    if not state["decision"]["approved"]:
        return {}
    print(f"ran create_pull_request ({state['title']})", flush=True)
    return {"url": "https://github.example/acme/app/pull/42"}


def build(saver: InMemorySaver) -> Any:
    g = StateGraph(State)
    g.add_node("approve", approve)
    g.add_node("act", act)
    g.add_edge(START, "approve")
    g.add_edge("approve", "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=saver)


async def main(nats_url: str, org: str) -> None:
    async with await Runtime.connect(nats_url, org) as rt:
        run = uuid.uuid4().hex[:8]
        at = Placement(f"lg-{run}", "main", f"task-{run}", "ctx-1")
        await rt.open_session(at.session)
        saver = InMemorySaver()
        config: dict[str, Any] = {"configurable": {"thread_id": f"thread-{run}"}}
        first = await build(saver).ainvoke({"title": "Fix the build"}, config)
        interrupts = GraphInterrupts(rt, at)
        for held in await interrupts.hold(first["__interrupt__"], f"thread-{run}"):
            print(f"held {held.interaction_id}: approve it with `holdpoint approve {held.interaction_id}`", flush=True)
        result = await interrupts.resume(build(saver), config)  # from the checkpointer, with the answer
        if result.get("url"):
            await rt.report_tool_result(result["decision"]["effectId"], tool_ok({"url": result["url"]}))
        print(f"done: {result.get('url', 'not approved')}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*(sys.argv[1:] or ["nats://127.0.0.1:4290", "acme"])))
