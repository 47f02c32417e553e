"""Holdpoint for Python: the runtime side over NATS and the people side over REST.

- :class:`Runtime` (NATS JetStream, ``nats-py``): open and close sessions,
  :meth:`~Runtime.hold_for_approval`, :meth:`~Runtime.ask_user`,
  :meth:`~Runtime.request_connection`, close an interaction, set a deadline,
  report a tool result, turns, and :meth:`~Runtime.follow` the events. The same
  wire as the Rust ``holdpoint-client``: subjects, headers and command ids are
  pinned by ``schemas/command-vectors.json``.
- :class:`HoldpointRest` (``httpx``): list, get, approve (binding the
  ``argumentsDigest``; an :class:`ApprovalProgress` when an approval was
  counted toward a hold that needs several people), respond, answer, rules,
  audit, webhooks; answers are retried with the same idempotency key while their
  fate is unknown.
- :func:`verify_webhook`: a delivery's Standard Webhooks signature.
- Errors: one exception class per ``NRY-xxxx`` code of ``schemas/errors.json``
  (generated), all :class:`HoldpointError`.
"""

from __future__ import annotations

from ._errors_generated import *  # noqa: F403 - the catalog's classes
from ._errors_generated import ERRORS_BY_CODE
from ._errors_generated import __all__ as _catalog
from ._wire import arguments_digest, canonical_json, command_id, command_subject
from .errors import (
    ConnectionsDisabled,
    HoldpointError,
    InvalidId,
    ManifestError,
    OutcomeTimeout,
    UnknownCodeError,
    error_for,
)
from .manifest import AgentManifest
from .rest import ApprovalProgress, HoldpointRest, new_idempotency_key
from .runtime import Assignees, Decision, Expiry, Followed, Placement, Question, Runtime, decision_of, tool_error, tool_ok
from .webhooks import WebhookVerificationError, verify_webhook

__version__ = "0.1.0"
"""The package's version: the Cargo workspace's (a test compares them)."""

__all__ = [
    "ERRORS_BY_CODE",
    "AgentManifest",
    "ApprovalProgress",
    "ConnectionsDisabled",
    "Decision",
    "Assignees",
    "Expiry",
    "Followed",
    "HoldpointError",
    "HoldpointRest",
    "InvalidId",
    "ManifestError",
    "OutcomeTimeout",
    "Placement",
    "Question",
    "Runtime",
    "UnknownCodeError",
    "WebhookVerificationError",
    "__version__",
    "arguments_digest",
    "canonical_json",
    "command_id",
    "command_subject",
    "error_for",
    "new_idempotency_key",
    "tool_error",
    "tool_ok",
    "verify_webhook",
    *_catalog,
]
