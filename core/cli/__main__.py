"""``python -m core.cli``: the `vaultsearch` command."""

import sys

from core.cli import main

sys.exit(main())
