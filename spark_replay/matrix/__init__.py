"""The Spark chaos matrix: its plan, cells, warm drivers, witnesses, reproducers and releases."""
