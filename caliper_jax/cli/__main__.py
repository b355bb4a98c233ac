"""``python -m caliper_jax.cli``: the same entry point as the ``caliper`` script."""
import sys

from caliper_jax.cli import main

sys.exit(main())
