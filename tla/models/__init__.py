"""TLA+ models and their TLC configurations (data files; see tla/manifest.json and specs/tla.md)."""
