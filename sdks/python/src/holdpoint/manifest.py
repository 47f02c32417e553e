"""An agent's ``AGENT.md``: YAML front matter between ``---`` lines, then
Markdown. Holdpoint reads ``name``, ``description`` and ``loop.connections``;
``request_connection`` is off unless the front matter says
``loop: {connections: true}`` (as the Rust client's ``manifest`` module reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import ManifestError

__all__ = ["AgentManifest"]


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ManifestError(f"AGENT.md: {key} must be a string, not {type(value).__name__}")


@dataclass(frozen=True)
class AgentManifest:
    """The parts of an agent manifest Holdpoint reads; other keys are ignored (the
    manifest belongs to the harness)."""

    name: str | None = None
    """The agent's name."""
    description: str | None = None
    """What it does."""
    connections: bool = False
    """``loop.connections``: turns ``request_connection`` on. Off by default."""

    @classmethod
    def from_markdown(cls, text: str) -> AgentManifest:
        """Parses the front matter of an ``AGENT.md`` text. A text without front
        matter (or with an empty one) is a manifest with every default.

        Raises :class:`~holdpoint.ManifestError` when the front matter is not
        closed with ``---``, is not YAML, or is not of this shape (``loop`` not a
        mapping, ``connections`` not a boolean).
        """
        text = text.removeprefix("\ufeff")
        lines = text.splitlines()
        if not lines or lines[0].rstrip() != "---":
            return cls()
        for i, line in enumerate(lines[1:], start=1):
            if line.rstrip() == "---":
                front = "\n".join(lines[1:i])
                break
        else:
            raise ManifestError("AGENT.md: front matter is not closed with ---")
        if not front.strip():
            return cls()
        try:
            data = yaml.safe_load(front)
        except yaml.YAMLError as e:
            raise ManifestError(f"AGENT.md: {e}") from None
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ManifestError("AGENT.md: the front matter must be a mapping")
        loop = data.get("loop")
        if loop is None:
            loop = {}
        if not isinstance(loop, dict):
            raise ManifestError("AGENT.md: loop must be a mapping")
        connections = loop.get("connections", False)
        if connections is None:
            connections = False
        if not isinstance(connections, bool):
            raise ManifestError("AGENT.md: loop.connections must be true or false")
        return cls(
            name=_optional_str(data, "name"),
            description=_optional_str(data, "description"),
            connections=connections,
        )

    @classmethod
    def from_path(cls, path: str | Path) -> AgentManifest:
        """Reads and parses an ``AGENT.md`` file; :class:`~holdpoint.ManifestError`
        when it cannot be read or is invalid."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ManifestError(f"AGENT.md: {path}: {e}") from None
        return cls.from_markdown(text)

    @property
    def connections_enabled(self) -> bool:
        """True when ``request_connection`` is on."""
        return self.connections
