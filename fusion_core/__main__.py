import sys

from fusion_core.cli import main

sys.exit(main())
