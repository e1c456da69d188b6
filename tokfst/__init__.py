"""``import tokfst``: the short name of :mod:`tokfst_cli`, the same package and the same modules."""

import sys

import tokfst_cli

sys.modules[__name__] = tokfst_cli
