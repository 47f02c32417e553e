"""Holdpoint's error catalog as exception classes.

Generated from schemas/errors.json by scripts/generate_errors.py; do not edit.
"""

from __future__ import annotations

from .errors import HoldpointError

__all__ = [
    "AlreadyApprovedByYouError",
    "AnswerDoesNotFitError",
    "AnswerNotDeliveredError",
    "ArgumentsChangedError",
    "BatchNotValidError",
    "CallNotEditableError",
    "CommandConflictsWithRecordError",
    "DeadlineNotValidError",
    "DeadlinesNotAvailableError",
    "EditNotRememberableError",
    "EditNotValidError",
    "FormSchemaNotSupportedError",
    "HeadersTooLargeError",
    "InteractionNotNamedError",
    "InternalError",
    "InvalidRequestError",
    "LaneBusyMessageQueuedError",
    "LaneRefusedTheMessageError",
    "MethodNotAllowedError",
    "NoLongerWaitingError",
    "NotAnAssigneeError",
    "NotFoundError",
    "NothingToRememberError",
    "PayloadTooLargeError",
    "RuleNotFoundError",
    "RuleScopeUnavailableError",
    "SessionNotFoundError",
    "TemporarilyUnavailableError",
    "TooManyStreamsError",
    "TooManyWebhooksError",
    "UnauthenticatedError",
    "UnknownEventTypeError",
    "UnsupportedMediaTypeError",
    "UnsupportedOperationError",
    "UriTooLongError",
    "ValueDoesNotFitTheFormError",
    "WebhookDisabledError",
    "WebhookUrlRefusedError",
    "ERRORS_BY_CODE",
]


class InvalidRequestError(HoldpointError):
    """``NRY-0001`` Invalid request (HTTP 400; retryable: false)."""

    code = "NRY-0001"
    title = "Invalid request"
    retryable = False
    status = 400


class SessionNotFoundError(HoldpointError):
    """``NRY-0002`` Session not found (HTTP 400; retryable: false)."""

    code = "NRY-0002"
    title = "Session not found"
    retryable = False
    status = 400


class AnswerDoesNotFitError(HoldpointError):
    """``NRY-0003`` Answer does not fit (HTTP 400; retryable: false)."""

    code = "NRY-0003"
    title = "Answer does not fit"
    retryable = False
    status = 400


class NotFoundError(HoldpointError):
    """``NRY-0004`` Not found (HTTP 404; retryable: false)."""

    code = "NRY-0004"
    title = "Not found"
    retryable = False
    status = 404


class MethodNotAllowedError(HoldpointError):
    """``NRY-0005`` Method not allowed (HTTP 405; retryable: false)."""

    code = "NRY-0005"
    title = "Method not allowed"
    retryable = False
    status = 405


class NoLongerWaitingError(HoldpointError):
    """``NRY-0009`` No longer waiting (HTTP 409; retryable: false)."""

    code = "NRY-0009"
    title = "No longer waiting"
    retryable = False
    status = 409


class ArgumentsChangedError(HoldpointError):
    """``NRY-0010`` Arguments changed (HTTP 409; retryable: false)."""

    code = "NRY-0010"
    title = "Arguments changed"
    retryable = False
    status = 409


class UnauthenticatedError(HoldpointError):
    """``NRY-0011`` Unauthenticated (HTTP 401; retryable: false)."""

    code = "NRY-0011"
    title = "Unauthenticated"
    retryable = False
    status = 401


class PayloadTooLargeError(HoldpointError):
    """``NRY-0013`` Payload too large (HTTP 413; retryable: false)."""

    code = "NRY-0013"
    title = "Payload too large"
    retryable = False
    status = 413


class UnsupportedMediaTypeError(HoldpointError):
    """``NRY-0014`` Unsupported media type (HTTP 415; retryable: false)."""

    code = "NRY-0014"
    title = "Unsupported media type"
    retryable = False
    status = 415


class HeadersTooLargeError(HoldpointError):
    """``NRY-0015`` Headers too large (HTTP 431; retryable: false)."""

    code = "NRY-0015"
    title = "Headers too large"
    retryable = False
    status = 431


