import asyncio
import sys
import uuid

from holdpoint import Placement, Runtime, tool_ok


def create_pull_request(title: str) -> dict[str, str]:
    """The tool itself: runs once, with the arguments the person approved."""
    return {"url": "https://github.example/acme/app/pull/42", "title": title}


async def main(nats_url: str, org: str) -> None:
    async with await Runtime.connect(nats_url, org) as rt:
        run = uuid.uuid4().hex[:8]
        session, task, effect, call = f"py-{run}", f"task-{run}", f"eff_{run}", f"call-{run}"
        await rt.open_session(session)
        events = await rt.follow(task=task)  # from here on, nothing of this task is missed
        await rt.hold_for_approval(
            Placement(session, "main", task, "ctx-1"),
            effect_id=effect, call_id=call, server="github", tool="create_pull_request",
            arguments={"title": "Fix the build"}, reason="writes to a repository",
        )
        print(f"held {effect}: approve it with `holdpoint approve {effect}`", flush=True)
        async for followed in events:
            data = followed.event["data"]
            print(f"#{followed.sequence} {followed.name}", flush=True)
            if followed.name == "tool-call-released":
                # Released exactly as held: run it once (the effect id is its key).
                output = create_pull_request(**data["arguments"])
                await rt.report_tool_result(effect, tool_ok(output))
            elif followed.name == "tool-call-finished":
                print(f"finished: {data['result']}", flush=True)
                return


if __name__ == "__main__":
    asyncio.run(main(*(sys.argv[1:] or ["nats://127.0.0.1:4290", "acme"])))
