"""Tests of ``tokfst compile-batch`` and :mod:`tokfst_cli.batch`."""
