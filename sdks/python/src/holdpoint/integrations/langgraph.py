"""Holdpoint for LangGraph (``langgraph``): an ``interrupt(...)`` raised in a
node becomes a Holdpoint interaction, and the graph resumes from its
checkpointer with the person's answer (REST, A2A or the inbox).

:meth:`GraphInterrupts.resume` reads the interrupts the thread's checkpoint
waits on, opens one interaction for each (an approval when the interrupt's
value is ``{"kind": "approval", "tool": ..., "arguments": ...}``, the questions
of ``{"questions": [...]}``, else one free-text question with the value as its
text), waits for the answers Holdpoint decided, and resumes the graph with
``Command(resume={interrupt_id: answer})``. Holdpoint keeps one answer per
interaction, so when two answers race (two people, or REST and A2A at once)
the graph resumes once, with the answer that was kept; a resume that finds the
checkpoint no longer waiting on those interrupts (a runner restarted after the
graph moved on) does nothing, and one that finds steps left without an
interrupt (a runtime killed after the graph took the answer) continues them.
Run one resumer per thread at a time: two that
resume the same checkpoint at the same instant would both run (LangGraph has no
lock of its own).

What a node gets back from ``interrupt``: for an approval ``{"approved": bool,
"reason": ..., "arguments": ..., "effectId": ...}`` (run the released call
with :meth:`GraphInterrupts.execute`, which reports its result and does not run
a call whose result Holdpoint already holds; or report it yourself with
``rt.report_tool_result(effectId, tool_ok(...))``); for
questions ``{"answers": [{"options": [...], "text": ...}, ...]}`` or
``{"value": ...}``; when the interaction closed or expired undecided
``{"closed": reason}`` (an approval: ``approved: False`` too).

.. code-block:: python

    result = await graph.ainvoke(inputs, config)          # stops at interrupt(...)
    result = await GraphInterrupts(rt, at).resume(graph, config)   # the person answers
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.types import Command, Durability, Interrupt

from .. import _wire
from ..runtime import Followed, Placement, Question, Runtime, tool_error, tool_ok

__all__ = ["GraphInterrupts", "HeldInterrupt", "ToolFailed"]


@dataclass(frozen=True)
class HeldInterrupt:
    """One interrupt held in Holdpoint: its LangGraph id, value, and the
    interaction (``approval`` or ``question``) that asks it."""

    interrupt_id: str
    value: Any
    interaction_id: str
    kind: str


def _thread(config: Mapping[str, Any]) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise ValueError("the graph's config has no configurable.thread_id (a checkpointer needs one)")
    return str(thread)


def _questions(value: Any) -> list[Question]:
    if isinstance(value, Mapping) and isinstance(value.get("questions"), list):
        return [
            Question(str(q["text"]), list(q.get("options") or []), bool(q.get("multiple")), bool(q.get("allowText", q.get("allow_text"))))
            for q in value["questions"]
        ]
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping) and isinstance(value.get("text"), str):
        text = value["text"]
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    options = list(value.get("options") or []) if isinstance(value, Mapping) else []
    return [Question(text[:2000], options, allow_text=True)]


class GraphInterrupts:
    """Asks a graph's interrupts through Holdpoint for runtime ``rt`` at ``at``
    (session, lane, task, context) and resumes the graph with the answers.
    ``server`` names approvals' server when the interrupt does not (default
    ``langgraph``); ``timeout`` bounds each wait in seconds (default: for ever)."""

    def __init__(self, rt: Runtime, at: Placement, *, server: str = "langgraph", timeout: float | None = None) -> None:
        self.rt = rt
        self.at = at
        self.server = server
        self.timeout = timeout

    def interaction_id(self, thread_id: str, interrupt_id: str) -> str:
        """The interaction that asks ``interrupt_id`` of thread ``thread_id``
        (stable: asking again is a replay)."""
        return f"lg_{_wire.digest(self.at.session, thread_id, interrupt_id)[:40]}"

    async def hold(self, interrupts: Sequence[Interrupt], thread_id: str) -> list[HeldInterrupt]:
        """Opens (or replays) one interaction per interrupt."""
        held = []
        for i in interrupts:
            iid = self.interaction_id(thread_id, i.id)
            v = i.value
            if isinstance(v, Mapping) and v.get("kind") == "approval":
                await self.rt.hold_for_approval(
                    self.at, effect_id=iid, call_id=iid, server=str(v.get("server") or self.server),
                    tool=str(v["tool"]), arguments=v.get("arguments", {}), reason=v.get("reason"),
                )
                held.append(HeldInterrupt(i.id, v, iid, "approval"))
            else:
                await self.rt.ask_user(self.at, call_id=iid, questions=_questions(v), question_id=iid)
                held.append(HeldInterrupt(i.id, v, iid, "question"))
        return held

    async def answer(self, held: HeldInterrupt) -> dict[str, Any]:
        """Waits for the answer Holdpoint kept for ``held`` and returns what the
        node's ``interrupt`` gets back."""
        if held.kind == "approval":
            d = await self.rt.wait_for_decision(self.at.task_id, held.interaction_id, timeout=self.timeout)
            out: dict[str, Any] = {"approved": d.approved, "effectId": held.interaction_id}
            if d.approved:
                out["arguments"] = d.arguments
            if d.reason is not None:
                out["reason"] = d.reason
            if d.closed is not None:
                out["closed"] = d.closed
            return out
        events = await self.rt.follow(task=self.at.task_id, from_start=True)

        async def first() -> dict[str, Any]:
            async for f in events:
                found = _question_answer(f, held.interaction_id)
                if found is not None:
                    return found
            return {"closed": "closed"}  # pragma: no cover - follow never ends by itself

        try:
            return await asyncio.wait_for(first(), self.timeout)
        except asyncio.TimeoutError:
            return {"closed": "timeout"}
        finally:
            with contextlib.suppress(RuntimeError):
                await events.aclose()  # type: ignore[attr-defined]

    async def resume(self, graph: Any, config: dict[str, Any], *, durability: Durability | None = None) -> Any:
        """Asks what the thread's checkpoint waits on, waits for the answers and
        resumes ``graph`` (a compiled graph with a checkpointer) once. Returns the
        graph's result, or ``None`` when the checkpoint waits on nothing and has
        no step left (or no longer waits on these interrupts: another resume
        went first).

        A checkpoint that waits on no interrupt but has steps left (a runtime
        that died after the graph took the answer, before the next node
        finished) is continued from there (``ainvoke(None, config)``): the node
        that runs the released call runs, once, in the runtime that resumes.
        ``durability`` goes to ``ainvoke`` (``"sync"``: each step's checkpoint is
        written before the next step starts, so a runtime killed in a node
        resumes at that node)."""
        thread = _thread(config)
        extra: dict[str, Any] = {} if durability is None else {"durability": durability}
        state = await graph.aget_state(config)
        interrupts = [i for t in state.tasks for i in t.interrupts]
        if not interrupts:
            if state.next:
                return await graph.ainvoke(None, config, **extra)
            return None
        held = await self.hold(interrupts, thread)
        answers = {h.interrupt_id: await self.answer(h) for h in held}
        state = await graph.aget_state(config)
        waiting = {i.id for t in state.tasks for i in t.interrupts}
        if not set(answers) <= waiting:
            return None
        return await graph.ainvoke(Command(resume=answers), config, **extra)

    async def execute(self, decision: Mapping[str, Any], run: Callable[[], Any]) -> Any:
        """Runs the call an approval released, once, and reports its result to
        Holdpoint (its one ``tool-call-finished``). ``decision`` is what the
        node's ``interrupt`` got back; ``run`` does the call (a function, sync
        or async, of no arguments) and returns its output (JSON, or anything
        whose ``str`` is reported). Returns the output.

        A call whose result Holdpoint already holds (a runtime that died after
        executing and reporting, before its checkpoint was written) is not run
        again: the recorded output is returned, or :class:`ToolFailed` raised
        when the call failed. An exception of ``run`` is reported as
        ``tool.failed`` and raised on. Raises :class:`ValueError` for a decision
        that did not approve."""
        if not decision.get("approved"):
            raise ValueError("the call was not approved: nothing to execute")
        effect_id = str(decision["effectId"])
        record = await self.rt.record(effect_id)
        result = (record or {}).get("result")
        if isinstance(result, dict):
            if result.get("status") == "ok":
                return result.get("output")
            raise ToolFailed(str(result.get("code", "tool.failed")), str(result.get("message", "")))
        try:
            output = run()
            if inspect.isawaitable(output):
                output = await output
        except Exception as e:
            await self.rt.report_tool_result(effect_id, tool_error("tool.failed", str(e)))
            raise
        await self.rt.report_tool_result(effect_id, tool_ok(_jsonable(output)))
        return output


class ToolFailed(Exception):
    """A released call that failed before (its result in Holdpoint is an
    error): ``code`` and ``message`` as reported."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _jsonable(value: Any) -> Any:
    """``value`` as JSON (a call may return any object: its ``str`` then)."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError):
        return str(value)


def _question_answer(f: Followed, interaction_id: str) -> dict[str, Any] | None:
    data = f.event.get("data") or {}
    if not isinstance(data, dict) or data.get("interactionId", data.get("questionId")) != interaction_id:
        return None
    if f.name == "interaction-closed":
        return {"closed": str(data.get("reason") or "closed")}
    if f.name != "interaction-resolved":
        return None
    if data.get("resolvedBy") == "expiry":
        return {"closed": "expired"}
    answer = data.get("answer") or {}
    if answer.get("kind") == "question":
        return {"answers": answer.get("answers") or []}
    if answer.get("kind") == "value":
        return {"value": answer.get("value")}
    return {"value": answer}
