"""``python -m rollcheck``: the same command line as the ``rollcheck`` script."""

import sys

from rollcheck.cli.main import main

sys.exit(main())
