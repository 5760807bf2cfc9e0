# SPDX-License-Identifier: Apache-2.0

"""Clean up the destination host when a nova evacuation fails to spawn.

Deployers either run ``nova-compute-evac-cleanup`` instead of
``nova-compute``, or call :func:`install` before nova creates its compute
service.
"""

#: The compute manager nova starts once :func:`install` has run.
COMPUTE_MANAGER = 'nova_evac_cleanup.manager.ComputeManager'


def install():
    """Make nova start its compute service with this project's manager.

    nova looks the manager up by this name when it creates the service.
    Nothing is imported here: nova's own entry point sets eventlet or
    threading up first. Calling it more than once is harmless.
    """
    from nova import service

    service.SERVICE_MANAGERS['nova-compute'] = COMPUTE_MANAGER
