"""``python -m fusion_core.cli``: the ``fusion-core`` command line (:func:`fusion_core.cli.main`)."""

import sys

from fusion_core.cli import main

sys.exit(main())
