"""The people side over REST (``schemas/openapi.json``), on ``httpx``.

Answers (:meth:`HoldpointRest.approve`, :meth:`~HoldpointRest.respond`,
:meth:`~HoldpointRest.answer_question`) carry an ``Idempotency-Key``; while nobody
can say whether an answer was recorded (a ``502``, ``503`` or ``504``, a refusal
the catalog marks retryable, or a failed connection) the same request is sent
again with the same key, for at most ``retry_for`` seconds, as the TypeScript SDK
does (``sdks/typescript/src/http.ts``). The answer is then recorded once.

.. code-block:: python

    async with HoldpointRest("http://127.0.0.1:8080", token=token) as rest:
        for item in (await rest.list())["items"]:
            view = await rest.get(item["interactionId"])
            progress = await rest.approve(
                view["interactionId"], approved=True,
                arguments_digest=view["call"]["argumentsDigest"],
            )
            # None: decided. An ApprovalProgress: counted toward a hold that
            # needs several people (progress.given of progress.required).
"""

from __future__ import annotations

import builtins
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from .errors import HoldpointError, UnknownCodeError, error_for

__all__ = [
    "ApprovalProgress",
    "DEFAULT_RETRY_FOR",
    "RETRY_BACKOFF",
    "RETRY_STATUSES",
    "HoldpointRest",
    "new_idempotency_key",
]

DEFAULT_RETRY_FOR = 60.0
"""How long an answer is retried by default, seconds."""

RETRY_BACKOFF: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 5.0)
"""Pauses between retries when the server names no ``Retry-After``, seconds (the
last repeats)."""

RETRY_STATUSES = frozenset({502, 503, 504})
"""Statuses after which an answer is sent again: no outcome in time, or a
gateway's timeout."""

TokenSource = str | Callable[[], str | None | Awaitable[str | None]] | None
ListState = Literal["pending", "resolved", "closed", "all"]


@dataclass(frozen=True)
class ApprovalProgress:
    """How far an approval that needs several distinct people has come (README
    "Two-person approvals"): what :meth:`HoldpointRest.approve` (and
    :meth:`~HoldpointRest.respond` with a boolean) return when the caller's
    approval was counted and the held call still waits for other people's (the
    server's ``202`` body ``{"interactionId", "approvals": {"given",
    "required"}}``). ``given``: distinct approvals counted so far, the caller's
    included (1 to 4); ``required``: how many the hold needs (2 to 5). The last
    approval needed releases the call and returns ``None`` instead, as any
    decided answer does."""

    given: int
    required: int

    @classmethod
    def from_json(cls, value: Any) -> ApprovalProgress | None:
        """The progress in ``value`` (``{"given", "required"}``, as a ``202`` body's
        or a batch result's ``approvals``), ``None`` when it holds none."""
        if isinstance(value, Mapping) and isinstance(value.get("approvals"), Mapping):
            value = value["approvals"]
        if not isinstance(value, Mapping):
            return None
        given, required = value.get("given"), value.get("required")
        if isinstance(given, int) and isinstance(required, int):
            return cls(given, required)
        return None


