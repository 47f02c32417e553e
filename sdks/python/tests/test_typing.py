"""The package is typed (``py.typed``): mypy --strict finds nothing in it, its
example or its tests."""

from __future__ import annotations

import pytest

from .conftest import ROOT


def test_mypy_strict_is_clean() -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in ops/test.sh's venv")
    here = ROOT / "sdks" / "python"
    out, err, status = api.run(
        ["--strict", "--no-incremental", str(here / "src" / "holdpoint"), str(here / "examples"), str(here / "tests")]
    )
    assert status == 0, out + err
