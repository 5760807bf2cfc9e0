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

"""Give a failed evacuation's server back to its source host, whole.

Before it spawns, nova's evacuation binds the server's ports to the
destination and moves its volume attachments there; when it fails nothing
moves them back (the destination's cleanup, :mod:`~nova_evac_cleanup.
unwind`, leaves the attachments reserved and never binds a port to a dead
source). nova's own heal of the ports is off by default since nova 31,
``_init_instance`` skips a server in ERROR, a hard reboot neither rebinds
ports nor refreshes connection info. So the source takes them back, as its
nova-compute starts (before nova's ``init_host`` touches a guest) and then
every :data:`SPACING` seconds (the manager's periodic task), for each
server hosted here with no task state whose newest migration is an
evacuation from here that failed (:func:`evacuation`):

* volumes: each mapping naming an attachment no guest uses (reserved, or
  updated and never completed) is connected for this host with nova's own
  steps for a reverted resize (:func:`connect`); nothing is disconnected
  here, so a guest still running here keeps its devices;
* ports: each port not bound here with a working vif type is bound here as
  nova's unshelve would (:func:`binding`): the provider mappings of the
  server's allocation on this host, this host's PCI device for SR-IOV.

Never over a newer operation (nova's evacuate API checks no task state):
the ports and attachments are read, then the evacuation is confirmed to
be still the server's newest migration, then each port is updated only at
the revision read (neutron's ``If-Match``) and each attachment by the id
read. An HA retry accepted since changes the port's revision (412) and
deletes the attachment (NotFound): both are left to it.

Each counts as given back once neutron and cinder say so; what is not
(a binding refused because the host's agent is not alive yet, the normal
order after a reboot; a cinder error) is tried again, :data:`TRIES` times
in all. At the last try one WARNING per port and volume gives the
commands; ``nova-evac-cleanup audit`` lists them (:func:`left`).
"""

import json

from neutronclient.common import exceptions as neutron_exceptions
from nova import exception
from nova.network import model as network_model
from nova.network import neutron
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)

#: The statuses of an evacuation nova or this project ended as failed.
FAILED = ('failed', 'error')
#: What neutron answers for a binding its mechanism drivers refused.
REFUSED = (network_model.VIF_TYPE_BINDING_FAILED,
           network_model.VIF_TYPE_UNBOUND)
#: Seconds between the periodic tries of what is not back yet.
SPACING = 60
#: Tries of a server in all: at start-up, then one per periodic run.
TRIES = 10


class Tries(object):
    """What this process tried, by ``(instance uuid, migration uuid)``."""

    def __init__(self):
        self.count, self.done = {}, set()

    def due(self, key):
        return key not in self.done and self.count.get(key, 0) < TRIES

    def pending(self):
        return {uuid for (uuid, _m), n in self.count.items() if n < TRIES}


def give_back_all(manager, context, tries, start=False):
    """Give back what failed evacuations from this host left elsewhere.

    At start-up, the servers of this host's failed evacuations; then
    those not given back whole yet. Never raises.
    """
    try:
        instances = _servers(manager, context, tries.pending(), start)
    except Exception:
        LOG.exception('Could not look for failed evacuations from %s',
                      manager.host)
        return
    for instance in instances:
        try:
            give_back(manager, context, instance, tries)
        except Exception:
            LOG.exception('Could not give the server of the failed '
                          'evacuation back to %s', manager.host,
                          instance=instance)


def _servers(manager, context, uuids, history):
    """The servers hosted here among ``uuids``, and ``history``'s.

    With ``history``, also those of this host's failed evacuations.
    """
    uuids = set(uuids)
    if history:
        uuids.update(m.instance_uuid for m in objects.MigrationList.
                     get_by_filters(context, {
                         'source_compute': manager.host,
                         'migration_type': 'evacuation',
                         'status': list(FAILED)}))
    if not uuids:
        return []
    return objects.InstanceList.get_by_filters(
        context, {'uuid': sorted(uuids), 'host': manager.host,
                  'deleted': False}, expected_attrs=[])


def evacuation(context, host, instance):
    """The failed evacuation from ``host`` that left ``instance`` here.

    :returns: the migration, or None: the server is not hosted here, has a
        task state, or its newest evacuation did not fail from here
    """
    if instance.host != host or instance.task_state is not None:
        return None
    newest = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance.uuid,
                  'migration_type': 'evacuation'},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], limit=1)
    if newest and newest[0].status in FAILED and (
            newest[0].source_compute == host):
        return newest[0]
    return None


