# SPDX-License-Identifier: Apache-2.0

"""The guest an evacuation made on this host: its state, and its destroy.

The guest was spawned with this host's resources, which the instance's
migration context holds (NUMA topology, PCI devices and requests,
resources): the driver must see them to release what the guest used here
(libvirt powers down its dedicated CPUs, zeroes its vPMEM namespaces). But
the driver's cleanup saves the instance it is given (libvirt records
``clean_attempts``), and a save inside ``mutated_migration_context()``
would write this host's resources onto an instance that stays on its
source (that context manager's own docstring warns against it). So the
driver gets a copy with this host's resources applied whose saves write
the instance's own. With the context gone (nova aborted its claim), the
copy names no such resource: the driver releases nothing it cannot name.
"""

from nova.compute import power_state
from nova import exception
from nova.objects import instance as instance_obj
from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import ownership
from nova_evac_cleanup import volumes

LOG = logging.getLogger(__name__)

#: The instance fields the migration context holds for each host.
_RESOURCES = tuple(instance_obj._MIGRATION_CONTEXT_ATTRS)


def as_made_here(instance, resources_known=True):
    """A copy of ``instance`` as its guest was made on this host.

    :param resources_known: whether the migration context holds what the
        guest was made with; False for an earlier evacuation's guest
    """
    own = {name: getattr(instance, name) for name in _RESOURCES}
    view = instance.obj_clone()
    if resources_known and view.migration_context is not None:
        view.apply_migration_context()
    else:
        for name in _RESOURCES:
            setattr(view, name, None)
    here = {name: getattr(view, name) for name in _RESOURCES}
    save = view.save

    def save_with_own_resources(*args, **kwargs):
        for name in _RESOURCES:
            setattr(view, name, own[name])
        try:
            return save(*args, **kwargs)
        finally:
            for name in _RESOURCES:
                setattr(view, name, here[name])

    view.save = save_with_own_resources
    return view


def destroy(driver, context, instance, network_info, block_device_info,
            destroy_disks, resources_known=True):
    """``driver.destroy`` of the guest as it was made here.

    Should it fail, the guest is at least powered off: left running, it
    would be a second writer on the server's volumes and shared disks once
    its source runs it again. The destroy's error is re-raised.
    """
    view = as_made_here(instance, resources_known)
    try:
        driver.destroy(context, view, network_info,
                       block_device_info=block_device_info,
                       destroy_disks=destroy_disks)
    except Exception:
        with excutils.save_and_reraise_exception():
            try:
                driver.power_off(view)
            except Exception:
                LOG.exception('Could not power off the guest either',
                              instance=instance)


def end(manager, context, instance, entry, network_info=None,
        block_device_info=None, resources_known=True):
    """Destroy the guest of ``entry``; its disks only with proof, taken now.

    A guest that could not be destroyed but is powered off is kept: the
    next evacuation of the server here destroys it first.

    :param network_info: and ``block_device_info``: what spawn was given;
        None for what the database says
    :returns: what was done, a sentence
    :raises: the destroy's error, if the guest still runs
    """
    driver = manager.driver
    present = state(driver, instance)
    owns, why = ownership.proof(entry)
    if network_info is None:
        network_info = instance.get_network_info()
    try:
        destroy(driver, context, instance, network_info,
                block_device_info or volumes.block_device_info(
                    manager, context, instance, entry),
                owns, resources_known)
    except Exception:
        if state(driver, instance) == 'running':
            raise
        LOG.exception('Evacuation %s to %s (%s): could not destroy its '
                      'guest; it is kept, powered off, and the next '
                      'evacuation of the server here destroys it first',
                      entry.migration_uuid, entry.host,
                      entry.error or 'interrupted',
                      instance_uuid=entry.instance_uuid)
        return 'kept the guest, powered off: it could not be destroyed'
    return '%s; %s' % (
        'destroyed the %s guest' % present if present else
        'no guest was defined; disconnected what spawn connected',
        'removed its disks (not on shared storage)' if owns else
        'kept its disks: %s' % why)


def state(driver, instance):
    """None, ``'running'`` or ``'defined'``: the guest on this host."""
    try:
        if not driver.instance_exists(instance):
            return None
        running = driver.get_info(instance).state == power_state.RUNNING
    except exception.InstanceNotFound:
        return None
    return 'running' if running else 'defined'
