"""A LangGraph runtime as a process of its own, for test_langgraph.py's restart
test (not a test module): a graph whose ``approve`` node is a Holdpoint
approval and whose ``act`` node runs the released call through
:meth:`GraphInterrupts.execute`, checkpointed on disk (``AsyncSqliteSaver``,
``durability="sync"``).

    python langgraph_runtime.py NATS_URL SESSION TASK THREAD DB RUNS [--stop-in-act before|after]

Started on a thread with no checkpoint, it runs the graph to the approval,
holds it (printing ``held <interaction>``) and waits for the decision; started
on one that has a checkpoint (a restart), it prints ``restarted`` and resumes
from the checkpointer. The call's side effect appends a line to the file
``RUNS``. ``--stop-in-act before`` makes ``act`` print ``executing`` and wait for
ever before it runs the call; ``after`` makes it print ``reported`` and wait for
ever after the call ran and its result was reported (the test kills it -9
there). At the end it prints ``done <url>``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from holdpoint import Placement, Runtime
from holdpoint.integrations.langgraph import GraphInterrupts


class State(TypedDict, total=False):
    title: str
    decision: dict[str, Any]
    url: str


def build(saver: AsyncSqliteSaver, hp: GraphInterrupts, runs: str, stop_in_act: str | None) -> Any:
    def approve(state: State) -> State:
        tool, arguments = "create_pull_request", {"title": state["title"]}
        return {"decision": interrupt({"kind": "approval", "tool": tool, "arguments": arguments})}

    def create_pull_request() -> str:
        with open(runs, "a", encoding="utf-8") as f:  # the side effect, counted by the test
            f.write("create_pull_request\n")
        return "https://github.example/acme/app/pull/42"

    async def act(state: State) -> State:
        if not state["decision"]["approved"]:
            return {}
        if stop_in_act == "before":
            print("executing", flush=True)
            await asyncio.Event().wait()  # killed -9 here by the test
        url = await hp.execute(state["decision"], create_pull_request)
        if stop_in_act == "after":
            print("reported", flush=True)
            await asyncio.Event().wait()  # killed -9 here by the test
        return {"url": str(url)}

    g = StateGraph(State)
    g.add_node("approve", approve)
    g.add_node("act", act)
    g.add_edge(START, "approve")
    g.add_edge("approve", "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=saver)


async def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("nats_url", "session", "task", "thread", "db", "runs"):
        p.add_argument(name)
    p.add_argument("--stop-in-act", choices=["before", "after"])
    a = p.parse_args()
    async with await Runtime.connect(a.nats_url, "acme") as rt:
        at = Placement(a.session, "main", a.task, "ctx-1")
        hp = GraphInterrupts(rt, at, timeout=60)
        config: dict[str, Any] = {"configurable": {"thread_id": a.thread}}
        async with AsyncSqliteSaver.from_conn_string(a.db) as saver:
            graph = build(saver, hp, a.runs, a.stop_in_act)
            if (await graph.aget_state(config)).values:
                print("restarted", flush=True)
            else:
                await rt.open_session(at.session)
                first = await graph.ainvoke({"title": "Fix the build"}, config, durability="sync")
                for held in await hp.hold(first["__interrupt__"], a.thread):
                    print(f"held {held.interaction_id}", flush=True)
            result = await hp.resume(graph, config, durability="sync")
            print(f"done {(result or {}).get('url')}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