def give_back(manager, context, instance, tries):
    """Give one server its volumes and ports back here, if it is due."""
    migration = evacuation(context, manager.host, instance)
    key = (instance.uuid, migration and migration.uuid)
    if migration is None or not tries.due(key):
        return
    client = neutron.get_client(context, admin=True)
    volumes = _volumes(manager, context, instance)
    ports = _not_home(client, instance)
    if (volumes or ports) and getattr(evacuation(
            context, manager.host, objects.Instance.get_by_uuid(
                context, instance.uuid, expected_attrs=[])),
            'uuid', None) != migration.uuid:
        LOG.info('Evacuation %s from %s: the server moved on; left alone',
                 migration.uuid, manager.host, instance=instance)
        return
    errors = {bdm.volume_id: connect(manager, context, instance, bdm)
              for bdm in volumes}
    if ports:
        errors.update(bind(manager, context, instance, client, ports))
    volumes_left = _volumes(manager, context, instance) if volumes else []
    ports_left = _not_home(client, instance) if ports else []
    if not (volumes_left or ports_left):
        tries.done.add(key)
        if volumes or ports:
            LOG.warning('Evacuation %s from %s failed: gave back to %s the '
                        'server\'s volumes %s and ports %s', migration.uuid,
                        manager.host, manager.host,
                        [bdm.volume_id for bdm in volumes],
                        [port['id'] for port in ports], instance=instance)
        return
    count = tries.count[key] = tries.count.get(key, 0) + 1
    why = 'evacuation %s from %s failed; not given back after %d of %d ' \
        'tries' % (migration.uuid, manager.host, count, TRIES)
    if count < TRIES:
        LOG.info('%s: volumes %s, ports %s: %s', why,
                 [bdm.volume_id for bdm in volumes_left],
                 [port['id'] for port in ports_left], errors,
                 instance=instance)
        return
    report(manager, context, instance, ports_left, why)
    for bdm in volumes_left:
        LOG.warning('Volume %s of the server is not connected on %s (%s: '
                    '%s): once checked, run: %s', bdm.volume_id,
                    manager.host, why, errors.get(bdm.volume_id),
                    ' && '.join(runbook.refresh_volumes(
                        manager.host, instance.uuid, [bdm.volume_id])),
                    instance=instance)


def _volumes(manager, context, instance):
    """The server's volume mappings whose attachment no guest uses.

    Reserved (no connector: what the destination's cleanup, or nova's
    ``detach_block_devices``, left), or updated with a connector and not
    completed (a give-back cut short). Once connected, cinder's status is
    in the connection info (nova's ``_translate_attachment_ref``).
    """
    result = []
    for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid):
        if bdm.is_volume and bdm.attachment_id:
            attachment = manager.volume_api.attachment_get(
                context, bdm.attachment_id)
            info = attachment.get('connection_info') or attachment
            if info.get('status') in ('reserved', 'attaching'):
                result.append(bdm)
    return result


def connect(manager, context, instance, bdm):
    """Connect one volume of the server for this host. Never raises.

    nova's own steps, as ``finish_revert_resize`` takes them: the
    attachment updated with this host's connector (cinder exports the
    volume here again), the mapping's connection info refreshed from
    cinder's answer, the attachment completed (the volume ``in-use``).
    An attachment replaced since it was read is gone (NotFound): left to
    the operation that replaced it.

    :returns: None, or the error
    """
    try:
        manager._update_volume_attachments(context, instance, [bdm])
        manager._get_instance_block_device_info(
            context, instance, refresh_conn_info=True, bdms=[bdm])
        manager._complete_volume_attachments(context, [bdm])
    except exception.VolumeAttachmentNotFound:
        LOG.warning('Volume %s: attachment %s was replaced since it was '
                    'read; left to the operation that replaced it',
                    bdm.volume_id, bdm.attachment_id, instance=instance)
    except Exception as error:
        LOG.info('Could not connect volume %s on %s: %s', bdm.volume_id,
                 manager.host, error, instance=instance)
        return str(error)
    return None


def home(port, host):
    """Whether neutron says ``port`` is bound to ``host`` and works there."""
    return (port.get('binding:host_id') == host and
            port.get('binding:vif_type') not in REFUSED)


def _not_home(client, instance):
    """The ports of ``instance`` not bound to its host, or refused there."""
    return [port for port in client.list_ports(
        device_id=instance.uuid)['ports'] if not home(port, instance.host)]


def bind(manager, context, instance, client, ports):
    """Bind each port here at the revision read. Never raises.

    :returns: the error of each port not bound, by port id
    """
    errors = {}
    try:
        mappings = provider_mappings(manager, context, instance, manager.host)
    except Exception as error:
        mappings = error
    for port in ports:
        try:
            client.update_port(port['id'], {'port': binding(
                manager, context, instance, client, port, mappings)},
                revision_number=port['revision_number'])
        except neutron_exceptions.NeutronClientException as error:
            errors[port['id']] = str(error)
            if error.status_code == 412:
                LOG.warning('Port %s changed since it was read; left to the '
                            'operation that changed it', port['id'],
                            instance=instance)
        except Exception as error:
            errors[port['id']] = str(error)
    if len(errors) < len(ports):
        manager.network_api.get_instance_nw_info(context, instance)
    return errors


