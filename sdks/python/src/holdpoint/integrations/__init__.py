"""Adapters that put Holdpoint under the agent frameworks people already use.

Each is a module of its own, importing its framework (an optional dependency):
:mod:`holdpoint.integrations.openai_agents` (the OpenAI Agents SDK),
:mod:`holdpoint.integrations.langgraph` (LangGraph) and
:mod:`holdpoint.integrations.mcp_elicitation` (MCP elicitation).
"""
