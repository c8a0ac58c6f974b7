"""Property-based (hypothesis) differential fuzzing of the NonZero / EyeLike lowering.

The 'ci' profile (tests/conftest.py, the default) keeps this directory to about a minute;
HYPOTHESIS_PROFILE=thorough runs thousands of examples per property.
"""
