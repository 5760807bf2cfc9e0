# SPDX-License-Identifier: Apache-2.0

"""Loaded by Python at start-up from the tier's nova-compute ``PYTHONPATH``.

Only the deployment tier puts this directory on a process's path, with
``EVAC_DEATHPOINT_DIR`` set: then :mod:`tests.deployment.tier.deathpoint`
waits for nova's compute entry point. Any other process is left alone.
"""

import os

if os.environ.get('EVAC_DEATHPOINT_DIR'):
    from tests.deployment.tier import deathpoint

    deathpoint.install_on_start(os.environ['EVAC_DEATHPOINT_DIR'])
