#!/usr/bin/env python3
"""Drives a live Holdpoint with the official A2A Python SDK (a2a-sdk, v1.0).

Run by tests/integration/a2a.rs with the interpreter of .tools/a2a-venv (made by
ops/test.sh). The Rust test opens the interactions with the runtime client and
checks what Holdpoint recorded afterwards; this script plays an A2A client:

  1. resolves the agent card and checks its interface, version, streaming and the
     interactions/v1 extension;
  2. gets the waiting approval's task with the extension activated (A2A-Extensions)
     and finds the open interaction in the status message's metadata;
  3. answers the approval with the extension (metadata interactionId + approved)
     and sees TASK_STATE_WORKING; subscribes to the task and sees the same;
  4. answers the question with a text part and sees TASK_STATE_WORKING;
  5. sends text to the other approval and sees UnsupportedOperationError, with the
     Holdpoint code NRY-0020 in the error data.

Identity: the development headers (X-Holdpoint-Org / X-Holdpoint-Person) on the
SDK's httpx client, or a bearer token with --token.

Prints "conformance: ok" and exits 0 on success; any failure exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError

URI = "https://docs.nylorun.com/a2a/interactions/v1"


class Failure(Exception):
    """A conformance check that did not hold."""


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def triple(value: str) -> tuple[str, str, str]:
    task, context, interaction = value.split(":", 2)
    return task, context, interaction


def message(task: str, context: str, message_id: str, parts: list, meta: dict | None = None):
    body = {
        "message": {
            "role": "ROLE_USER",
            "messageId": message_id,
            "taskId": task,
            "contextId": context,
            "parts": parts,
        }
    }
    if meta is not None:
        body["message"]["extensions"] = [URI]
        body["message"]["metadata"] = {URI: meta}
    return json_format.ParseDict(body, SendMessageRequest())


async def first(stream):
    try:
        async for event in stream:
            return event
    finally:
        await stream.aclose()
    raise Failure("the stream ended without an event")


async def run(args: argparse.Namespace) -> None:
    headers = {}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    else:
        headers["X-Holdpoint-Org"] = args.org
        headers["X-Holdpoint-Person"] = args.person
    ext = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([URI])])
    )
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        # 1. The card.
        card = await A2ACardResolver(http, args.base).get_agent_card()
        check(card.name == "Holdpoint", f"card name {card.name!r}")
        check(card.capabilities.streaming, "the card declares streaming")
        check(
            any(e.uri == URI for e in card.capabilities.extensions),
            "the card declares the interactions/v1 extension",
        )
        iface = card.supported_interfaces[0]
        check(iface.protocol_binding == "JSONRPC", f"binding {iface.protocol_binding}")
        check(iface.protocol_version == "1.0", f"version {iface.protocol_version}")
        check(iface.url == args.base.rstrip("/") + "/a2a", f"url {iface.url}")

        # Unary calls for the answers; streaming for the subscription.
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)

        # 2. The waiting approval, with the extension.
        task_id, context_id, approval = triple(args.approval)
        task = await client.get_task(GetTaskRequest(id=task_id), context=ext)
        check(
            task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED,
            f"approval task state {TaskState.Name(task.status.state)}",
        )
        status = json_format.MessageToDict(task.status.message)
        meta = status.get("metadata", {}).get(URI, {})
        check(meta.get("interactionId") == approval, f"open interaction {meta}")
        check(meta.get("kind") == "approval", f"kind {meta}")
        check(status["parts"][0]["text"] == meta.get("prompt"), "text part is the prompt")
        check("arguments" not in str(status), "the status never shows the arguments")
        plain = await client.get_task(GetTaskRequest(id=task_id))
        check(
            not json_format.MessageToDict(plain.status.message).get("metadata"),
            "without the extension: plain text",
        )

        # 3. Approve with the extension.
        answer = message(
            task_id,
            context_id,
            f"answer:{approval}",
            [{"data": {"approved": True}}],
            {"interactionId": approval, "approved": True},
        )
        event = await first(client.send_message(answer, context=ext))
        check(event.HasField("task"), f"SendMessage returns the task: {event}")
        check(event.task.id == task_id, "the same taskId")
        check(
            event.task.status.state == TaskState.TASK_STATE_WORKING,
            f"after approval {TaskState.Name(event.task.status.state)}",
        )
        # The same messageId again: the same result.
        again = await first(client.send_message(answer, context=ext))
        check(again.task.status.state == TaskState.TASK_STATE_WORKING, "retry: same result")
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        sub = await first(streaming.subscribe(SubscribeToTaskRequest(id=task_id), context=ext))
        check(
            sub.task.status.state == TaskState.TASK_STATE_WORKING,
            f"subscribed task {TaskState.Name(sub.task.status.state)}",
        )

        # 4. A text part answers the question.
        q_task, q_context, _question = triple(args.question)
        q = await client.get_task(GetTaskRequest(id=q_task), context=ext)
        check(q.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, "question waits for input")
        event = await first(
            client.send_message(
                message(q_task, q_context, "m-question", [{"text": "main, keep both"}])
            )
        )
        check(
            event.task.status.state == TaskState.TASK_STATE_WORKING,
            f"after the text answer {TaskState.Name(event.task.status.state)}",
        )

        # 5. Text never approves.
        r_task, r_context, _refused = triple(args.refused)
        try:
            await first(
                client.send_message(message(r_task, r_context, "m-text", [{"text": "approve it"}]))
            )
        except UnsupportedOperationError as e:
            check((e.data or {}).get("code") == "NRY-0020", f"error data {e.data}")
        else:
            raise Failure("text on an approval was not refused")
        still = await client.get_task(GetTaskRequest(id=r_task))
        check(
            still.status.state == TaskState.TASK_STATE_AUTH_REQUIRED,
            "the refused approval still waits",
        )
        await streaming.close()
        await client.close()
    print("conformance: ok")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="Holdpoint base URL (http://127.0.0.1:8080)")
    p.add_argument("--org", default="acme")
    p.add_argument("--person", default="ana")
    p.add_argument("--token", help="a bearer JWT instead of the development headers")
    p.add_argument("--approval", required=True, help="task:context:interaction to approve")
    p.add_argument("--question", required=True, help="task:context:interaction to answer")
    p.add_argument("--refused", required=True, help="task:context:interaction to send text to")
    args = p.parse_args()
    try:
        asyncio.run(run(args))
    except Failure as f:
        print(f"conformance: FAILED: {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