def binding(manager, context, instance, client, port, mappings):
    """What nova's ``_update_port_binding_for_instance`` sets, for here.

    As for an unshelve (no migration): ``binding:host_id`` this host, the
    pre-migration status dropped, an SR-IOV port's PCI device the one the
    instance has here, a resource request's allocation the providers of
    the server's allocation in this host's tree.
    """
    api = manager.network_api
    profile = dict(port.get('binding:profile') or {})
    profile.pop('migrating_to', None)
    if port.get('binding:vnic_type') in network_model.VNIC_TYPES_SRIOV:
        device = api._get_port_pci_dev(instance, port)
        if device:
            profile.update(api._get_pci_device_profile(device))
    if api._has_resource_request(context, port, client):
        if isinstance(mappings, Exception) or not mappings:
            raise exception.PortUpdateFailed(port_id=port['id'], reason=(
                'no provider on %s to map its resource request to (%s): run'
                ' nova-manage placement heal_allocations --instance %s' % (
                    manager.host, mappings, instance.uuid)))
        profile['allocation'] = api._get_binding_profile_allocation(
            context, port, client, mappings)
    return {'binding:host_id': manager.host, 'binding:profile': profile,
            'device_owner': 'compute:%s' % instance.availability_zone}


def provider_mappings(manager, context, instance, host):
    """nova's request group mapping of the server's ports on ``host``.

    From its allocation in the provider tree of its node there, as nova's
    ``_fill_provider_mapping_based_on_allocs``; None without a port with
    a resource request. Raises if nothing there fits (no allocation).
    """
    groups, _params = manager.network_api.get_requested_resource_for_instance(
        context, instance.uuid)
    if not groups:
        return None
    node = objects.ComputeNode.get_by_host_and_nodename(
        context, host, instance.node)
    tree = {rp['uuid'] for rp in manager.reportclient.get_providers_in_tree(
        context, node.uuid)}
    allocations = manager.reportclient.get_allocs_for_consumer(
        context, instance.uuid)['allocations']
    spec = objects.RequestSpec(requested_resources=groups)
    scheduler_utils.fill_provider_mapping_based_on_allocation(
        context, manager.reportclient, spec,
        {rp: alloc for rp, alloc in allocations.items() if rp in tree})
    return spec.get_request_group_mapping()


def left(manager, context):
    """What failed evacuations from here did not give back; reads only.

    For ``nova-evac-cleanup audit``: per server, the ports not bound here
    with a working vif type, the volumes not connected here, and the
    commands that do it by hand.
    """
    result = []
    for instance in _servers(manager, context, (), True):
        migration = evacuation(context, manager.host, instance)
        ports = migration and _not_home(
            neutron.get_client(context, admin=True), instance)
        volumes = migration and [bdm.volume_id for bdm in _volumes(
            manager, context, instance)]
        if ports or volumes:
            result.append({
                'instance': instance.uuid, 'migration': migration.uuid,
                'ports': {port['id']: '%s on %s' % (
                    port.get('binding:vif_type'),
                    port.get('binding:host_id')) for port in ports},
                'volumes': volumes,
                'commands': [c for port in ports for c in _commands(
                    manager, context, instance, port)] + (
                    runbook.refresh_volumes(manager.host, instance.uuid,
                                            volumes) if volumes else [])})
    return result


def report_away(manager, context, instance, why):
    """Log the commands that bind the ports away from its host back.

    Once per port not bound to ``instance.host`` (the evacuation's source
    once it failed) with a working vif type. Never raises.
    """
    try:
        report(manager, context, instance, _not_home(
            neutron.get_client(context, admin=True), instance), why)
    except Exception:
        LOG.exception('Could not read the ports of the failed evacuation to '
                      '%s', manager.host, instance=instance)


def _commands(manager, context, instance, port):
    """The commands that bind ``port`` to the server's host by hand."""
    result = ['openstack port set --host %s %s' % (instance.host, port['id'])]
    if port.get('resource_request'):
        try:
            allocation = manager.network_api.get_binding_profile_allocation(
                context, port['id'], provider_mappings(
                    manager, context, instance, instance.host))
        except Exception:
            allocation = None
        result.insert(0, 'openstack port set --binding-profile '
                      '\'{"allocation": %s}\' %s' % (json.dumps(
                          allocation or 'PROVIDER_ON_%s' % instance.host),
                          port['id']))
    return result


def report(manager, context, instance, ports, why):
    """Log, once per port, the commands that bind it to its server's host."""
    for port in ports:
        LOG.warning('Port %s of the server is bound to %s (%s, %s): once '
                    'nova-compute and the network agent run on %s, run: '
                    '%s%s', port['id'], port.get('binding:host_id'),
                    port.get('binding:vif_type'), why, instance.host,
                    ' && '.join(_commands(manager, context, instance, port)),
                    '; the allocation names the providers of the server\'s '
                    'allocation on %s (openstack resource provider '
                    'allocation show %s)' % (instance.host, instance.uuid)
                    if port.get('resource_request') else '',
                    instance=instance)
