# SPDX-License-Identifier: Apache-2.0

"""The guest an evacuation made on this host: its state, and its destroy."""

from nova.compute import power_state
from nova import exception
from nova.objects import instance as instance_obj
from oslo_log import log as logging

from nova_evac_cleanup import ownership
from nova_evac_cleanup import volumes

LOG = logging.getLogger(__name__)
_RESOURCES = tuple(instance_obj._MIGRATION_CONTEXT_ATTRS)
#: What :func:`end` says of a guest it could not destroy.
POWERED_OFF = 'powered off'


def as_made_here(instance, resources_known=True):
    """A copy of ``instance`` as its guest was made here; saves write its own.

    The driver releases what the guest got here (dedicated CPUs, vPMEM) only
    if it sees it, but it saves the instance (``clean_attempts``): that would
    write this host's resources onto an instance that stays on its source.
    With no migration context, or ``resources_known`` False (an earlier
    evacuation's guest), the copy names none and the driver releases none.
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


def end(manager, context, instance, entry, network_info=None,
        block_device_info=None, resources_known=True):
    """Destroy ``entry``'s guest; its disks only with proof, taken now.

    :returns: the guest's :func:`state` before (or :data:`POWERED_OFF`:
        kept, not destroyed), and why its disks were kept (None: removed)
    """
    driver = manager.driver
    present = state(driver, instance)
    owns, why = ownership.proof(entry)
    if network_info is None:
        network_info = instance.get_network_info()
    block_device_info = block_device_info or volumes.block_device_info(
        manager, context, instance, entry)
    view = as_made_here(instance, resources_known)
    try:
        driver.destroy(context, view, network_info,
                       block_device_info=block_device_info,
                       destroy_disks=owns)
    except Exception:
        # Left running it would write on the server's disks with its source;
        # powered off, it is kept for the next evacuation here to destroy.
        try:
            driver.power_off(view)
        except Exception:
            LOG.exception('Could not power off the guest either',
                          instance=instance)
        if state(driver, instance) == 'running':
            raise
        LOG.exception('Evacuation %s to %s (%s): could not destroy its '
                      'guest; it is kept, powered off, and the next '
                      'evacuation of the server here destroys it first',
                      entry.migration_uuid, entry.host, entry.error or
                      'interrupted', instance_uuid=entry.instance_uuid)
        return POWERED_OFF, 'it could not be destroyed'
    return present, why


def state(driver, instance):
    """None, ``'running'`` or ``'defined'``: the guest on this host."""
    try:
        if driver.instance_exists(instance):
            running = driver.get_info(instance).state == power_state.RUNNING
            return 'running' if running else 'defined'
    except exception.InstanceNotFound:
        pass
    return None
