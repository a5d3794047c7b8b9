"""The ``tensorflow.python`` import paths TF1 programs use (``from tensorflow.python.client
import device_lib`` becomes ``from dflab.python.client import device_lib``): each module here
is dflab's own module of that name."""
