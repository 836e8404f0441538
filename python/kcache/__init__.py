"""kcache: a content-addressed cache for CUDA kernels compiled with NVRTC.

This package is the kcache command-line tool as a wheel: the `kcache` binary
(bin/kcache), beside it the drop-in libnvrtc.so.13 that `kcache run` preloads
and the gRPC plugin (lib/kcache/, where the binary looks for them), and the
libraries they need that a plain Linux lacks (lib/, found through their
rpath). The `kcache` console script and `python -m kcache` run the binary with
their arguments; everything else is the binary's (`kcache --help`).
"""

import os
import sys

__version__ = "0+source"  # the wheel's version, written in by build_wheel.py

__all__ = ["binary", "main"]


def binary():
    """The path of the kcache binary this package holds."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kcache")


def main(argv=None):
    """Replaces this process with `kcache ARGS` (argv, else sys.argv[1:]).

    exec, not a child: signals, the exit status and the terminal are the
    binary's, and `kcache run -- CMD` leaves no Python process behind CMD.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    path = binary()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(path, ["kcache"] + args)
    except OSError as error:
        sys.exit(
            "kcache: cannot run %s: %s; reinstall the wheel "
            "(pip install --force-reinstall kcache-*.whl)" % (path, error.strerror)
        )
