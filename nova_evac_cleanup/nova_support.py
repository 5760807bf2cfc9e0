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

"""Every nova name the package relies on, checked at start-up.

The mixin overrides methods of nova's ``ComputeManager``, watches three
calls nova makes during an evacuation (the driver's ``instance_on_disk``
and ``spawn``, the resource tracker's ``finish_evacuation``) and calls
private helpers of nova: :data:`NAMES` has them all, with their parameters
as nova 31 to 34 define them, checked with ``inspect.signature`` when the
manager is built (:func:`check`) and by a unit test against the installed
nova.

Nothing here stops nova-compute from starting, and no degraded mode falls
below the cleanup of a failed spawn, since nova's own behaviour is the
bug. Each changed name costs one ERROR and what :data:`NAMES` says: a
changed hook (or this project's patch series applied already) makes the
manager nova's own; a changed ``finish_evacuation`` leaves an evacuation
that fails in it to nova alone; a changed private helper makes the part
that calls it log its commands instead (:func:`helper`). A release outside
the range ``requirements.txt`` states gets one ERROR and the cleanup all
the same; on the releases whose libvirt driver deletes the instance's vTPM
secret with its disks, the disks of an instance with a vTPM are kept
(:func:`vtpm_hazard`).
"""

import functools
from importlib import metadata
import inspect

from nova.compute import manager as nova_manager
from nova.compute import resource_tracker
from nova.network import neutron
from nova import safe_utils
from nova import version
from nova.virt import driver as virt_driver
from nova.virt import hardware
from oslo_log import log as logging
from packaging import requirements as packaging_requirements
from packaging import specifiers
from packaging import version as packaging_version

LOG = logging.getLogger(__name__)

#: The distribution whose metadata states the nova releases supported.
DISTRIBUTION = 'nova-evac-cleanup'

#: What a nova that changed a name costs.
HOOK, FINISH, HELPER = 'hook', 'finish', 'helper'
_COSTS = {
    HOOK: 'nova-evac-cleanup cannot trust its hooks on this nova: running '
          'as nova\'s own compute manager, no cleanup of failed evacuations, '
          'no start-up sweep',
    FINISH: 'an evacuation that fails in it is ended by nova alone; the '
            'cleanup of a failed spawn still runs',
    HELPER: 'what needs them (the volume connections of a failed '
            'evacuation, the source\'s give-back of its volumes and ports) '
            'logs the commands to run by hand; the cleanup of a failed spawn '
            'still runs',
}

