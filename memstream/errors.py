"""The error types users catch (`from memstream.errors import NotFound`): one root, MemstreamError.

They are defined in the kernel (kernel/errors.py), the bottom layer every other one raises from; this
module only gives them the package's public name.
"""
from kernel.errors import *  # noqa: F403  (the whole family, as the kernel names it)
