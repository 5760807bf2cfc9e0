# SPDX-License-Identifier: Apache-2.0

"""``python -m tests.reproduce``: ``tox -e reproduce``."""

import sys

from tests.reproduce import cli

sys.exit(cli.main())
