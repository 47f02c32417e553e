"""AGENT.md front matter, read as the Rust client's manifest module reads it."""

from __future__ import annotations

import pytest

from holdpoint import AgentManifest, ManifestError


def test_the_example_turns_connections_on() -> None:
    m = AgentManifest.from_markdown(
        "---\nname: coder\ndescription: Writes and ships changes.\nloop:\n  connections: true\n---\n\n# Coder\n"
    )
    assert m.name == "coder"
    assert m.connections_enabled


@pytest.mark.parametrize(
    "text",
    [
        "# no front matter",
        "---\nname: x\n---\n",
        "---\nloop:\n  connections: false\n---\n",
        "---\nloop: {}\n---\n",
        "---\n---\n",
    ],
)
def test_connections_are_off_by_default(text: str) -> None:
    assert not AgentManifest.from_markdown(text).connections_enabled


@pytest.mark.parametrize(
    "text",
    ["---\nloop:\n  connections: \"yes\"\n---\n", "---\nname: x\n", "---\nloop: [1]\n---\n", "---\n: :\n  - ]\n---\n"],
)
def test_bad_front_matter_is_an_error(text: str) -> None:
    with pytest.raises(ManifestError):
        AgentManifest.from_markdown(text)
