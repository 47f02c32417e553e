"""Adapters that put Holdpoint under the agent frameworks people already use.

Each is a module of its own, importing its framework (an optional dependency):
:mod:`holdpoint.integrations.openai_agents` for the OpenAI Agents SDK.
"""
