"""Tests of tokfst_cli.cli.app: the command line's help, output, errors, cache and colour, and ``tokfst draw``."""
