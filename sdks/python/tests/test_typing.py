"""The package is typed (``py.typed``): mypy --strict finds nothing in it, its
example or its tests."""

from __future__ import annotations

import pytest

from .conftest import ROOT


def test_mypy_strict_is_clean() -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in ops/test.sh's venv")
    here = ROOT / "sdks" / "python"
    # The cache under .tools (ignored by git) makes later runs fast.
    cache = ROOT / ".tools" / "mypy-cache"
    out, err, status = api.run(
        ["--strict", "--cache-dir", str(cache), str(here / "src" / "holdpoint"), str(here / "examples"), str(here / "tests")]
    )
    assert status == 0, out + err
