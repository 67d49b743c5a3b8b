"""TLA+ models of the recovery algorithms and the TLC runs that check them and validate traces."""
