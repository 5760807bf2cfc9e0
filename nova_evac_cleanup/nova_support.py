# SPDX-License-Identifier: Apache-2.0

"""What this nova is: every nova name the package relies on, and its release.

Neither stops nova-compute from starting: a changed name costs one ERROR and
what :data:`NAMES` says, a release outside the range one ERROR."""

import functools
from importlib import metadata
import inspect

from nova.compute import manager as nova_manager
from nova.compute import resource_tracker
from nova.network import neutron
from nova import safe_utils
from nova.scheduler.client import report
from nova import version
from nova.virt import driver as virt_driver
from nova.virt import hardware
from nova.volume import cinder
from oslo_log import log as logging
from packaging import requirements
from packaging import specifiers

LOG = logging.getLogger(__name__)

#: What a nova that changed a name costs.
HOOK, FINISH, SEEN, HELPER = 'hook', 'finish', 'seen', 'helper'
_COSTS = {
    HOOK: 'nova-evac-cleanup cannot trust its hooks on this nova: it runs as '
          'nova\'s own compute manager, with no cleanup and no sweep',
    FINISH: 'an evacuation failing in it is ended by nova alone',
    SEEN: 'a failed evacuation nova\'s handler ended is read again',
    HELPER: 'volume connections and the give-back are left to the commands '
            'logged',
}

_MANAGER = nova_manager.ComputeManager
_DRIVER = virt_driver.ComputeDriver
_REBUILD = 'self context instance orig_image_ref '
#: Every nova method the package overrides, watches or calls: the cost of a
#: change, and its parameters in nova 31 to 34.
NAMES = {
    (_MANAGER, 'init_host'): (HOOK, 'self service_ref'),
    (_MANAGER, 'cleanup_host'): (HOOK, 'self'),
    (_MANAGER, 'rebuild_instance'): (HOOK, _REBUILD + (
        'image_ref injected_files new_pass orig_sys_metadata bdms recreate '
        'on_shared_storage preserve_ephemeral migration scheduled_node '
        'limits request_spec accel_uuids reimage_boot_volume target_state')),
    (_MANAGER, '_rebuild_default_impl'): (HOOK, (
        'self context instance image_meta injected_files admin_password '
        'allocations bdms detach_block_devices attach_block_devices '
        'network_info evacuate block_device_info preserve_ephemeral '
        'accel_uuids reimage_boot_volume')),
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
    (report.SchedulerReportClient,
     'remove_provider_tree_from_instance_allocation'): (
        SEEN, 'self context consumer_uuid root_rp_uuid'),
    # Volume connections: the give-back's, and the guest's destroy.
    (_MANAGER, '_terminate_volume_connections'): (
        HELPER, 'self context instance bdms'),
    (_MANAGER, '_get_instance_block_device_info'): (
        HELPER, 'self context instance refresh_conn_info bdms'),
    (_MANAGER, '_update_volume_attachments'): (
        HELPER, 'self context instance bdms'),
    (_MANAGER, '_complete_volume_attachments'): (HELPER, 'self context bdms'),
    # The host an attachment is connected for.
    (cinder, 'cinderclient'): (
        HELPER, 'context microversion skip_version_check check_only'),
    # The binding of a port with a PCI device or resources.
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
                owner.__name__, name, ', '.join(expected), 'no such method'
                if found is None else '(%s)' % ', '.join(found))
    return result


def problems(cost):
    """The names whose change costs ``cost``, as sentences."""
    result = [changed()[name] for (_owner, name), (kind, _) in NAMES.items()
              if kind == cost and name in changed()]
    if cost == HOOK and nova_has_the_fix():
        result.insert(0, 'this nova already destroys the guest of a failed '
                      'evacuation (the nova-evac-cleanup patch series is '
                      'applied)')
    return result


def check(host):
    """Log one ERROR per degraded cost; return whether each cost holds."""
    changed.cache_clear()
    runs = {}
    for cost in (HOOK, FINISH, SEEN, HELPER):
        found = problems(cost)
        if found and (cost == HOOK or runs[HOOK]):
            LOG.error('nova-evac-cleanup on %s: %s. %s%s.', host,
                      '; '.join(found), _COSTS[cost], '' if cost == HOOK else
                      '; the cleanup of a failed spawn still runs')
        runs[cost] = runs.get(HOOK, True) and not found
    problem = runs[HOOK] and release_problem()
    if problem:
        LOG.error('nova-evac-cleanup on %s: %s: it runs as on those '
                  'releases; the cleanup of a failed spawn still runs.',
                  host, problem)
    return runs


def helper(obj, name):
    """``obj``'s private nova helper ``name``; :exc:`HelperChanged` if not."""
    if name in changed():
        raise HelperChanged(changed()[name])
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


def supported_range():
    """The nova specifiers of the package's metadata; '' if unreadable."""
    try:
        found = metadata.requires('nova-evac-cleanup') or ()
    except metadata.PackageNotFoundError:
        return ''
    return next((str(r.specifier) for r in map(requirements.Requirement, found)
                 if r.name == 'nova'), '')


def release_problem(release=None):
    """Why ``release`` (the installed nova's) is outside the range, or None."""
    release, supported = release or version.version_string(), supported_range()
    if not supported:
        return ('the nova releases nova-evac-cleanup supports cannot be read '
                'from its package metadata (nova-evac-cleanup)')
    # An unparsable release is in no range.
    if specifiers.SpecifierSet(supported).contains(release, True):
        return None
    return ('nova %s is not one of the releases nova-evac-cleanup was '
            'written and tested for (nova%s)%s' % (
                release, supported, '; it deletes the vTPM secret of an '
                'instance with its disks (bug 2125030): those of an '
                'instance with a vTPM are kept'
                if deletes_vtpm_secret(release) else ''))


def deletes_vtpm_secret(release):
    """Whether libvirt's destroy with the disks deletes the vTPM secret."""
    # Fixed by nova commit 787d2a1300 (bug 2125030) in 31.3.0 and 32.2.0;
    # an unparsable release is in no range: it counts as one that does.
    return not specifiers.SpecifierSet(
        '>=31.3.0,!=32.0.*,!=32.1.*').contains(release, True)


def vtpm_hazard(instance):
    """Why ``instance``'s disks stay (its source needs its vTPM), or None."""
    release = version.version_string()
    if not deletes_vtpm_secret(release):
        return None
    try:
        vtpm = (instance.system_metadata.get('vtpm_secret_uuid') or
                hardware.get_vtpm_constraint(instance.flavor,
                                             instance.image_meta))
    except Exception:
        vtpm = True  # an instance that cannot be read keeps its disks
    return ('the instance has a vTPM, whose secret nova %s deletes with its '
            'disks (bug 2125030)' % release) if vtpm else None
