"""``python -m indexer.cli``."""

import sys

from indexer.cli.main import main

sys.exit(main())
