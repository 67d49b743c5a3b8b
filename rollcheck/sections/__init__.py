"""Sections of ``rollcheck verify``: one ``sec_<name>.py`` module per area (see rollcheck.suite)."""
