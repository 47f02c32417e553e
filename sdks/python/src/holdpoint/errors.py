"""Holdpoint's errors as exceptions.

Every refusal, whether a REST error body ``{code, title, message}`` or a worker's
rejection of a runtime command, becomes an instance of the class generated for its
``NRY-xxxx`` code (``holdpoint._errors_generated``, from ``schemas/errors.json``):
e.g. :class:`~holdpoint.NoLongerWaitingError` for ``NRY-0009``. Each class has
``code``, ``title``, ``retryable`` (the same request with the same idempotency key
may succeed later) and ``status`` (the HTTP status of the code). The README's
"Errors" section explains each code.

Besides the catalog: :class:`OutcomeTimeout` (no outcome in time; retrying the same
call is safe), :class:`ConnectionsDisabled`, :class:`ManifestError` and
:class:`InvalidId`.
"""

from __future__ import annotations

from typing import Any, ClassVar


class HoldpointError(Exception):
    """A refusal from Holdpoint: a stable ``code``, its ``title``, a ``message``
    for a person and whether retrying may succeed (``retryable``).

    ``status`` is the HTTP status (the catalog's for a runtime rejection);
    ``retry_after`` the server's ``Retry-After`` in seconds, when it sent one.
    """

    code: ClassVar[str] = ""
    title: ClassVar[str] = ""
    retryable: ClassVar[bool] = False
    status: int | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.retry_after = retry_after
        self.body = body

    def __str__(self) -> str:
        return f"{self.code} {self.title}: {self.message}" if self.code else self.message


class UnknownCodeError(HoldpointError):
    """A code this SDK's catalog does not know (a newer server): ``code`` and
    ``title`` are the server's."""

    def __init__(self, code: str, title: str, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.code = code  # type: ignore[misc]
        self.title = title  # type: ignore[misc]


class OutcomeTimeout(HoldpointError):
    """No outcome within the timeout (NATS or the worker did not answer in time).
    The command may still be decided: retrying the same call is safe, it carries
    the same ``Nats-Msg-Id`` and is decided at most once."""

    retryable = True


class ConnectionsDisabled(HoldpointError):
    """``request_connection`` is off for this agent: its ``AGENT.md`` must say
    ``loop: {connections: true}``. Nothing was sent."""


class ManifestError(HoldpointError):
    """An ``AGENT.md`` front matter that is not closed, not YAML, or not of the
    shape Holdpoint reads (e.g. ``connections: "yes"``)."""


class InvalidId(HoldpointError, ValueError):
    """An id that does not validate (1 to 128 printable ASCII characters, no
    spaces). Nothing was sent."""


def error_for(
    code: str,
    message: str,
    *,
    title: str | None = None,
    status: int | None = None,
    retry_after: float | None = None,
    body: Any = None,
) -> HoldpointError:
    """The exception for ``code`` (its catalog class, else :class:`UnknownCodeError`)."""
    from ._errors_generated import ERRORS_BY_CODE

    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return UnknownCodeError(
            code, title or "", message, status=status, retry_after=retry_after, body=body
        )
    return cls(message, status=status, retry_after=retry_after, body=body)
