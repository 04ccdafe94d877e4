"""Horovod's process and build queries (horovod.common.basics) for hvrun.torch."""
from hvrun.basics import *  # noqa: F401,F403
from hvrun.basics import __all__  # noqa: F401