_MANAGER = nova_manager.ComputeManager
_REBUILD = ('self', 'context', 'instance', 'orig_image_ref')
#: Every nova method the package overrides, watches or calls: its
#: parameters as nova 31.0.0 to 34.0.0 define them, and what a change costs.
NAMES = {
    (_MANAGER, 'init_host'): (HOOK, ('self', 'service_ref')),
    (_MANAGER, 'cleanup_host'): (HOOK, ('self',)),
    (_MANAGER, 'rebuild_instance'): (HOOK, _REBUILD + (
        'image_ref', 'injected_files', 'new_pass', 'orig_sys_metadata',
        'bdms', 'recreate', 'on_shared_storage', 'preserve_ephemeral',
        'migration', 'scheduled_node', 'limits', 'request_spec',
        'accel_uuids', 'reimage_boot_volume', 'target_state')),
    (_MANAGER, '_detach_volume'): (HOOK, (
        'self', 'context', 'bdm', 'instance', 'destroy_bdm',
        'attachment_id')),
    (_MANAGER, '_do_rebuild_instance'): (HOOK, _REBUILD + (
        'image_meta', 'injected_files', 'new_pass', 'orig_sys_metadata',
        'bdms', 'evacuate', 'on_shared_storage', 'preserve_ephemeral',
        'migration', 'request_spec', 'allocations',
        'request_group_resource_providers_mapping', 'accel_uuids',
        'reimage_boot_volume', 'target_state')),
    (virt_driver.ComputeDriver, 'spawn'): (HOOK, (
        'self', 'context', 'instance', 'image_meta', 'injected_files',
        'admin_password', 'allocations', 'network_info', 'block_device_info',
        'power_on', 'accel_info')),
    (virt_driver.ComputeDriver, 'instance_on_disk'): (
        HOOK, ('self', 'instance')),
    (resource_tracker.ResourceTracker, 'finish_evacuation'): (
        FINISH, ('self', 'instance', 'node', 'migration')),
    # The volume connections a failed evacuation made, released; the
    # source's give-back connecting them there again.
    (_MANAGER, '_terminate_volume_connections'): (
        HELPER, ('self', 'context', 'instance', 'bdms')),
    (_MANAGER, '_get_instance_block_device_info'): (
        HELPER, ('self', 'context', 'instance', 'refresh_conn_info', 'bdms')),
    (_MANAGER, '_update_volume_attachments'): (
        HELPER, ('self', 'context', 'instance', 'bdms')),
    (_MANAGER, '_complete_volume_attachments'): (
        HELPER, ('self', 'context', 'bdms')),
    # The source's give-back binding a port with a PCI device or a
    # resource request there again.
    (neutron.API, '_get_port_pci_dev'): (HELPER, ('self', 'instance', 'port')),
    (neutron.API, '_get_pci_device_profile'): (HELPER, ('self', 'pci_dev')),
    (neutron.API, '_has_resource_request'): (
        HELPER, ('self', 'context', 'port', 'neutron')),
    (neutron.API, '_get_binding_profile_allocation'): (HELPER, (
        'self', 'context', 'port', 'neutron', 'resource_provider_mapping')),
}


class HelperChanged(Exception):
    """This nova lacks a private helper the package calls, or changed it."""


def _parameters(method):
    # nova's RPC decorators hide the method behind (*args, **kwargs).
    try:
        return tuple(inspect.signature(
            safe_utils.get_wrapped_function(method)).parameters)
    except (TypeError, ValueError):
        return ('<unreadable>',)


@functools.lru_cache()
def changed():
    """Why each name this nova lacks or changed is, by method name."""
    result = {}
    for (owner, name), (_cost, expected) in NAMES.items():
        method = getattr(owner, name, None)
        found = None if method is None else _parameters(method)
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
    """Log one ERROR for each degraded mode; the parts that run.

    :returns: whether the cleanup runs at all, and whether
        ``finish_evacuation`` is watched
    """
    changed.cache_clear()
    runs = {}
    for cost in (HOOK, FINISH, HELPER):
        found = problems(cost)
        if found and (cost == HOOK or runs[HOOK]):
            LOG.error('nova-evac-cleanup on %s: %s. %s.', host,
                      '; '.join(found), _COSTS[cost])
        runs[cost] = not found
    if runs[HOOK]:
        problem = release_problem()
        if problem:
            LOG.error('nova-evac-cleanup on %s: %s: it runs as on those '
                      'releases; the cleanup of a failed spawn still runs.',
                      host, problem)
    return runs[HOOK], runs[HOOK] and runs[FINISH]


def helper(obj, name):
    """``obj``'s private nova helper ``name`` (one of :data:`NAMES`).

    :raises HelperChanged: this nova lacks it or changed its parameters
        (the manager logged it at start-up): the caller's part degrades
    """
    why = changed().get(name)
    if why:
        raise HelperChanged(why)
    return getattr(obj, name)


def named(method, args, kwargs):
    """The arguments of a call of nova's ``method``, all by name.

    Only used once :func:`check` found its parameters to be the expected
    ones.
    """
    result = dict(zip(NAMES[(_MANAGER, method)][1][1:], args))
    result.update(kwargs)
    return result


