"""The installed distribution's version (``vaultsearch --version``, the MCP server's ``serverInfo``)."""

from __future__ import annotations

NOT_INSTALLED = "(not installed: run from a source checkout)"


def package_version() -> str:
    """The installed distribution's version; a checkout run without installing says so."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vaultsearch")
    except PackageNotFoundError:
        return NOT_INSTALLED
