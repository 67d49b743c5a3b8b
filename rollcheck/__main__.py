"""``python -m rollcheck``: the same command line as the ``rollcheck`` script."""

import sys

from rollcheck.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
