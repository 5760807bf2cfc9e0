# SPDX-License-Identifier: Apache-2.0

"""Every nova name the package relies on, checked at start-up.

Nothing here stops nova-compute from starting: a change costs one ERROR at
start-up and what :data:`NAMES` says (the operator guide: "nova-compute
always starts"); so does a release outside the range
(:mod:`~nova_evac_cleanup.releases`).
"""

import functools
import inspect

from nova.compute import manager as nova_manager
from nova.compute import resource_tracker
from nova.network import neutron
from nova import safe_utils
from nova.scheduler.client import report
from nova.virt import driver as virt_driver
from oslo_log import log as logging

from nova_evac_cleanup import releases

LOG = logging.getLogger(__name__)

#: What a nova that changed a name costs.
HOOK, FINISH, SEEN, HELPER = 'hook', 'finish', 'seen', 'helper'
_COSTS = {
    HOOK: 'nova-evac-cleanup cannot trust its hooks on this nova: running '
          'as nova\'s own compute manager, no cleanup of failed evacuations, '
          'no start-up sweep',
    FINISH: 'an evacuation that fails in it is ended by nova alone; the '
            'cleanup of a failed spawn still runs',
    SEEN: 'a failed evacuation nova\'s handler ended is read again to be '
          'sure; the cleanup of a failed spawn still runs',
    HELPER: 'what needs them (the volume connections of a failed '
            'evacuation, the source\'s give-back of its volumes and ports) '
            'logs the commands to run by hand; the cleanup of a failed spawn '
            'still runs',
}

_MANAGER = nova_manager.ComputeManager
_DRIVER = virt_driver.ComputeDriver
_REBUILD = 'self context instance orig_image_ref '
#: Every nova method the package overrides, watches or calls: what a change
#: costs, and its parameters in nova 31 to 34.
NAMES = {
    (_MANAGER, 'init_host'): (HOOK, 'self service_ref'),
    (_MANAGER, 'cleanup_host'): (HOOK, 'self'),
    (_MANAGER, 'rebuild_instance'): (HOOK, _REBUILD + (
        'image_ref injected_files new_pass orig_sys_metadata bdms recreate '
        'on_shared_storage preserve_ephemeral migration scheduled_node '
        'limits request_spec accel_uuids reimage_boot_volume target_state')),
    (_MANAGER, '_detach_volume'): (
        HOOK, 'self context bdm instance destroy_bdm attachment_id'),
    (_MANAGER, '_do_rebuild_instance'): (HOOK, _REBUILD + (
        'image_meta injected_files new_pass orig_sys_metadata bdms evacuate '
        'on_shared_storage preserve_ephemeral migration request_spec '
        'allocations request_group_resource_providers_mapping accel_uuids '
        'reimage_boot_volume target_state')),
    (_DRIVER, 'spawn'): (HOOK, 'self context instance image_meta '
                         'injected_files admin_password allocations '
                         'network_info block_device_info power_on accel_info'),
    (_DRIVER, 'instance_on_disk'): (HOOK, 'self instance'),
    (resource_tracker.ResourceTracker, 'finish_evacuation'): (
        FINISH, 'self instance node migration'),
    # Whether nova's handler removed the allocation: it only logs a failure.
    (report.SchedulerReportClient,
     'remove_provider_tree_from_instance_allocation'): (
        SEEN, 'self context consumer_uuid root_rp_uuid'),
    # The volume connections of a failed evacuation, and of the give-back.
    (_MANAGER, '_terminate_volume_connections'): (
        HELPER, 'self context instance bdms'),
    (_MANAGER, '_get_instance_block_device_info'): (
        HELPER, 'self context instance refresh_conn_info bdms'),
    (_MANAGER, '_update_volume_attachments'): (
        HELPER, 'self context instance bdms'),
    (_MANAGER, '_complete_volume_attachments'): (HELPER, 'self context bdms'),
    # The give-back's binding of a port with a PCI device or a resource
    # request.
    (neutron.API, '_get_port_pci_dev'): (HELPER, 'self instance port'),
    (neutron.API, '_get_pci_device_profile'): (HELPER, 'self pci_dev'),
    (neutron.API, '_has_resource_request'): (
        HELPER, 'self context port neutron'),
    (neutron.API, '_get_binding_profile_allocation'): (
        HELPER, 'self context port neutron resource_provider_mapping'),
}


class HelperChanged(Exception):
    """This nova lacks a private helper the package calls, or changed it."""


@functools.lru_cache()
def changed():
    """Why each name this nova lacks or changed is, by method name."""
    result = {}
    for (owner, name), (_cost, expected) in NAMES.items():
        expected, method = expected.split(), getattr(owner, name, None)
        try:
            # nova's RPC decorators hide the method behind (*args, **kwargs).
            found = None if method is None else list(inspect.signature(
                safe_utils.get_wrapped_function(method)).parameters)
        except (TypeError, ValueError):
            found = ['<unreadable>']
        if found != expected:
            result[name] = '%s.%s(%s) expected, %s found' % (
                owner.__name__, name, ', '.join(expected),
                'no such method' if found is None else
                '(%s)' % ', '.join(found))
    return result


def problems(cost):
    """The names whose change costs ``cost``, as sentences."""
    result = [why for (_owner, name), (kind, _) in NAMES.items()
              if kind == cost for why in [changed().get(name)] if why]
    if cost == HOOK and nova_has_the_fix():
        result.insert(0, 'this nova already destroys the guest of a failed '
                      'evacuation (the nova-evac-cleanup patch series is '
                      'applied)')
    return result


def check(host):
    """Log one ERROR per degraded mode.

    :returns: the costs that hold on this nova: :data:`HOOK` (the cleanup
        runs), then :data:`FINISH` and :data:`SEEN` (watched), by cost
    """
    changed.cache_clear()
    runs = {}
    for cost in (HOOK, FINISH, SEEN, HELPER):
        found = problems(cost)
        if found and (cost == HOOK or runs[HOOK]):
            LOG.error('nova-evac-cleanup on %s: %s. %s.', host,
                      '; '.join(found), _COSTS[cost])
        runs[cost] = runs.get(HOOK, True) and not found
    problem = runs[HOOK] and releases.release_problem()
    if problem:
        LOG.error('nova-evac-cleanup on %s: %s: it runs as on those '
                  'releases; the cleanup of a failed spawn still runs.',
                  host, problem)
    return runs


def helper(obj, name):
    """``obj``'s private nova helper ``name`` (one of :data:`NAMES`).

    :raises HelperChanged: this nova lacks it or changed it
    """
    why = changed().get(name)
    if why:
        raise HelperChanged(why)
    return getattr(obj, name)


def named(method, args, kwargs):
    """The arguments of a call of nova's ``method`` (checked), by name."""
    params = next(expected for (_owner, name), (_cost, expected)
                  in NAMES.items() if name == method)
    return dict(zip(params.split()[1:], args), **kwargs)


def nova_has_the_fix():
    """Whether nova carries the patch series (which cleans up itself)."""
    method = getattr(_MANAGER, '_rebuild_default_impl', None)
    return method is not None and (
        'on_shared_storage' in inspect.signature(method).parameters)