def spawn_arguments(args, kwargs):
    """The arguments of a call of a driver's ``spawn``, by name.

    Bound to the parameters of nova's base driver, the contract nova calls
    every driver with (a driver, or a wrapper of it, may take ``*args,
    **kwargs``).

    :returns: a dict; empty if the call does not fit
    """
    try:
        return inspect.signature(virt_driver.ComputeDriver.spawn).bind(
            None, *args, **kwargs).arguments
    except TypeError:
        return {}


def nova_has_the_fix():
    """Whether the installed nova carries this project's patch series.

    The series gives nova's ``_rebuild_default_impl`` its own
    ``on_shared_storage`` argument; the mixin and the patch must not both
    clean up.
    """
    method = getattr(_MANAGER, '_rebuild_default_impl', None)
    return method is not None and (
        'on_shared_storage' in inspect.signature(method).parameters)


def supported_range():
    """The nova releases supported, as ``requirements.txt`` states them.

    One place states the range: ``requirements.txt``, which pbr writes
    into the package's metadata (``Requires-Dist``), where this reads it.
    From 31 (2025.1) to 34 (2026.2), each series from its first release
    whose libvirt driver no longer deletes the instance's vTPM secret in
    Barbican on ``destroy`` (bug 2125030): before it, the destroy of a
    failed evacuation's guest would delete the secret of the instance,
    which still lives on its source.

    :returns: the specifiers, e.g. ``!=32.0.*,<35.0.0,>=31.3.0``; empty if
        the metadata cannot be read
    """
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return ''
    for requirement in requirements:
        parsed = packaging_requirements.Requirement(requirement)
        if parsed.name == 'nova':
            return str(parsed.specifier)
    return ''


def release_problem(release=None):
    """Why this nova release is not one the cleanup was tested on, or None.

    :param release: nova's version string; the installed nova's by default
    """
    release = release or version.version_string()
    supported = supported_range()
    if not supported:
        return ('the nova releases nova-evac-cleanup supports cannot be read '
                'from its package metadata (%s)' % DISTRIBUTION)
    try:
        inside = specifiers.SpecifierSet(supported).contains(
            release, prereleases=True)
    except ValueError:
        inside = False
    if not inside:
        return ('nova %s is not one of the releases nova-evac-cleanup was '
                'written and tested for (nova%s)%s' % (
                    release, supported, '; it deletes the vTPM secret of an '
                    'instance with its disks (bug 2125030): those of an '
                    'instance with a vTPM are kept'
                    if deletes_vtpm_secret(release) else ''))
    return None


def deletes_vtpm_secret(release=None):
    """Whether this nova's libvirt destroy deletes the vTPM secret.

    Before nova commit 787d2a1300 (bug 2125030; in 31.3.0, 32.2.0 and
    33.0.0) the libvirt driver's ``_cleanup`` deletes the instance's vTPM
    secret in the key manager whenever it removes the instance's disks,
    that is on ``destroy(destroy_disks=True)`` only. A release that cannot
    be parsed counts as one that does.
    """
    try:
        found = packaging_version.Version(
            release or version.version_string()).release[:3]
    except packaging_version.InvalidVersion:
        return True
    return found < (31, 3, 0) or (32, 0, 0) <= found < (32, 2, 0)


def vtpm_hazard(instance):
    """Why the disks of ``instance`` must be kept on this nova, or None.

    On a release of :func:`deletes_vtpm_secret`, removing the disks of
    an instance with a vTPM (flavor ``hw:tpm_version``, image
    ``hw_tpm_version``, or a secret already made) would delete the secret
    of the instance, which still lives on its source. Its disks are then
    kept, and refuse the next evacuation of it here like any kept
    leftover. When the instance cannot be read, they are kept too.
    """
    release = version.version_string()
    if not deletes_vtpm_secret(release):
        return None
    try:
        vtpm = bool(instance.system_metadata.get('vtpm_secret_uuid') or
                    hardware.get_vtpm_constraint(instance.flavor,
                                                 instance.image_meta))
    except Exception:
        vtpm = True
    return vtpm and (
        'the instance has a vTPM, whose secret nova %s deletes with its '
        'disks (bug 2125030)' % release) or None
