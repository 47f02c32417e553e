"""The generated error classes are up to date with schemas/errors.json (the drift
test: rerun scripts/generate_errors.py), and the package carries the Cargo
workspace's version."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

import holdpoint
from holdpoint import ERRORS_BY_CODE, HoldpointError, error_for

from .conftest import ROOT

HERE = ROOT / "sdks" / "python"


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_errors", HERE / "scripts" / "generate_errors.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_errors_match_the_catalog() -> None:
    gen = load_generator()
    catalog = json.loads((ROOT / "schemas" / "errors.json").read_text(encoding="utf-8"))
    have = (HERE / "src" / "holdpoint" / "_errors_generated.py").read_text(encoding="utf-8")
    assert have == gen.render(catalog), "stale: run python sdks/python/scripts/generate_errors.py"


def test_every_code_has_its_class_with_title_and_retryable() -> None:
    catalog = json.loads((ROOT / "schemas" / "errors.json").read_text(encoding="utf-8"))["errors"]
    assert sorted(ERRORS_BY_CODE) == sorted(e["code"] for e in catalog)
    for e in catalog:
        err = error_for(e["code"], "why")
        assert isinstance(err, HoldpointError)
        assert (err.code, err.title, err.retryable, err.status) == (
            e["code"], e["title"], e["retryable"], e["status"],
        )
        assert str(err) == f"{e['code']} {e['title']}: why"
    assert holdpoint.NoLongerWaitingError.code == "NRY-0009"
    assert holdpoint.TemporarilyUnavailableError.retryable is True


def test_an_unknown_code_keeps_the_servers_words() -> None:
    err = error_for("NRY-9999", "later", title="From the future")
    assert isinstance(err, holdpoint.UnknownCodeError)
    assert (err.code, err.title) == ("NRY-9999", "From the future")


def test_version_is_the_workspaces() -> None:
    cargo = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    workspace = re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', cargo, re.M | re.S)
    assert workspace, "Cargo.toml has [workspace.package] version"
    pyproject = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.M)
    assert declared
    assert declared.group(1) == workspace.group(1) == holdpoint.__version__