class UriTooLongError(HoldpointError):
    """``NRY-0016`` URI too long (HTTP 414; retryable: false)."""

    code = "NRY-0016"
    title = "URI too long"
    retryable = False
    status = 414


class TooManyStreamsError(HoldpointError):
    """``NRY-0017`` Too many streams (HTTP 429; retryable: true)."""

    code = "NRY-0017"
    title = "Too many streams"
    retryable = True
    status = 429


class UnsupportedOperationError(HoldpointError):
    """``NRY-0020`` Unsupported operation (HTTP 400; retryable: false)."""

    code = "NRY-0020"
    title = "Unsupported operation"
    retryable = False
    status = 400


class CommandConflictsWithRecordError(HoldpointError):
    """``NRY-0021`` Command conflicts with record (HTTP 409; retryable: false)."""

    code = "NRY-0021"
    title = "Command conflicts with record"
    retryable = False
    status = 409


class DeadlinesNotAvailableError(HoldpointError):
    """``NRY-0022`` Deadlines not available (HTTP 400; retryable: false)."""

    code = "NRY-0022"
    title = "Deadlines not available"
    retryable = False
    status = 400


class DeadlineNotValidError(HoldpointError):
    """``NRY-0023`` Deadline not valid (HTTP 400; retryable: false)."""

    code = "NRY-0023"
    title = "Deadline not valid"
    retryable = False
    status = 400


class InteractionNotNamedError(HoldpointError):
    """``NRY-0024`` Interaction not named (HTTP 400; retryable: false)."""

    code = "NRY-0024"
    title = "Interaction not named"
    retryable = False
    status = 400


class NothingToRememberError(HoldpointError):
    """``NRY-0025`` Nothing to remember (HTTP 400; retryable: false)."""

    code = "NRY-0025"
    title = "Nothing to remember"
    retryable = False
    status = 400


class RuleScopeUnavailableError(HoldpointError):
    """``NRY-0026`` Rule scope unavailable (HTTP 400; retryable: false)."""

    code = "NRY-0026"
    title = "Rule scope unavailable"
    retryable = False
    status = 400


class RuleNotFoundError(HoldpointError):
    """``NRY-0027`` Rule not found (HTTP 404; retryable: false)."""

    code = "NRY-0027"
    title = "Rule not found"
    retryable = False
    status = 404


class CallNotEditableError(HoldpointError):
    """``NRY-0028`` Call not editable (HTTP 409; retryable: false)."""

    code = "NRY-0028"
    title = "Call not editable"
    retryable = False
    status = 409


class EditNotValidError(HoldpointError):
    """``NRY-0029`` Edit not valid (HTTP 400; retryable: false)."""

    code = "NRY-0029"
    title = "Edit not valid"
    retryable = False
    status = 400


class LaneRefusedTheMessageError(HoldpointError):
    """``NRY-0030`` Lane refused the message (HTTP 409; retryable: false)."""

    code = "NRY-0030"
    title = "Lane refused the message"
    retryable = False
    status = 409


class LaneBusyMessageQueuedError(HoldpointError):
    """``NRY-0031`` Lane busy; message queued (HTTP 409; retryable: false)."""

    code = "NRY-0031"
    title = "Lane busy; message queued"
    retryable = False
    status = 409


class AnswerNotDeliveredError(HoldpointError):
    """``NRY-0032`` Answer not delivered (HTTP 409; retryable: false)."""

    code = "NRY-0032"
    title = "Answer not delivered"
    retryable = False
    status = 409


class EditNotRememberableError(HoldpointError):
    """``NRY-0033`` Edit not rememberable (HTTP 400; retryable: false)."""

    code = "NRY-0033"
    title = "Edit not rememberable"
    retryable = False
    status = 400


class BatchNotValidError(HoldpointError):
    """``NRY-0034`` Batch not valid (HTTP 400; retryable: false)."""

    code = "NRY-0034"
    title = "Batch not valid"
    retryable = False
    status = 400


class FormSchemaNotSupportedError(HoldpointError):
    """``NRY-0035`` Form schema not supported (HTTP 400; retryable: false)."""

    code = "NRY-0035"
    title = "Form schema not supported"
    retryable = False
    status = 400


