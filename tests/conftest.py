"""Test configuration: activates the Hypothesis profile named by ROLLCHECK_PROFILE (ci by default)."""

from rollcheck.properties.profiles import load_profile

load_profile()
