#!/usr/bin/env python3
"""Drives a two-person approval through a live Holdpoint with the official A2A
Python SDK (a2a-sdk, v1.0).

Run by tests/integration/approvals.rs with the interpreter of .tools/a2a-venv
(made by ops/test.sh). The Rust test holds a call that needs two approvals; this
script, as two people of the organisation (the development identity headers):

  1. the first person reads the task with the interactions/v1 extension: it waits
     (TASK_STATE_AUTH_REQUIRED) with `detail.approvals` needing 2, none given;
  2. approves with the extension: the task still waits, and its status message
     now names them in `detail.approvals.given`;
  3. approves again under another messageId: refused, Holdpoint code NRY-0038 in
     the error data, and the task still waits;
  4. the second person approves: the task is TASK_STATE_WORKING.

Prints "two-person: ok" and exits 0 on success; any failure exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest, TaskState

URI = "https://docs.nylorun.com/a2a/interactions/v1"


class Failure(Exception):
    """A check that did not hold."""


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def approval(task: str, context: str, message_id: str, interaction: str) -> SendMessageRequest:
    body = {
        "message": {
            "role": "ROLE_USER",
            "messageId": message_id,
            "taskId": task,
            "contextId": context,
            "parts": [{"data": {"approved": True}}],
            "extensions": [URI],
            "metadata": {URI: {"interactionId": interaction, "approved": True}},
        }
    }
    return json_format.ParseDict(body, SendMessageRequest())


def shown(task) -> dict:
    """The open interaction the status message carries (extension metadata)."""
    status = json_format.MessageToDict(task.status.message)
    return status.get("metadata", {}).get(URI, {})


async def first(stream):
    try:
        async for event in stream:
            return event
    finally:
        await stream.aclose()
    raise Failure("the stream ended without an event")


async def person(base: str, org: str, who: str):
    http = httpx.AsyncClient(
        headers={"X-Holdpoint-Org": org, "X-Holdpoint-Person": who}, timeout=30.0
    )
    card = await A2ACardResolver(http, base).get_agent_card()
    return http, ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)


async def run(args: argparse.Namespace) -> None:
    task_id, context_id, interaction = args.hold.split(":", 2)
    ext = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([URI])])
    )
    first_http, first_client = await person(args.base, args.org, args.first)
    second_http, second_client = await person(args.base, args.org, args.second)
    try:
        # 1. Waiting, needing two, none given.
        task = await first_client.get_task(GetTaskRequest(id=task_id), context=ext)
        check(
            task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED,
            f"state {TaskState.Name(task.status.state)}",
        )
        meta = shown(task)
        check(meta.get("interactionId") == interaction, f"open interaction {meta}")
        approvals = meta.get("detail", {}).get("approvals", {})
        check(approvals.get("required") == 2, f"approvals {approvals}")
        check(not approvals.get("given"), f"none given yet: {approvals}")

        # 2. The first approval counts; the task still waits and says who.
        event = await first(
            first_client.send_message(
                approval(task_id, context_id, "m-first", interaction), context=ext
            )
        )
        check(event.HasField("task"), f"SendMessage returns the task: {event}")
        check(
            event.task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED,
            f"after one approval {TaskState.Name(event.task.status.state)}",
        )
        given = shown(event.task).get("detail", {}).get("approvals", {}).get("given", [])
        check([g.get("by") for g in given] == [args.first], f"given {given}")

        # 3. The same person again, another messageId: refused, nothing changes.
        try:
            await first(
                first_client.send_message(
                    approval(task_id, context_id, "m-first-again", interaction), context=ext
                )
            )
        except Exception as e:  # the SDK raises its error class for the JSON-RPC code
            data = getattr(e, "data", None) or {}
            check(data.get("code") == "NRY-0038", f"error data {data!r} ({e!r})")
        else:
            raise Failure("a second approval by the same person was not refused")

        # 4. The second person completes it.
        event = await first(
            second_client.send_message(
                approval(task_id, context_id, "m-second", interaction), context=ext
            )
        )
        check(
            event.task.status.state == TaskState.TASK_STATE_WORKING,
            f"after two approvals {TaskState.Name(event.task.status.state)}",
        )
    finally:
        await first_client.close()
        await second_client.close()
        await first_http.aclose()
        await second_http.aclose()
    print("two-person: ok")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="Holdpoint base URL")
    p.add_argument("--org", default="acme")
    p.add_argument("--first", default="ana")
    p.add_argument("--second", default="bob")
    p.add_argument("--hold", required=True, help="task:context:interaction needing two approvals")
    args = p.parse_args()
    try:
        asyncio.run(run(args))
    except Failure as f:
        print(f"two-person: FAILED: {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
