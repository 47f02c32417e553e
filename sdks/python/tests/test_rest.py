"""The people side against ``holdpoint up``: an answer whose fate is unknown (a
gateway's 504 after the server recorded it) is sent again with the same key and
recorded once; remembered rules are listed, read and revoked."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

import holdpoint
from holdpoint import HoldpointRest, Placement, Runtime

from .conftest import Holdpoint, collect, until
from .test_runtime import named, unique


class ImpatientGateway(httpx.AsyncBaseTransport):
    """Passes every request on; answers the first ``impatient`` answer POSTs with a
    ``504`` after the server answered them (as a gateway that gave up waiting
    does), and keeps the ``Idempotency-Key`` of every answer it saw."""

    def __init__(self, impatient: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.impatient = impatient
        self.keys: list[str] = []
        self.statuses: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and "Idempotency-Key" in request.headers:
            self.keys.append(request.headers["Idempotency-Key"])
            await response.aread()
            self.statuses.append(response.status_code)
            if self.impatient > 0:
                self.impatient -= 1
                return httpx.Response(504, text="<html><body><h1>504 Gateway Time-out</h1></body></html>")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_an_answer_lost_behind_a_504_is_retried_with_its_key_and_recorded_once(up: Holdpoint) -> None:
    gateway = ImpatientGateway(impatient=2)
    client = httpx.AsyncClient(transport=gateway, timeout=30)
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"), client=client)
    rt = await Runtime.connect(up.nats_url, "acme")
    seen: list[holdpoint.Followed] = []
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        follower = asyncio.create_task(collect(await rt.follow(task=task), seen))
        effect = await rt.hold_for_approval(
            Placement(session, "main", task, unique("ctx")),
            effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={"n": 1},
        )
        await rest.approve(effect, approved=True)
        assert len(gateway.keys) == 3 and len(set(gateway.keys)) == 1, gateway.keys
        # The server answered every attempt 204: the first recorded it, the
        # retries replayed that answer.
        assert gateway.statuses == [204, 204, 204]
        await until("the release", lambda: named(seen, "tool-call-released", effect))
        follower.cancel()
        assert len(named(seen, "interaction-resolved", effect)) == 1
        assert len(named(seen, "tool-call-released", effect)) == 1
        # Stored once, whatever a follower saw.
        for name in ("interaction-resolved", "tool-call-released"):
            subject = f"hp.evt.acme.{task}.{name}"
            info = await rt._js.stream_info("HP_EVENTS", subjects_filter=subject)
            assert (info.state.subjects or {}).get(subject, 0) == 1, name

        # No retry budget: the 504 is the caller's to handle.
        gateway.impatient = 1
        other = await rt.hold_for_approval(
            Placement(session, "main", unique("task"), unique("ctx")),
            effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={},
        )
        with pytest.raises(holdpoint.HoldpointError) as lost:
            await rest.approve(other, approved=False, retry_for=0)
        assert lost.value.status == 504
    finally:
        await rest.aclose()
        await client.aclose()
        await rt.close()


async def test_remembered_rules_are_listed_read_and_revoked(up: Holdpoint) -> None:
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session = unique("sess")
        await rt.open_session(session)
        at = Placement(session, "main", unique("task"), unique("ctx"))
        tool = f"tool-{uuid.uuid4().hex[:6]}"
        effect = await rt.hold_for_approval(
            at, effect_id=unique("eff"), call_id=unique("call"), server="github", tool=tool, arguments={}
        )
        await rest.approve(effect, approved=True, remember={"scope": "session"})

        def written() -> Any:
            async def check() -> Any:
                page = await rest.rules()
                return [r for r in page.get("items", []) if tool in str(r)]

            return check()

        rules = await until("the remembered rule", written)
        rule_id = rules[0]["id"]
        assert tool in str(await rest.rule(rule_id))

        async def hold_again() -> str:
            return await rt.hold_for_approval(
                at, effect_id=unique("eff"), call_id=unique("call"), server="github", tool=tool, arguments={}
            )

        # While the rule lives, the same call in the session is decided by it...
        decided = await hold_again()
        assert (await rest.get(decided))["state"] != "pending"
        first = await rest.revoke_rule(rule_id)
        assert await rest.revoke_rule(rule_id) == first  # revoking is idempotent
        # ...and once revoked, the next hold waits for a person again.
        waits = await hold_again()
        assert (await rest.get(waits))["state"] == "pending"

        question = await rt.ask_user(at, call_id=unique("call"), questions=[holdpoint.Question("ok?", ["yes"])])
        with pytest.raises(holdpoint.NothingToRememberError):
            await rest.respond(question, {"answers": [{"options": [0]}]}, remember={"scope": "session"}, retry_for=0)
    finally:
        await rest.aclose()
        await rt.close()


async def test_edit_then_approve_releases_the_edit_and_a_fixed_hold_refuses_it(up: Holdpoint) -> None:
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    seen: list[holdpoint.Followed] = []
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        follower = asyncio.create_task(collect(await rt.follow(task=task), seen))
        at = Placement(session, "main", task, unique("ctx"))
        held = {"repo": "acme/app", "title": "Fix"}
        editable = await rt.hold_for_approval(
            at, effect_id=unique("eff"), call_id=unique("call"), server="github", tool="pr",
            arguments=held, editable=True,
        )
        fixed = await rt.hold_for_approval(
            Placement(session, "main", unique("task"), unique("ctx")),
            effect_id=unique("eff"), call_id=unique("call"), server="github", tool="pr", arguments=held,
        )
        view = await rest.get(editable)
        assert view["call"]["editable"] is True
        digest = view["call"]["argumentsDigest"]
        assert digest == holdpoint.arguments_digest(held)
        with pytest.raises(holdpoint.CallNotEditableError):
            await rest.approve(fixed, approved=True, arguments_digest=digest, edited_arguments={"repo": "x"})
        assert (await rest.get(fixed))["state"] == "pending"
        with pytest.raises(holdpoint.EditNotValidError):
            await rest.approve(editable, approved=True, edited_arguments={"repo": "x"})
        edit = {"repo": "acme/app", "title": "Fix, edited from Python"}
        await rest.approve(editable, approved=True, arguments_digest=digest, edited_arguments=edit)
        released = await until("the release", lambda: named(seen, "tool-call-released", editable))
        follower.cancel()
        data = released[0].event["data"]
        assert data["arguments"] == edit and data["edited"] is True
        assert data["argumentsDigest"] == digest
        assert data["editedArgumentsDigest"] == holdpoint.arguments_digest(edit)
    finally:
        await rest.aclose()
        await rt.close()


async def test_answer_many_decides_each_item_on_its_own_and_a_retry_decides_nothing_twice(
    up: Holdpoint,
) -> None:
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session = unique("sess")
        await rt.open_session(session)
        effects = [
            await rt.hold_for_approval(
                Placement(session, "main", unique("task"), unique("ctx")),
                effect_id=unique("eff"), call_id=unique("call"), server="s", tool="t", arguments={"n": n},
            )
            for n in range(3)
        ]
        # The third was answered by someone else first.
        await HoldpointRest(up.api, token=up.token("acme", "bob@acme.example")).approve(
            effects[2], approved=True
        )
        items = [
            {"interactionId": effects[0], "operation": "approve", "body": {"approved": True},
             "idempotencyKey": unique("k")},
            {"interactionId": effects[1], "operation": "approve",
             "body": {"approved": False, "reason": "later"}, "idempotencyKey": unique("k")},
            {"interactionId": effects[2], "operation": "approve", "body": {"approved": True},
             "idempotencyKey": unique("k")},
            {"interactionId": "eff_missing", "operation": "approve", "body": {"approved": True},
             "idempotencyKey": unique("k")},
        ]
        first = await rest.answer_many(items)
        assert [(r["status"], r.get("code")) for r in first] == [
            (204, None), (204, None), (409, "NRY-0009"), (404, "NRY-0004"),
        ], first
        assert [r["interactionId"] for r in first] == [i["interactionId"] for i in items]
        again = await rest.answer_many(items)
        assert again == first
        for effect, approved in [(effects[0], True), (effects[1], False)]:
            view = await rest.get(effect)
            assert view["resolution"]["answer"]["approved"] is approved, view
        with pytest.raises(holdpoint.BatchNotValidError):
            await rest.answer_many([])
    finally:
        await rt.close()


async def test_a_form_question_takes_only_a_value_that_fits(up: Holdpoint) -> None:
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        session = unique("sess")
        await rt.open_session(session)
        schema = {
            "type": "object",
            "properties": {"email": {"type": "string", "format": "email"}, "seats": {"type": "integer", "minimum": 1}},
            "required": ["email"],
        }
        q = await rt.ask_user_form(
            Placement(session, "main", unique("task"), unique("ctx")),
            call_id=unique("call"), text="Who?", schema=schema,
        )
        view = await rest.get(q)
        assert view["detail"]["questions"][0]["schema"] == schema
        with pytest.raises(holdpoint.ValueDoesNotFitTheFormError) as misfit:
            await rest.respond(q, {"email": "ana@acme.example", "seats": 0})
        assert misfit.value.body["pointer"] == "/seats"
        assert (await rest.get(q))["state"] == "pending"
        await rest.respond(q, {"email": "ana@acme.example", "seats": 2})
        assert (await rest.get(q))["resolution"]["answer"]["value"] == {"email": "ana@acme.example", "seats": 2}
    finally:
        await rt.close()


async def test_an_approval_that_needs_two_people_counts_each_once_and_releases_on_the_second(
    up: Holdpoint,
) -> None:
    ana = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    bob = HoldpointRest(up.api, token=up.token("acme", "bob@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    seen: list[holdpoint.Followed] = []
    try:
        session, task = unique("sess"), unique("task")
        await rt.open_session(session)
        follower = asyncio.create_task(collect(await rt.follow(task=task), seen))
        at = Placement(session, "main", task, unique("ctx"))
        effect = await rt.hold_for_approval(
            at, effect_id=unique("eff"), call_id=unique("call"), server="bank", tool="transfer",
            arguments={"amount": 10_000}, approvals=2,
        )
        decision = asyncio.create_task(rt.wait_for_decision(task, effect, timeout=60))
        view = await ana.get(effect)
        assert view["approvals"]["required"] == 2 and view["approvals"]["given"] == [], view
        digest = view["call"]["argumentsDigest"]

        # Ana's approval is counted; the call waits for someone else's.
        first_key = unique("k")
        progress = await ana.approve(effect, approved=True, arguments_digest=digest, idempotency_key=first_key)
        assert progress == holdpoint.ApprovalProgress(given=1, required=2)
        counted = await until("approval-counted", lambda: named(seen, "approval-counted", effect))
        assert counted[0].event["data"] | {} == {
            "interactionId": effect, "by": "ana@acme.example", "given": 1, "required": 2,
        }
        view = await ana.get(effect)
        assert view["state"] == "pending"
        assert [g["by"] for g in view["approvals"]["given"]] == ["ana@acme.example"]
        assert view["approvals"]["byYou"] is True
        assert (await bob.get(effect))["approvals"]["byYou"] is False
        assert not decision.done() and not named(seen, "tool-call-released", effect)
        # The same key again replays the count; a new key is a second approval by
        # the same person: refused, nothing changes.
        assert await ana.approve(effect, approved=True, idempotency_key=first_key) == progress
        with pytest.raises(holdpoint.AlreadyApprovedByYouError) as twice:
            await ana.approve(effect, approved=True, arguments_digest=digest)
        assert (twice.value.code, twice.value.status) == ("NRY-0038", 409)
        with pytest.raises(holdpoint.AlreadyApprovedByYouError):
            await ana.respond(effect, True)
        with pytest.raises(holdpoint.NothingToRememberError):
            await bob.approve(effect, approved=True, remember={"scope": "session"}, retry_for=0)
        assert len((await ana.get(effect))["approvals"]["given"]) == 1

        # Bob's is the second one needed: the call is released, naming both.
        assert await bob.approve(effect, approved=True, arguments_digest=digest) is None
        decided = await decision
        assert decided.approved and decided.by == "bob@acme.example"
        assert decided.approvals == ("ana@acme.example", "bob@acme.example")
        released = await until("the release", lambda: named(seen, "tool-call-released", effect))
        assert released[0].event["data"]["approvals"] == ["ana@acme.example", "bob@acme.example"]
        follower.cancel()

        # In a batch: a counted item is 202 with its progress, then a refusal and a release.
        other = await rt.hold_for_approval(
            Placement(session, "main", unique("task"), unique("ctx")),
            effect_id=unique("eff"), call_id=unique("call"), server="bank", tool="transfer",
            arguments={"amount": 1}, approvals=2,
        )
        item = {"interactionId": other, "operation": "approve", "body": {"approved": True}}
        [counted_item] = await ana.answer_many([item])
        assert counted_item["status"] == 202 and counted_item["approvals"] == {"given": 1, "required": 2}
        assert holdpoint.ApprovalProgress.from_json(counted_item["approvals"]) == holdpoint.ApprovalProgress(1, 2)
        [again] = await ana.answer_many([item])
        assert (again["status"], again["code"]) == (409, "NRY-0038")
        [last] = await bob.answer_many([item])
        assert last["status"] == 204 and last.get("approvals") is None
        assert (await ana.get(other))["state"] != "pending"
    finally:
        await ana.aclose()
        await bob.aclose()
        await rt.close()
