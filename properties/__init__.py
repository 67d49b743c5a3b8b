"""Property-based checks of rollcheck's algorithms, their mutation catalogue and its evidence."""
