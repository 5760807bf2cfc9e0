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

"""Clean up the destination host when a nova evacuation fails to spawn.

Deployers either run ``nova-compute-evac-cleanup`` instead of
``nova-compute``, or call :func:`install` before nova creates its compute
service.
"""

#: The compute manager nova starts once :func:`install` has run.
COMPUTE_MANAGER = 'nova_evac_cleanup.manager.ComputeManager'


def install():
    """Make nova start its compute service with this project's manager.

    nova looks its compute manager up by name in
    ``nova.service.SERVICE_MANAGERS`` when it creates the service, so this
    must run before that, and it only stores the class path: nova's modules
    are imported, and eventlet or threading set up, by nova's own entry
    point. Calling it more than once is harmless.
    """
    from nova import service

    service.SERVICE_MANAGERS['nova-compute'] = COMPUTE_MANAGER
