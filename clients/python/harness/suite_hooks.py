"""What the plugins that run another project's test suite (``limits_plugin``,
``flask_limiter_plugin``) share: that suite's conftest fixtures swapped for
the harness's, and the session failed when the loopback guard refused an
address."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import loopback_guard
import pytest


def swap_conftest_fixtures(fixtures: dict[str, Any]) -> Callable[[Any, str, Any], None]:
    """A ``pytest_plugin_registered`` hook that puts ``fixtures`` in place of
    the conftest's own of the same names. A conftest's fixtures win over a
    plugin's, so they are swapped in the conftest module before pytest reads
    its fixtures."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_plugin_registered(plugin: Any, plugin_name: str, manager: Any) -> None:
        if isinstance(plugin, types.ModuleType) and plugin.__name__.endswith("conftest"):
            for name, fixture in fixtures.items():
                if hasattr(plugin, name):
                    setattr(plugin, name, fixture)

    return pytest_plugin_registered


def guard_refused_any() -> bool:
    """Prints what the loopback guard refused; whether it refused anything."""
    for message in loopback_guard.violations:
        print(f"LOOPBACK GUARD: {message}")
    return bool(loopback_guard.violations)
