"""Holdpoint for the OpenAI Agents SDK (``openai-agents``): tools that need
approval are held in Holdpoint, a person decides (REST, A2A, the inbox), and the
run resumes with the decision.

The Agents SDK stops a run with ``result.interruptions`` (``ToolApprovalItem``\\ s)
when a tool has ``needs_approval``. :meth:`AgentsApprovals.decide` holds each one
in Holdpoint, waits for the person, and approves or rejects it on the run's
``RunState``; a denial reaches the model as the tool's output
``tool.denied: <reason>``. :meth:`AgentsApprovals.guard` wraps a
``FunctionTool`` so the result of a released call is reported to Holdpoint (its
one ``tool-call-finished``) and a call whose result Holdpoint already holds is
not run again: a runner restarted between approval and execution, or after the
execution but before it saved its state, resumes from its saved ``RunState``
and the call runs once.

.. code-block:: python

    approvals = AgentsApprovals(rt, at)
    agent = Agent(name="coder", tools=[approvals.guard(create_pull_request)], model=...)
    result = await Runner.run(agent, "Fix the build")
    while result.interruptions:
        state = await approvals.decide(result.to_state())
        result = await Runner.run(agent, state)

Effect ids are derived from the session and the Agents SDK's ``call_id``, so
holding the same interruption again (a retry, a restarted runner) is the same
interaction, decided once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

from .. import _wire
from ..errors import InvalidId
from .._errors_generated import NotFoundError
from ..runtime import Decision, Placement, Runtime, _check_id, tool_error, tool_ok

__all__ = ["AgentsApprovals", "HeldCall", "denial_message"]


@dataclass(frozen=True)
class HeldCall:
    """One interruption held in Holdpoint: the Agents SDK's tool name, raw
    arguments and ``call_id``, and Holdpoint's effect and call ids."""

    tool: str
    arguments: Any
    agents_call_id: str
    effect_id: str
    call_id: str


def denial_message(decision: Decision) -> str:
    """What the model reads for a call that was not approved:
    ``tool.denied: <reason>`` (or why it closed undecided)."""
    if decision.reason:
        return f"tool.denied: {decision.reason}"
    if decision.closed:
        return f"tool.denied: the approval was {decision.closed} without a decision"
    return "tool.denied"


def _arguments(raw: str | None) -> Any:
    if raw is None or raw == "":
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"raw": raw}


class AgentsApprovals:
    """Holds the Agents SDK's tool approvals in Holdpoint for runtime ``rt`` at
    ``at`` (session, lane, task, context), and resumes runs with the person's
    decisions.

    ``server`` is the name a held call shows (default ``openai-agents``);
    ``reason(tool, arguments)`` says why it is held; ``timeout`` bounds each wait
    for a decision in seconds (default: for ever).
    """

    def __init__(
        self,
        rt: Runtime,
        at: Placement,
        *,
        server: str = "openai-agents",
        reason: Callable[[str, Any], str | None] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.rt = rt
        self.at = at
        self.server = server
        self.reason = reason
        self.timeout = timeout

    def ids_of(self, agents_call_id: str) -> tuple[str, str]:
        """The effect id and call id Holdpoint knows the Agents SDK call by
        (stable for this session)."""
        d = _wire.digest(self.at.session, agents_call_id)[:40]
        try:
            call_id = _check_id("callId", agents_call_id)
        except InvalidId:
            call_id = f"call_{d}"
        return f"oai_{d}", call_id

    async def hold(self, items: list[ToolApprovalItem]) -> list[HeldCall]:
        """Holds each approval item in Holdpoint (a replay when already held).

        Raises the catalog's exceptions for a refusal, or
        :class:`~holdpoint.OutcomeTimeout` (retrying is safe)."""
        held = []
        for item in items:
            agents_call_id = item.call_id
            if not agents_call_id:
                raise InvalidId(f"approval item for {item.tool_name!r} has no call_id")
            effect_id, call_id = self.ids_of(agents_call_id)
            tool = item.tool_name or item.name or "tool"
            arguments = _arguments(item.arguments)
            why = self.reason(tool, arguments) if self.reason else None
            await self.rt.hold_for_approval(
                self.at, effect_id=effect_id, call_id=call_id, server=self.server,
                tool=tool, arguments=arguments, reason=why,
            )
            held.append(HeldCall(tool, arguments, agents_call_id, effect_id, call_id))
        return held

    async def decide(self, state: RunState[Any, Any]) -> RunState[Any, Any]:
        """Holds every interruption of ``state``, waits for each decision, and
        approves or rejects it on ``state`` (a rejection with
        :func:`denial_message`). Returns ``state``, ready for ``Runner.run``.

        Raises :class:`~holdpoint.OutcomeTimeout` when a decision does not come
        within ``timeout``."""
        items = state.get_interruptions()
        held = await self.hold(items)
        for item, h in zip(items, held):
            decision = await self.rt.wait_for_decision(self.at.task_id, h.effect_id, timeout=self.timeout)
            if decision.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=denial_message(decision))
        return state

    def guard(self, tool: FunctionTool) -> FunctionTool:
        """``tool`` whose invocation reports its result to Holdpoint, and which
        does not run a call whose result Holdpoint already holds (it returns that
        result's output instead). A call that was never held (a ``needs_approval``
        function that said no) runs as usual. An exception becomes the result
        ``tool.failed`` and is raised on."""
        invoke = tool.on_invoke_tool

        async def guarded(ctx: ToolContext[Any], input_json: str) -> Any:
            effect_id, _ = self.ids_of(ctx.tool_call_id)
            record = await self.rt.record(effect_id)
            if record is None:
                return await invoke(ctx, input_json)
            result = record.get("result")
            if isinstance(result, dict):
                # Ran before (a runner restarted after executing): not again.
                if result.get("status") == "ok":
                    return result.get("output")
                return f"{result.get('code', 'tool.failed')}: {result.get('message', '')}"
            try:
                output = await invoke(ctx, input_json)
            except Exception as e:
                await self._report(effect_id, tool_error("tool.failed", str(e)))
                raise
            await self._report(effect_id, tool_ok(_jsonable(output)))
            return output

        return dataclasses.replace(tool, on_invoke_tool=guarded)

    async def _report(self, effect_id: str, result: dict[str, Any]) -> None:
        try:
            await self.rt.report_tool_result(effect_id, result)
        except NotFoundError:
            pass


def _jsonable(value: Any) -> Any:
    """``value`` as JSON (a tool may return any object: its ``str`` then)."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError):
        return str(value)


