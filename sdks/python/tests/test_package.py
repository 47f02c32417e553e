"""The package as it ships: ``sdks/python`` builds a wheel with its own build
backend (hatchling, as ``pip install ./sdks/python`` does), the wheel carries
the package, its ``py.typed`` and the workspace's version with the pinned
dependencies, and installed into a fresh virtual environment it is what
``import holdpoint`` finds (nothing downloaded: the wheel's dependencies are
read from this test's own environment, behind the fresh one's site-packages)."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from .conftest import ROOT

HERE = ROOT / "sdks" / "python"


def workspace_version() -> str:
    cargo = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    found = re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', cargo, re.M | re.S)
    assert found, "Cargo.toml has [workspace.package] version"
    return found.group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="hatchling is in ops/test.sh's venv")
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(HERE),
        ],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_carries_the_package_its_types_and_the_workspace_version(wheel: Path) -> None:
    version = workspace_version()
    assert wheel.name == f"holdpoint-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = Parser().parsestr(z.read(f"holdpoint-{version}.dist-info/METADATA").decode())
    for module in (
        "__init__.py", "py.typed", "runtime.py", "rest.py", "webhooks.py", "errors.py", "_errors_generated.py",
        "_wire.py", "manifest.py", "integrations/openai_agents.py", "integrations/langgraph.py",
        "integrations/mcp_elicitation.py",
    ):
        assert f"holdpoint/{module}" in names, f"the wheel has no holdpoint/{module}"
    assert not [n for n in names if n.startswith(("tests/", "examples/"))], "the wheel carries the tests"
    assert metadata["Name"] == "holdpoint"
    assert metadata["Version"] == version
    assert metadata["Requires-Python"] == ">=3.10"
    requires = metadata.get_all("Requires-Dist") or []
    plain = sorted(r for r in requires if "extra ==" not in r)
    assert plain == ["httpx==0.28.1", "nats-py==2.16.0", "pyyaml==6.0.4"], requires
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"openai-agents", "mcp", "langgraph"} <= extras, extras


def test_the_wheel_installs_into_a_fresh_environment_and_imports(wheel: Path, tmp_path: Path) -> None:
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )
    installed = subprocess.run(
        [
            sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
            "--disable-pip-version-check", "--no-index", "--no-deps", str(wheel),
        ],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (site / "holdpoint" / "py.typed").is_file(), installed.stdout
    # The dependencies (nats-py, httpx, PyYAML) from this environment, after the
    # fresh one's own site-packages: the holdpoint found is the wheel's.
    (site / "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    probe = (
        "import pathlib, holdpoint, holdpoint.runtime, holdpoint.rest;"
        "from holdpoint import Runtime, HoldpointRest, verify_webhook, NoLongerWaitingError;"
        "here = pathlib.Path(holdpoint.__file__).parent;"
        "print(here); print(holdpoint.__version__); print((here / 'py.typed').is_file())"
    )
    ran = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    where, version, typed = ran.stdout.split()
    assert Path(where).is_relative_to(env), f"imported {where}, not the wheel installed in {env}"
    assert version == workspace_version()
    assert typed == "True"
