# Copyright 2026 nova-evac-cleanup developers
#
#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""Loaded by Python at start-up from the tier's nova-compute ``PYTHONPATH``.

Only the deployment tier puts this directory on a process's path, with
``EVAC_DEATHPOINT_DIR`` set: then :mod:`tests.deployment.tier.deathpoint`
waits for nova's compute entry point. Any other process is left alone.
"""

import os

if os.environ.get('EVAC_DEATHPOINT_DIR'):
    from tests.deployment.tier import deathpoint

    deathpoint.install_on_start(os.environ['EVAC_DEATHPOINT_DIR'])