def new_idempotency_key() -> str:
    """A fresh idempotency key, ``sdk-<uuid>``."""
    return f"sdk-{uuid.uuid4()}"


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _error(response: httpx.Response) -> HoldpointError:
    """The exception for a refusal: the catalog's class for the body's ``code``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("code"), str):
        return error_for(
            body["code"],
            str(body.get("message", "")),
            title=str(body.get("title", "")),
            status=response.status_code,
            retry_after=_retry_after(response),
            body=body,
        )
    return UnknownCodeError(
        "",
        "",
        f"HTTP {response.status_code}: {response.text[:200]}",
        status=response.status_code,
        retry_after=_retry_after(response),
        body=body,
    )


class HoldpointRest:
    """Holdpoint's REST API for a person (or a tool acting for one).

    ``base_url`` is the ingress's API listener (``http://127.0.0.1:8080``);
    ``token`` the person's JWT, or a function (sync or async) asked before every
    request; ``None`` sends no ``Authorization`` (a proxy adds one). ``client``: an
    ``httpx.AsyncClient`` of your own (its base URL is ignored). ``retry_for``: the
    default answer retry budget, seconds (``0`` sends once).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenSource = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        retry_for: float = DEFAULT_RETRY_FOR,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._owns = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self.retry_for = retry_for

    async def __aenter__(self) -> HoldpointRest:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the HTTP client when this object made it."""
        if self._owns:
            await self._client.aclose()

    async def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        token = self._token
        if callable(token):
            value = token()
            token = await value if isinstance(value, Awaitable) else value
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        response = await self._client.request(
            method,
            f"{self.base_url}{path}",
            params=query,
            json=json,
            headers=await self._headers(headers),
        )
        if response.status_code >= 400:
            raise _error(response)
        return response

    async def _answer(
        self,
        path: str,
        body: Mapping[str, Any],
        idempotency_key: str | None,
        retry_for: float | None,
    ) -> httpx.Response:
        key = idempotency_key or new_idempotency_key()
        budget = self.retry_for if retry_for is None else retry_for
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._request("POST", path, json=body, headers={"Idempotency-Key": key})
            except HoldpointError as e:
                transient = (e.status in RETRY_STATUSES) or e.retryable
                if not transient:
                    raise
                delay = (
                    max(1.0, e.retry_after)
                    if e.retry_after is not None
                    else RETRY_BACKOFF[min(attempt - 1, len(RETRY_BACKOFF) - 1)]
                )
                if time.monotonic() - started + delay > budget:
                    raise
            except httpx.TransportError:
                delay = RETRY_BACKOFF[min(attempt - 1, len(RETRY_BACKOFF) - 1)]
                if time.monotonic() - started + delay > budget:
                    raise
            await asyncio.sleep(delay)

    # -- interactions -------------------------------------------------------------

    async def list(
        self,
        *,
        state: ListState | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        sort: str | None = None,
    ) -> dict[str, Any]:
        """One page ``{items, nextCursor}`` of the organisation's interactions
        (``GET /v1/interactions``; default ``state=pending``, ``limit`` 1 to 500,
        default 50). A page may be short, even empty, and still have a
        ``nextCursor``: follow it, or use :meth:`pending`."""
        r = await self._request(
            "GET",
            "/v1/interactions",
            params={"state": state, "limit": limit, "cursor": cursor, "sort": sort},
        )
        return dict(r.json())

    async def pending(
        self, *, state: ListState | None = None, limit: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Every interaction in ``state`` (default pending), page after page."""
        cursor: str | None = None
        while True:
            page = await self.list(state=state, limit=limit, cursor=cursor)
            for item in page.get("items", []):
                yield item
            cursor = page.get("nextCursor")
            if not cursor:
                return

    async def get(self, interaction_id: str) -> dict[str, Any]:
        """One interaction's view (``GET /v1/interactions/{id}``), with the held
        call's ``call.arguments`` and ``call.argumentsDigest`` for an approval.
        :class:`~holdpoint.NotFoundError` when it does not exist or is another
        organisation's."""
        r = await self._request("GET", f"/v1/interactions/{_path(interaction_id)}")
        return dict(r.json())

    async def approve(
        self,
        interaction_id: str,
        *,
        approved: bool,
        reason: str | None = None,
        arguments_digest: str | None = None,
        remember: Mapping[str, Any] | None = None,
        edited_arguments: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        retry_for: float | None = None,
    ) -> ApprovalProgress | None:
        """Decides an approval (``POST /v1/interactions/{id}/approve``): ``True``
        releases the held call exactly as shown, ``False`` fails it as
        ``tool.denied``. ``arguments_digest``: the ``call.argumentsDigest`` the
        person saw; when the held arguments are not those the answer is refused
        with :class:`~holdpoint.ArgumentsChangedError` (``NRY-0010``) and nothing
        is released. ``remember``: write a rule from this decision (``{"scope":
        "session"|"agent"|"organisation", "expiresIn": seconds}``).
        ``edited_arguments``: edit, then approve: the arguments (a JSON object) to
        release instead of the held ones, with ``approved=True`` and the
        ``arguments_digest`` shown; refused with :class:`~holdpoint.CallNotEditableError`
        (``NRY-0028``) on a hold that is not ``call.editable``, and
        :class:`~holdpoint.EditNotValidError` (``NRY-0029``) or
        :class:`~holdpoint.EditNotRememberableError` (``NRY-0033``); nothing is
        decided then.

        Returns ``None`` when the approval is decided (``204``). A hold that needs
        approvals from several distinct people (the runtime's ``approvals``; the
        view's ``approvals: {required, given: [{by, at}], byYou}``) counts each
        approval but the last: that returns an :class:`ApprovalProgress`
        (``given`` of ``required``; the server's ``202``) and the call still
        waits; the last one needed releases it and returns ``None``. The same
        person approving again (with another key) raises
        :class:`~holdpoint.AlreadyApprovedByYouError` (``NRY-0038``) and changes
        nothing; one denial (``approved=False``) decides at once; ``remember``
        on such a hold raises :class:`~holdpoint.NothingToRememberError`
        (``NRY-0025``).

        Raises :class:`~holdpoint.NoLongerWaitingError` when already answered with
        another key or closed; :class:`~holdpoint.NotAnAssigneeError`
        (``NRY-0037``) when the interaction names its assignees and the caller is
        not one; :class:`~holdpoint.TemporarilyUnavailableError` when no outcome
        came in time even after retrying (retry with the same
        ``idempotency_key``)."""
        body: dict[str, Any] = {"approved": approved}
        if reason is not None:
            body["reason"] = reason
        if arguments_digest is not None:
            body["argumentsDigest"] = arguments_digest
        if remember is not None:
            body["remember"] = dict(remember)
        if edited_arguments is not None:
            body["editedArguments"] = dict(edited_arguments)
        response = await self._answer(
            f"/v1/interactions/{_path(interaction_id)}/approve", body, idempotency_key, retry_for
        )
        return _progress(response)

    async def respond(
        self,
        interaction_id: str,
        value: Any,
        *,
        reason: str | None = None,
        remember: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        retry_for: float | None = None,
    ) -> ApprovalProgress | None:
        """Answers with any JSON ``value`` (``POST /v1/interactions/{id}/respond``):
        for a connection ``{"connected": true}`` (or ``True``) connects; for a
        question ``{"answers": [...]}`` is checked like :meth:`answer_question`;
        for an approval a boolean decides it as :meth:`approve` does.
        ``remember`` as on :meth:`approve` (approvals only: a question or a
        connection refuses it with :class:`~holdpoint.NothingToRememberError`).

        Returns ``None`` when answered (``204``), or, for a boolean ``True`` on an
        approval that needs several people, the :class:`ApprovalProgress` of an
        approval counted while the call waits (``202``), as :meth:`approve`;
        approving twice raises :class:`~holdpoint.AlreadyApprovedByYouError`
        (``NRY-0038``)."""
        body: dict[str, Any] = {"value": value}
        if reason is not None:
            body["reason"] = reason
        if remember is not None:
            body["remember"] = dict(remember)
        response = await self._answer(
            f"/v1/interactions/{_path(interaction_id)}/respond", body, idempotency_key, retry_for
        )
        return _progress(response)

    async def answer_question(
        self,
        question_id: str,
        answers: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        retry_for: float | None = None,
    ) -> None:
        """Answers an ``ask_user`` call (``POST /v1/questions/{id}/answer``): one
        entry per question, in the order asked (``{"options": [0], "text": …}``).
        :class:`~holdpoint.AnswerDoesNotFitError` when they do not fit."""
        await self._answer(
            f"/v1/questions/{_path(question_id)}/answer",
            {"answers": [dict(a) for a in answers]},
            idempotency_key,
            retry_for,
        )

    async def answer_many(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        retry_for: float | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Answers up to 100 interactions at once (``POST /v1/answers``). Each item
        is ``{"interactionId", "operation": "approve"|"respond"|"answer", "body",
        "idempotencyKey"}``, ``body`` as that single operation takes it; a missing
        ``idempotencyKey`` gets a fresh one. Each item is decided on its own (not
        one transaction): the result is one ``{"interactionId", "status", "code",
        "title", "message", "approvals"}`` per item, in order (``status`` 204 when
        answered; ``202`` when an approval was counted toward a hold that needs
        several people and the call still waits, with ``approvals: {"given",
        "required"}``, read by :meth:`ApprovalProgress.from_json`; else the
        refusal the single operation would have raised, e.g. ``409``
        ``NRY-0038`` for a second approval by the same person). Items answered
        ``503`` are sent again with their keys for at most ``retry_for`` seconds;
        the same keys never decide twice. A body that is not a batch raises
        :class:`~holdpoint.BatchNotValidError` (``NRY-0034``)."""
        sent = [dict(i) for i in items]
        for item in sent:
            item.setdefault("idempotencyKey", new_idempotency_key())
        results: list[dict[str, Any]] = [{} for _ in sent]
        waiting = list(range(len(sent)))
        budget = self.retry_for if retry_for is None else retry_for
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            batch = {"items": [sent[i] for i in waiting]}
            r = await self._request("POST", "/v1/answers", json=batch)
            got = r.json().get("results", [])
            if len(got) != len(waiting):
                raise UnknownCodeError(
                    "", "", f"{len(got)} results for {len(waiting)} items", status=r.status_code
                )
            for i, result in zip(waiting, got, strict=True):
                results[i] = dict(result)
            waiting = [i for i in waiting if results[i].get("status") in RETRY_STATUSES]
            delay = RETRY_BACKOFF[min(attempt - 1, len(RETRY_BACKOFF) - 1)]
            if not waiting or time.monotonic() - started + delay > budget:
                return results
            await asyncio.sleep(delay)

    # -- rules, audit -------------------------------------------------------------

    async def rules(
        self,
        *,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of the organisation's remembered rules (``GET /v1/rules``): the
        live ones, or with ``state="all"`` the revoked and expired ones too."""
        r = await self._request(
            "GET", "/v1/rules", params={"state": state, "limit": limit, "cursor": cursor}
        )
        return dict(r.json())

    async def rule(self, rule_id: str) -> dict[str, Any]:
        """One remembered rule (``GET /v1/rules/{id}``); ``NRY-0027`` when unknown."""
        r = await self._request("GET", f"/v1/rules/{_path(rule_id)}")
        return dict(r.json())

    async def revoke_rule(self, rule_id: str) -> dict[str, Any]:
        """Revokes a remembered rule (``DELETE /v1/rules/{id}``)."""
        r = await self._request("DELETE", f"/v1/rules/{_path(rule_id)}")
        return dict(r.json()) if r.content else {}

    async def audit(self, *, after: int | None = None, limit: int | None = None) -> dict[str, Any]:
        """One page of the organisation's audit records (``GET /v1/audit``), after
        the audit stream sequence ``after``."""
        r = await self._request("GET", "/v1/audit", params={"after": after, "limit": limit})
        return dict(r.json())

    # -- webhooks -----------------------------------------------------------------

    async def create_webhook(
        self,
        url: str,
        *,
        event_types: Sequence[str] | None = None,
        description: str | None = None,
    ) -> dict[str, Any]:
        """Registers a webhook endpoint (``POST /v1/webhooks``); the answer holds
        its ``secret`` (``whsec_…``) once: keep it for :func:`holdpoint.verify_webhook`."""
        body: dict[str, Any] = {"url": url}
        if event_types is not None:
            body["eventTypes"] = list(event_types)
        if description is not None:
            body["description"] = description
        r = await self._request("POST", "/v1/webhooks", json=body)
        return dict(r.json())

    async def webhooks(self) -> dict[str, Any]:
        """The organisation's webhook endpoints (``GET /v1/webhooks``)."""
        return dict((await self._request("GET", "/v1/webhooks")).json())

    async def webhook(self, webhook_id: str) -> dict[str, Any]:
        """One webhook endpoint (``GET /v1/webhooks/{id}``)."""
        return dict((await self._request("GET", f"/v1/webhooks/{_path(webhook_id)}")).json())

    async def delete_webhook(self, webhook_id: str) -> None:
        """Deletes a webhook endpoint (``DELETE /v1/webhooks/{id}``)."""
        await self._request("DELETE", f"/v1/webhooks/{_path(webhook_id)}")

    async def rotate_webhook_secret(
        self, webhook_id: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """A new secret (``POST /v1/webhooks/{id}/rotate``); the old one keeps
        signing for the overlap the server says."""
        r = await self._request(
            "POST", f"/v1/webhooks/{_path(webhook_id)}/rotate", json=dict(body or {})
        )
        return dict(r.json())

    async def enable_webhook(self, webhook_id: str) -> dict[str, Any]:
        """Enables a disabled endpoint again (``POST /v1/webhooks/{id}/enable``)."""
        r = await self._request("POST", f"/v1/webhooks/{_path(webhook_id)}/enable")
        return dict(r.json()) if r.content else {}

    async def test_webhook(self, webhook_id: str) -> dict[str, Any]:
        """Queues a test delivery (``POST /v1/webhooks/{id}/test``)."""
        r = await self._request("POST", f"/v1/webhooks/{_path(webhook_id)}/test")
        return dict(r.json()) if r.content else {}

    async def webhook_attempts(self, webhook_id: str) -> dict[str, Any]:
        """The endpoint's recent delivery attempts (``GET /v1/webhooks/{id}/attempts``)."""
        r = await self._request("GET", f"/v1/webhooks/{_path(webhook_id)}/attempts")
        return dict(r.json())


def _progress(response: httpx.Response) -> ApprovalProgress | None:
    """The progress of a ``202`` answer (an approval counted, the call waiting);
    ``None`` for a ``204`` (decided)."""
    if response.status_code != 202:
        return None
    try:
        body = response.json()
    except ValueError:
        body = None
    progress = ApprovalProgress.from_json(body)
    if progress is None:
        raise UnknownCodeError(
            "", "", f"HTTP 202 without approvals: {response.text[:200]}",
            status=response.status_code, body=body,
        )
    return progress


def _path(segment: str) -> str:
    """One path segment, percent-encoded."""
    from urllib.parse import quote

    return quote(segment, safe="")
