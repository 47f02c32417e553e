import asyncio
import sys
import uuid
from typing import Literal

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from holdpoint import Placement, Runtime
from holdpoint.integrations.mcp_elicitation import HoldpointElicitation

server = MCPServer("restaurant")


class Booking(BaseModel):
    date: str = Field(description="Which day?")
    seats: int = Field(ge=1, le=8, description="How many seats?")
    area: Literal["inside", "terrace"] = "inside"


@server.tool()
async def book(ctx: Context) -> str:
    """An MCP tool that asks the user for the booking's details (form mode)."""
    r = await ctx.elicit("Book a table", Booking)
    return f"booked: {r.data.model_dump_json()}" if r.action == "accept" else r.action


async def main(nats_url: str, org: str) -> None:
    async with await Runtime.connect(nats_url, org) as rt:
        run = uuid.uuid4().hex[:8]
        at = Placement(f"mcp-{run}", "main", f"task-{run}", "ctx-1")
        await rt.open_session(at.session)
        elicit = HoldpointElicitation(rt, at)  # the person answers in the inbox, REST or A2A
        async with Client(server, elicitation_callback=elicit, mode="legacy") as client:
            call = asyncio.create_task(client.call_tool("book", {}))
            while not elicit.last_interactions and not call.done():
                await asyncio.sleep(0.05)
            print(f"asked {elicit.last_interactions[0]}", flush=True)
            result = await call
        print("".join(getattr(c, "text", "") for c in result.content), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*(sys.argv[1:] or ["nats://127.0.0.1:4290", "acme"])))
