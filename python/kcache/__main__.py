"""`python -m kcache ARGS`: the same as the `kcache` console script."""

from kcache import main

main()
