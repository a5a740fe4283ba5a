"""`python -m cortex` is the `cortex` command."""

import sys

from cortex.cli.main import main

sys.exit(main())
