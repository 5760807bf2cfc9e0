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

"""Destroy the guest an evacuation made on this host, as it was made here.

The guest was spawned with this host's resources, which the instance's
migration context holds (``new_numa_topology``, ``new_pci_devices``,
``new_pci_requests``, ``new_resources``): the driver must see them to
release what the guest used here (libvirt powers down its dedicated CPUs
and zeroes its vPMEM namespaces). nova applies them for spawn with
``instance.mutated_migration_context()``, but the driver's cleanup saves
the instance it is given (libvirt's ``_cleanup`` records ``clean_attempts``
and ``cleaned``), and a save inside that context writes this host's
NUMA topology, PCI requests and resources onto an instance that stays on
its source host, where its next boot would be pinned wrongly (the context
manager's own docstring warns against it).

So the driver gets a copy of the instance with this host's resources
applied, whose saves write the instance's own resources: whatever the
driver records is saved, this host's resources never are. When the
migration context is gone (nova's claim was already aborted), the copy
carries no NUMA topology, PCI devices or resources: the driver then
releases nothing it cannot name, rather than the source host's CPUs or
vPMEMs.
"""

from nova.compute import power_state
from nova import exception
from nova.objects import instance as instance_obj
from oslo_log import log as logging
from oslo_utils import excutils

LOG = logging.getLogger(__name__)

#: The instance fields the migration context holds for each host.
_RESOURCES = tuple(instance_obj._MIGRATION_CONTEXT_ATTRS)


def as_made_here(instance, resources_known=True):
    """A copy of ``instance`` as its guest was made on this host.

    Saving the copy saves what else changed on it with the instance's own
    resources, never this host's.

    :param resources_known: whether the instance's migration context holds
        the resources the guest was made with; False for the guest of an
        earlier evacuation, whose claim is gone
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
    """``driver.destroy`` of the guest on this host; see the module doc.

    Should it fail, the guest is at least powered off: left running, it
    would be a second writer on the server's volumes and shared disks
    once its source runs it again. The destroy's error is re-raised.
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


def state(driver, instance):
    """None, ``'running'`` or ``'defined'``: the guest on this host."""
    try:
        if not driver.instance_exists(instance):
            return None
        running = driver.get_info(instance).state == power_state.RUNNING
    except exception.InstanceNotFound:
        return None
    return 'running' if running else 'defined'
