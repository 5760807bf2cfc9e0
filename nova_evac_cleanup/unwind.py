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

"""Put back what a failed evacuation moved to this host before spawning.

Before it spawns the guest, nova's evacuation binds the instance's ports to
the destination (``setup_instance_network_on_host``) and replaces each
volume attachment by one connected with the destination's connector
(``_prep_block_device``). When the evacuation fails nova undoes neither:
the server is ERROR on its source but half-moved, and a hard reboot there
uses a port binding and volume connection info that belong to the
destination.

:func:`unwind` does what nova's own rollbacks do, from the destination,
once the guest here is destroyed:

* the volume attachments of this host are replaced by reserved ones
  (nova's ``_terminate_volume_connections``, which ``revert_resize`` uses
  on the destination of a resize): this host keeps no connection to the
  volumes;
* the ports are bound to the source host again
  (``setup_instance_network_on_host``, as unshelve does, which takes the
  PCI devices of SR-IOV ports from the instance: the source's), unless a
  port has a resource request, whose placement allocation on the source
  only the source can name: then the commands are reported.

The volumes cannot be connected for the source from here (its connector is
only known there): the commands of ``nova-manage volume_attachment`` that
do it on the source are reported.
"""

from nova import objects
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def _resource_request_ports(network_info):
    """Ports bound with a placement allocation (a resource request)."""
    return [vif['id'] for vif in network_info
            if (vif.get('profile') or {}).get('allocation')]


def unwind(manager, context, instance, source, network_info=None):
    """Release this host's volume connections, rebind ports to ``source``.

    Call it only once the guest here is destroyed, with the instance still
    naming the failed or interrupted evacuation.

    :param source: the host the instance is on (the evacuation's source)
    :param network_info: the instance's network info, by default its cache
    :returns: ``(done, commands)``: what was put back, and what is left to
        run by hand, on the source
    """
    done, commands = [], []
    bdms = [bdm for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
        context, instance.uuid) if bdm.is_volume]
    if bdms:
        manager._terminate_volume_connections(context, instance, bdms)
        for bdm in bdms:
            done.append('replaced the attachment of volume %s on %s by a '
                        'reserved one (%s)' % (
                            bdm.volume_id, manager.host, bdm.attachment_id))
        # nova-manage volume_attachment refresh wants the server stopped.
        commands.extend([
            'once nova-compute runs on %s: openstack server set --state '
            'active %s' % (source, instance.uuid),
            'openstack server stop %s' % instance.uuid,
            'on %s: nova-manage volume_attachment get_connector > '
            'connector.json' % source])
        commands.extend(
            'nova-manage volume_attachment refresh %s %s connector.json' % (
                instance.uuid, bdm.volume_id) for bdm in bdms)
        commands.append('openstack server start %s' % instance.uuid)
    if network_info is None:
        network_info = instance.get_network_info()
    ports = [vif['id'] for vif in network_info]
    if ports:
        requesting = _resource_request_ports(network_info)
        if requesting:
            LOG.warning('Ports %s have a placement allocation: not bound '
                        'back to %s from here', ', '.join(requesting),
                        source, instance=instance)
            commands.extend('openstack port set --host %s %s' % (
                source, port) for port in ports)
        else:
            manager.network_api.setup_instance_network_on_host(
                context, instance, source)
            done.append('bound ports %s back to %s' % (
                ', '.join(ports), source))
    for item in done:
        LOG.info('Failed evacuation to %s: %s', manager.host, item,
                 instance=instance)
    if commands:
        LOG.warning('Failed evacuation to %s: to finish putting the server '
                    'back on %s, run: %s', manager.host, source,
                    ' && '.join(commands), instance=instance)
    return done, commands
