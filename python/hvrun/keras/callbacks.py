"""hvrun.keras.callbacks: hvrun.tensorflow.keras.callbacks."""
from hvrun.tensorflow.keras.callbacks import *  # noqa: F401,F403
from hvrun.tensorflow.keras.callbacks import __all__  # noqa: F401
