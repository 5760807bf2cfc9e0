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

"""The nova releases this project was written for, checked at start-up.

The mixin overrides ``rebuild_instance`` and ``_do_rebuild_instance`` of
nova's ``ComputeManager``, and watches three calls that nova makes
during an evacuation: the driver's ``instance_on_disk`` and ``spawn``
and the resource tracker's ``finish_evacuation``
(:meth:`~nova_evac_cleanup.manager.EvacuateCleanupMixin._watch`). It
reads no frame and no bytecode: what
it relies on is the parameters of those methods, and of the private
helpers of nova it calls (:data:`HELPERS`), checked here with
``inspect.signature``.

Nothing here stops nova-compute from starting, and no degraded mode
falls below the cleanup of a failed spawn, since nova's own behaviour is
the bug. A nova whose hooked methods changed, or that carries this
project's patch series already, gets one error and runs as nova's own
(:func:`problems`): the hooks cannot be trusted there, or the series
cleans up itself. A changed private helper gets one error, and the part
that calls it logs its commands instead (:func:`helper`). A release
outside the range ``requirements.txt`` states, or package metadata that
cannot be read, gets one error and the cleanup all the same
(:func:`release_problem`); on the releases whose libvirt driver deletes
the instance's vTPM secret with its disks, the disks of an instance with
a vTPM are kept (:func:`vtpm_hazard`). The unit tests compare the same
signatures, so a nova update that changes them is caught before it
ships.
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
from packaging import requirements as packaging_requirements
from packaging import specifiers
from packaging import version as packaging_version

#: The distribution whose metadata states the nova releases supported.
DISTRIBUTION = 'nova-evac-cleanup'


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


#: The parameters of the nova methods the mixin overrides, as nova 31.0.0
#: to 34.0.0 define them.
OVERRIDDEN = {
    'init_host': ('self', 'service_ref'),
    'cleanup_host': ('self',),
    'rebuild_instance': (
        'self', 'context', 'instance', 'orig_image_ref', 'image_ref',
        'injected_files', 'new_pass', 'orig_sys_metadata', 'bdms',
        'recreate', 'on_shared_storage', 'preserve_ephemeral', 'migration',
        'scheduled_node', 'limits', 'request_spec', 'accel_uuids',
        'reimage_boot_volume', 'target_state'),
    '_detach_volume': ('self', 'context', 'bdm', 'instance', 'destroy_bdm',
                       'attachment_id'),
    '_do_rebuild_instance': (
        'self', 'context', 'instance', 'orig_image_ref', 'image_meta',
        'injected_files', 'new_pass', 'orig_sys_metadata', 'bdms',
        'evacuate', 'on_shared_storage', 'preserve_ephemeral', 'migration',
        'request_spec', 'allocations',
        'request_group_resource_providers_mapping', 'accel_uuids',
        'reimage_boot_volume', 'target_state'),
}
#: What the watch of the driver's spawn reads from its arguments.
SPAWN_ARGUMENTS = ('context', 'instance', 'network_info',
                   'block_device_info')
#: The resource tracker's ``finish_evacuation``, as nova 31 to 34 define it.
FINISH_EVACUATION = ('self', 'instance', 'node', 'migration')


#: nova's private helpers the package calls, with their parameters as
#: nova 31 to 34 define them: a nova that renamed or changed one would
#: break the part that calls it at run time, silently. Checked at start-up
#: (:func:`helper_problems`) and at each call (:func:`helper`).
HELPERS = {
    # The volume connections a failed evacuation made, released; the
    # source's give-back connecting them there again.
    '_terminate_volume_connections': (
        nova_manager.ComputeManager, ('self', 'context', 'instance', 'bdms')),
    '_get_instance_block_device_info': (
        nova_manager.ComputeManager,
        ('self', 'context', 'instance', 'refresh_conn_info', 'bdms')),
    '_update_volume_attachments': (
        nova_manager.ComputeManager, ('self', 'context', 'instance', 'bdms')),
    '_complete_volume_attachments': (
        nova_manager.ComputeManager, ('self', 'context', 'bdms')),
    # The source's give-back binding a port with a PCI device or a
    # resource request there again.
    '_get_port_pci_dev': (neutron.API, ('self', 'instance', 'port')),
    '_get_pci_device_profile': (neutron.API, ('self', 'pci_dev')),
    '_has_resource_request': (
        neutron.API, ('self', 'context', 'port', 'neutron')),
    '_get_binding_profile_allocation': (
        neutron.API, ('self', 'context', 'port', 'neutron',
                      'resource_provider_mapping')),
}


class HelperChanged(Exception):
    """This nova lacks a private helper the package calls, or changed it."""


@functools.lru_cache()
def _changed_helpers():
    """Why each private helper this nova lacks or changed is, by name."""
    result = {}
    for name, (owner, expected) in HELPERS.items():
        method = getattr(owner, name, None)
        found = None if method is None else _parameters(method)
        if found != expected:
            result[name] = '%s.%s(%s) expected, %s found' % (
                owner.__name__, name, ', '.join(expected),
                'no such method' if found is None else
                '(%s)' % ', '.join(found))
    return result


def helper_problems():
    """The private helpers this nova lacks or changed, as sentences."""
    return [why for _name, why in sorted(_changed_helpers().items())]


def helper(obj, name):
    """``obj``'s private nova helper ``name`` (one of :data:`HELPERS`).

    :raises HelperChanged: this nova lacks it or changed its parameters
        (the manager logged it at start-up): the caller's part degrades
    """
    why = _changed_helpers().get(name)
    if why:
        raise HelperChanged(why)
    return getattr(obj, name)


def _parameters(method):
    # nova's RPC decorators hide the method behind (*args, **kwargs).
    return tuple(inspect.signature(
        safe_utils.get_wrapped_function(method)).parameters)


def mismatches(manager_class=nova_manager.ComputeManager):
    """The overridden methods whose parameters differ in this nova.

    :returns: a list of ``(name, expected, found)``; empty when all match
    """
    result = []
    for name, expected in sorted(OVERRIDDEN.items()):
        method = getattr(manager_class, name, None)
        found = None if method is None else _parameters(method)
        if found != expected:
            result.append((name, expected, found))
    return result


def named(method, args, kwargs):
    """The arguments of a call of nova's ``method``, all by name.

    Only used once :func:`problems` found its parameters to be the
    expected ones.
    """
    result = dict(zip(OVERRIDDEN[method][1:], args))
    result.update(kwargs)
    return result


def nova_has_the_fix(manager_class=nova_manager.ComputeManager):
    """Whether the installed nova carries this project's patch series.

    The series gives nova's ``_rebuild_default_impl`` its own
    ``on_shared_storage`` argument; the mixin and the patch must not both
    clean up.
    """
    method = getattr(manager_class, '_rebuild_default_impl', None)
    return method is not None and (
        'on_shared_storage' in inspect.signature(method).parameters)


def spawn_problem():
    """Why the drivers' ``spawn`` cannot be watched, or None."""
    parameters = inspect.signature(virt_driver.ComputeDriver.spawn).parameters
    missing = [name for name in SPAWN_ARGUMENTS if name not in parameters]
    if missing:
        return 'the driver\'s spawn has no %s parameter' % ', '.join(missing)
    return None


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


def finish_problem(tracker_class=resource_tracker.ResourceTracker):
    """Why ``finish_evacuation`` cannot be watched, or None."""
    method = getattr(tracker_class, 'finish_evacuation', None)
    found = None if method is None else _parameters(method)
    if found != FINISH_EVACUATION:
        return 'ResourceTracker.finish_evacuation(%s) expected, %s found' % (
            ', '.join(FINISH_EVACUATION),
            'no such method' if found is None else '(%s)' % ', '.join(found))
    return None


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


def problems(manager_class=nova_manager.ComputeManager):
    """Why the hooks of the cleanup cannot be trusted; empty when they can.

    :returns: a list of sentences
    """
    if nova_has_the_fix(manager_class):
        return ['this nova already destroys the guest of a failed '
                'evacuation (the nova-evac-cleanup patch series is applied)']
    result = [
        'ComputeManager.%s(%s) expected, %s found' % (
            name, ', '.join(expected),
            'no such method' if found is None else
            '(%s)' % ', '.join(found))
        for name, expected, found in mismatches(manager_class)]
    problem = spawn_problem()
    if problem:
        result.append(problem)
    return result
