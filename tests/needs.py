"""What a test needs beyond the core install, and what happens when it is missing.

On a laptop a missing extra or system package skips the test, with the command that
installs it in the reason. With ``HIL_REQUIRE_ALL=1`` (CI sets it) nothing is skipped for
that reason: the import or the tool call fails and the test errors, so a CI without an
extra cannot pass with less tested.
"""

import importlib
import os
import shutil

import pytest

REQUIRE_ALL = os.environ.get("HIL_REQUIRE_ALL") == "1"


def module(name: str, install: str):
    """Import ``name``; skip (laptop) or error (CI) when it is missing."""
    if REQUIRE_ALL:
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} is not installed: {install}")


def tools(*names: str, install: str) -> pytest.MarkDecorator:
    """A mark: skip when a command-line tool is missing, unless REQUIRE_ALL."""
    missing = [t for t in names if shutil.which(t) is None]
    return pytest.mark.skipif(
        bool(missing) and not REQUIRE_ALL, reason=f"{', '.join(missing)} missing: {install}"
    )
