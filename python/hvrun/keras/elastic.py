"""hvrun.keras.elastic: hvrun.tensorflow.keras.elastic."""
from hvrun.tensorflow.keras.elastic import *  # noqa: F401,F403
from hvrun.tensorflow.keras.elastic import __all__  # noqa: F401