class ValueDoesNotFitTheFormError(HoldpointError):
    """``NRY-0036`` Value does not fit the form (HTTP 400; retryable: false)."""

    code = "NRY-0036"
    title = "Value does not fit the form"
    retryable = False
    status = 400


class NotAnAssigneeError(HoldpointError):
    """``NRY-0037`` Not an assignee (HTTP 403; retryable: false)."""

    code = "NRY-0037"
    title = "Not an assignee"
    retryable = False
    status = 403


class AlreadyApprovedByYouError(HoldpointError):
    """``NRY-0038`` Already approved by you (HTTP 409; retryable: false)."""

    code = "NRY-0038"
    title = "Already approved by you"
    retryable = False
    status = 409


class WebhookUrlRefusedError(HoldpointError):
    """``NRY-0040`` Webhook URL refused (HTTP 400; retryable: false)."""

    code = "NRY-0040"
    title = "Webhook URL refused"
    retryable = False
    status = 400


class UnknownEventTypeError(HoldpointError):
    """``NRY-0041`` Unknown event type (HTTP 400; retryable: false)."""

    code = "NRY-0041"
    title = "Unknown event type"
    retryable = False
    status = 400


class TooManyWebhooksError(HoldpointError):
    """``NRY-0042`` Too many webhooks (HTTP 409; retryable: false)."""

    code = "NRY-0042"
    title = "Too many webhooks"
    retryable = False
    status = 409


class WebhookDisabledError(HoldpointError):
    """``NRY-0043`` Webhook disabled (HTTP 409; retryable: false)."""

    code = "NRY-0043"
    title = "Webhook disabled"
    retryable = False
    status = 409


class TemporarilyUnavailableError(HoldpointError):
    """``NRY-0050`` Temporarily unavailable (HTTP 503; retryable: true)."""

    code = "NRY-0050"
    title = "Temporarily unavailable"
    retryable = True
    status = 503


class InternalError(HoldpointError):
    """``NRY-0051`` Internal error (HTTP 500; retryable: true)."""

    code = "NRY-0051"
    title = "Internal error"
    retryable = True
    status = 500


ERRORS_BY_CODE: dict[str, type[HoldpointError]] = {
    "NRY-0001": InvalidRequestError,
    "NRY-0002": SessionNotFoundError,
    "NRY-0003": AnswerDoesNotFitError,
    "NRY-0004": NotFoundError,
    "NRY-0005": MethodNotAllowedError,
    "NRY-0009": NoLongerWaitingError,
    "NRY-0010": ArgumentsChangedError,
    "NRY-0011": UnauthenticatedError,
    "NRY-0013": PayloadTooLargeError,
    "NRY-0014": UnsupportedMediaTypeError,
    "NRY-0015": HeadersTooLargeError,
    "NRY-0016": UriTooLongError,
    "NRY-0017": TooManyStreamsError,
    "NRY-0020": UnsupportedOperationError,
    "NRY-0021": CommandConflictsWithRecordError,
    "NRY-0022": DeadlinesNotAvailableError,
    "NRY-0023": DeadlineNotValidError,
    "NRY-0024": InteractionNotNamedError,
    "NRY-0025": NothingToRememberError,
    "NRY-0026": RuleScopeUnavailableError,
    "NRY-0027": RuleNotFoundError,
    "NRY-0028": CallNotEditableError,
    "NRY-0029": EditNotValidError,
    "NRY-0030": LaneRefusedTheMessageError,
    "NRY-0031": LaneBusyMessageQueuedError,
    "NRY-0032": AnswerNotDeliveredError,
    "NRY-0033": EditNotRememberableError,
    "NRY-0034": BatchNotValidError,
    "NRY-0035": FormSchemaNotSupportedError,
    "NRY-0036": ValueDoesNotFitTheFormError,
    "NRY-0037": NotAnAssigneeError,
    "NRY-0038": AlreadyApprovedByYouError,
    "NRY-0040": WebhookUrlRefusedError,
    "NRY-0041": UnknownEventTypeError,
    "NRY-0042": TooManyWebhooksError,
    "NRY-0043": WebhookDisabledError,
    "NRY-0050": TemporarilyUnavailableError,
    "NRY-0051": InternalError,
}
"""Every code of the catalog and its class."""
