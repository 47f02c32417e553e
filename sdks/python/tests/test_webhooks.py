"""verify_webhook against the notifier's real signatures (a delivery of
``holdpoint up`` to a local endpoint), cross-checked with the Standard Webhooks
reference library, and against tampering, a wrong secret and stale timestamps."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks import Webhook

import holdpoint
from holdpoint import HoldpointRest, Placement, Runtime, WebhookVerificationError, verify_webhook

from .conftest import Holdpoint, until

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def sign(secret: str, msg_id: str, ts: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def test_a_good_signature_verifies_and_anything_else_does_not() -> None:
    body = b'{"id":"evt-1","type":"dev.holdpoint.webhook-test"}'
    now = int(time.time())
    headers = {"Webhook-Id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": sign(SECRET, "msg_1", now, body)}
    assert verify_webhook(body, headers, SECRET)["id"] == "evt-1"
    # During a rotation the header holds several signatures; either secret verifies.
    other = "whsec_" + base64.b64encode(b"o" * 32).decode()
    both = {**headers, "webhook-signature": f"{sign(other, 'msg_1', now, body)} {headers['webhook-signature']}"}
    assert verify_webhook(body, both, [other])["id"] == "evt-1"
    assert verify_webhook(body, both, SECRET)["id"] == "evt-1"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body + b" ", headers, SECRET)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, headers, other)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, headers, SECRET, now=now + 301)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, {k: v for k, v in headers.items() if k != "webhook-timestamp"}, SECRET)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, {**headers, "webhook-signature": "v2," + headers["webhook-signature"][3:]}, SECRET)


class Sink:
    """A loopback HTTP endpoint that keeps every request (headers, body) and answers 204."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                n = int(self.headers.get("content-length", "0"))
                sink.requests.append(({k.lower(): v for k, v in self.headers.items()}, self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


async def test_the_notifiers_deliveries_verify(up: Holdpoint) -> None:
    sink = Sink()
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    rt = await Runtime.connect(up.nats_url, "acme")
    try:
        hook = await rest.create_webhook(sink.url, event_types=["approval-requested"], description="python sdk test")
        secret = hook["secret"]
        assert secret.startswith("whsec_")
        assert any(w["id"] == hook["id"] for w in (await rest.webhooks())["items"])
        session = f"sess-{uuid.uuid4().hex[:8]}"
        await rt.open_session(session)
        effect = f"eff-{uuid.uuid4().hex[:12]}"
        at = Placement(session, "main", f"task-{uuid.uuid4().hex[:8]}", "ctx")
        await rt.hold_for_approval(at, effect_id=effect, call_id="call-1", server="s", tool="t", arguments={"ü": 1})

        def delivered() -> Any:
            return [r for r in sink.requests if effect.encode() in r[1]]

        headers, body = (await until("the delivery", delivered, timeout=20))[0]
        event = verify_webhook(body, headers, secret)
        assert event["type"] == "dev.holdpoint.approval-requested"
        assert event["subject"] == effect
        # The reference library agrees on the very same request.
        assert Webhook(secret).verify(body.decode(), headers)["id"] == event["id"]
        with pytest.raises(WebhookVerificationError):
            verify_webhook(body.replace(b"approval", b"approvaL"), headers, secret)
        await rest.delete_webhook(hook["id"])
    finally:
        sink.close()
        await rest.aclose()
        await rt.close()
        await asyncio.sleep(0)


async def test_the_webhook_verbs_read_test_rotate_and_list_attempts(up: Holdpoint) -> None:
    """``webhook``, ``test_webhook``, ``rotate_webhook_secret``, ``webhook_attempts``
    and ``enable_webhook`` against the real notifier: a test delivery verifies
    with the secret; after a rotation the next one is signed by the new secret
    and, during the overlap, still by the old; the attempts list both."""
    sink = Sink()
    rest = HoldpointRest(up.api, token=up.token("acme", "ana@acme.example"))
    try:
        hook = await rest.create_webhook(sink.url, event_types=["approval-requested"])
        old = hook["secret"]
        shown = await rest.webhook(hook["id"])
        assert shown["id"] == hook["id"] and shown["url"] == sink.url and "secret" not in shown, shown

        def delivered(event_id: str) -> Any:
            return [r for r in sink.requests if event_id.encode() in r[1]]

        first = await rest.test_webhook(hook["id"])
        headers, body = (await until("the test delivery", lambda: delivered(first["eventId"]), timeout=20))[0]
        assert verify_webhook(body, headers, old)["type"] == "dev.holdpoint.webhook-test"

        rotated = await rest.rotate_webhook_secret(hook["id"], {"overlapSecs": 600})
        new = rotated["secret"]
        assert new.startswith("whsec_") and new != old, rotated
        second = await rest.test_webhook(hook["id"])
        headers, body = (await until("the delivery after the rotation", lambda: delivered(second["eventId"]), timeout=20))[0]
        assert verify_webhook(body, headers, new)["id"] == second["eventId"]
        assert verify_webhook(body, headers, old)["id"] == second["eventId"], "the old secret signs during the overlap"
        assert len(headers["webhook-signature"].split()) == 2

        async def attempts() -> Any:
            items = (await rest.webhook_attempts(hook["id"]))["items"]
            return items if sum(1 for a in items if a["result"] == "delivered") >= 2 else None

        items = await until("two delivered attempts", attempts, timeout=20)
        assert all(a["status"] == 204 for a in items if a["result"] == "delivered"), items
        await rest.enable_webhook(hook["id"])  # already enabled: stays so
        assert (await rest.webhook(hook["id"]))["disabled"] is False
        await rest.delete_webhook(hook["id"])
        with pytest.raises(holdpoint.HoldpointError):
            await rest.webhook(hook["id"])
    finally:
        sink.close()
        await rest.aclose()
