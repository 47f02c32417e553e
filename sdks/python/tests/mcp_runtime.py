"""An MCP runtime as a process of its own, for test_mcp_elicitation.py's restart
test (not a test module): the official ``mcp`` SDK's ``MCPServer`` with a tool
that elicits a booking (form mode) and then books it, and a ``Client``
connected to it in-process whose ``elicitation_callback`` is a
:class:`HoldpointElicitation` with a ``key`` (the run's), so a process started
again replays the tool call as the same interaction.

    python mcp_runtime.py NATS_URL SESSION TASK KEY RUNS [--stop-before-booking]

It opens the session (a replay when it exists), calls the tool, prints
``asked <interaction>`` once the elicitation is a Holdpoint question, and at
the end ``done <tool text>``. The booking appends a line to the file ``RUNS``.
``--stop-before-booking`` makes the tool print ``executing`` and wait for ever
once the elicitation was accepted, before it books (the test kills it -9
there).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Literal

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from holdpoint import Placement, Runtime
from holdpoint.integrations.mcp_elicitation import HoldpointElicitation


class Booking(BaseModel):
    date: str = Field(description="Which day?")
    seats: int = Field(ge=1, le=8, description="How many seats?")
    area: Literal["inside", "terrace"] = "inside"


def build(runs: str, stop_before_booking: bool) -> MCPServer:
    server = MCPServer("restaurant")

    @server.tool()
    async def book(ctx: Context) -> str:
        """Books a table after asking the user for the details."""
        r = await ctx.elicit("Book a table", Booking)
        if r.action != "accept":
            return r.action
        if stop_before_booking:
            print("executing", flush=True)
            await asyncio.Event().wait()  # killed -9 here by the test
        with open(runs, "a", encoding="utf-8") as f:  # the side effect, counted by the test
            f.write(r.data.model_dump_json() + "\n")
        return f"booked:{r.data.model_dump_json()}"

    return server


async def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("nats_url", "session", "task", "key", "runs"):
        p.add_argument(name)
    p.add_argument("--stop-before-booking", action="store_true")
    a = p.parse_args()
    async with await Runtime.connect(a.nats_url, "acme") as rt:
        at = Placement(a.session, "main", a.task, "ctx-1")
        await rt.open_session(at.session)
        elicit = HoldpointElicitation(rt, at, key=a.key, timeout=60)
        async with Client(build(a.runs, a.stop_before_booking), elicitation_callback=elicit, mode="legacy") as client:
            call = asyncio.create_task(client.call_tool("book", {}))
            while not elicit.last_interactions and not call.done():
                await asyncio.sleep(0.02)
            if elicit.last_interactions:
                print(f"asked {elicit.last_interactions[0]}", flush=True)
            result = await call
        print("done " + "".join(getattr(c, "text", "") for c in result.content), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
