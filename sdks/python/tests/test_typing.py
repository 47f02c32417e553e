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


def test_the_package_and_examples_type_check_for_python_3_10() -> None:
    """The package says ``requires-python >= 3.10``: mypy, told the target is
    3.10, finds no standard-library name or syntax the package or its examples
    use that 3.10 lacks (``asyncio.timeout``, ``ExceptionGroup``, ``typing.Self``…)."""
    api = pytest.importorskip("mypy.api", reason="mypy is in ops/test.sh's venv")
    here = ROOT / "sdks" / "python"
    cache = ROOT / ".tools" / "mypy-cache-3.10"
    out, err, status = api.run(
        ["--strict", "--python-version", "3.10", "--cache-dir", str(cache), str(here / "src" / "holdpoint"), str(here / "examples")]
    )
    assert status == 0, out + err
