"""Writes src/holdpoint/_errors_generated.py from schemas/errors.json.

One exception class per code of the catalog, named after its title
(``NRY-0009 No longer waiting`` → ``NoLongerWaitingError``,
``NRY-0051 Internal error`` → ``InternalError``), each a subclass of
:class:`holdpoint.errors.HoldpointError` carrying ``code``, ``title``,
``retryable`` and the HTTP ``status``. Run from anywhere:

    python sdks/python/scripts/generate_errors.py

``tests/test_errors.py`` regenerates the text and fails when the committed file
differs (the drift test).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG = HERE.parents[2] / "schemas" / "errors.json"
TARGET = HERE.parent / "src" / "holdpoint" / "_errors_generated.py"


def class_name(title: str) -> str:
    """``No longer waiting`` → ``NoLongerWaitingError``; ``URI too long`` → ``UriTooLongError``."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    name = "".join(w[:1].upper() + w[1:].lower() for w in words)
    return name if name.endswith("Error") else name + "Error"


def render(catalog: dict) -> str:
    """The module's text for the catalog ``{"errors": [{code, title, status, retryable}]}``."""
    lines = [
        '"""Holdpoint\'s error catalog as exception classes.',
        "",
        "Generated from schemas/errors.json by scripts/generate_errors.py; do not edit.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from .errors import HoldpointError",
        "",
        "__all__ = [",
    ]
    errors = catalog["errors"]
    names = [class_name(e["title"]) for e in errors]
    if len(set(names)) != len(names):
        raise SystemExit("two codes share a class name: " + ", ".join(sorted(names)))
    lines += [f'    "{n}",' for n in sorted(names)] + ['    "ERRORS_BY_CODE",', "]", ""]
    for e, name in zip(errors, names):
        retry = "True" if e["retryable"] else "False"
        lines += [
            "",
            f"class {name}(HoldpointError):",
            f'    """``{e["code"]}`` {e["title"]} (HTTP {e["status"]}; retryable: {retry.lower()})."""',
            "",
            f'    code = "{e["code"]}"',
            f"    title = {json.dumps(e['title'])}",
            f"    retryable = {retry}",
            f"    status = {int(e['status'])}",
            "",
        ]
    lines += [
        "",
        "ERRORS_BY_CODE: dict[str, type[HoldpointError]] = {",
        *[f'    "{e["code"]}": {name},' for e, name in zip(errors, names)],
        "}",
        '"""Every code of the catalog and its class."""',
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = render(json.loads(CATALOG.read_text(encoding="utf-8")))
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
