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
destination (``setup_instance_network_on_host``) and moves its volume
attachments there (``detach_block_devices``, ``_prep_block_device``).
When it fails nothing moves them back: the destination's cleanup
(:mod:`~nova_evac_cleanup.unwind`) replaces its attachments by reserved
ones and never binds a port to a dead source (its agent would refuse);
nova's periodic ``_heal_instance_info_cache`` is off by default since nova
31 and passes no provider mappings, ``_init_instance`` skips a server in
ERROR, a hard reboot neither rebinds ports nor refreshes volume
connection info. The source takes them back (:func:`give_back_all`) as
its nova-compute starts, before nova's ``init_host`` touches a guest, for
each server hosted here with no task state whose newest evacuation left
from here and failed:

* volumes: each mapping that names an attachment no guest uses (reserved,
  or updated and never completed) is connected for this host with nova's
  own steps for a reverted resize (:func:`connect`). Nothing is
  disconnected here: a guest still running here (only nova-compute was
  down) keeps its devices, and no host disconnects a connection it never
  made;
* ports: bound to this host with the provider mappings of the server's
  allocation in this host's provider tree, as nova's revert of a resize
  does (:func:`bind`): a port with a resource request keeps its
  allocation's provider, and an SR-IOV port gets this host's PCI device
  (nova reads it from the instance).

Each counts as given back only once cinder and neutron say so: the
attachment ``attached``, the port bound here with a working vif type (not
``binding_failed``: ML2's agent-based drivers and OVN refuse to bind to a
host whose agent is not alive yet, the normal order after a reboot). What
is not back is tried again by the manager's periodic task, every
:data:`SPACING` seconds, :data:`TRIES` times in all; at the last try one
WARNING per port and volume says what to run, and ``nova-evac-cleanup
audit`` lists them (:func:`left`). The destination logs, per port, the
commands that bind it back by hand (:func:`report`).
"""

import json

from nova import exception
from nova.network import model as network_model
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
#: Seconds between the manager's periodic tries of what is not back yet.
SPACING = 60
#: How many times a server is tried: at start-up, then once a periodic
#: task's spacing after the other (about ten minutes in all).
TRIES = 10


class Tries(object):
    """What this process tried, by ``(instance uuid, migration uuid)``."""

    def __init__(self):
        #: how many times each server not given back whole was tried
        self.count = {}
        #: the servers given back whole
        self.done = set()

    def due(self, key):
        return key not in self.done and self.count.get(key, 0) < TRIES

    def pending(self):
        """The instance uuids to try again."""
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
    return [instance for instance in objects.InstanceList.get_by_host(
        context, manager.host, expected_attrs=[]) if instance.uuid in uuids]


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
    volumes = _volumes(manager, context, instance)
    ports = _not_home(manager, context, instance)
    errors = {}
    for bdm in volumes:
        errors[bdm.volume_id] = connect(manager, context, instance, bdm)
    if ports:
        errors.update(bind(manager, context, instance, ports))
    volumes_left = _volumes(manager, context, instance) if volumes else []
    ports_left = _not_home(manager, context, instance) if ports else []
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
        LOG.info('%s: volumes %s, ports %s (%s)', why,
                 [bdm.volume_id for bdm in volumes_left],
                 ['%s: %s on %s' % (port['id'], port.get('binding:vif_type'),
                                    port.get('binding:host_id'))
                  for port in ports_left],
                 errors, instance=instance)
        return
    report(manager, context, instance, manager.host, ports_left, why)
    for bdm in volumes_left:
        LOG.warning('Volume %s of the server is not connected on %s (%s: '
                    '%s): once checked, run: %s', bdm.volume_id,
                    manager.host, why, errors.get(bdm.volume_id),
                    ' && '.join(runbook.refresh_volumes(
                        manager.host, instance.uuid, [bdm.volume_id])),
                    instance=instance)


def _volumes(manager, context, instance):
    """The server's volume mappings whose attachment no guest uses."""
    return [bdm for bdm in objects.BlockDeviceMappingList.
            get_by_instance_uuid(context, instance.uuid)
            if bdm.is_volume and bdm.attachment_id and
            _unused(manager, context, bdm)]


def bind(manager, context, instance, ports):
    """Bind ``ports`` here. Never raises.

    :returns: the error of each port, by port id
    """
    try:
        mappings = provider_mappings(manager, context, instance, manager.host)
        manager.network_api.setup_instance_network_on_host(
            context, instance, manager.host, provider_mappings=mappings)
        manager.network_api.get_instance_nw_info(context, instance)
    except Exception as error:
        return {port['id']: str(error) for port in ports}
    return {}


def _unused(manager, context, bdm):
    """Whether no guest uses the mapping's attachment: never completed.

    Reserved (no connector: what the destination's cleanup, or nova's
    ``detach_block_devices``, left), or updated with a connector and not
    completed (this give-back, or the destination's, cut short). Once
    connected, cinder's status is in the connection info (nova's
    ``_translate_attachment_ref``).
    """
    attachment = manager.volume_api.attachment_get(context,
                                                   bdm.attachment_id)
    info = attachment.get('connection_info') or attachment
    return info.get('status') in ('reserved', 'attaching')


def connect(manager, context, instance, bdm):
    """Connect one volume of the server for this host. Never raises.

    nova's own steps, as ``finish_revert_resize`` takes them for the
    source of a resize: the attachment updated with this host's
    connector (cinder exports the volume here again), the mapping's
    connection info saved from cinder's answer, the attachment completed
    (the volume ``in-use``). Nothing is disconnected. An attachment a
    newer operation replaced since it was read is gone (cinder answers
    NotFound): left to that operation.

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


def _not_home(manager, context, instance):
    """The ports of ``instance`` not bound to its host, or refused there."""
    return [port for port in manager.network_api.list_ports(
        context, device_id=instance.uuid)['ports']
        if not home(port, instance.host)]


def provider_mappings(manager, context, instance, host):
    """nova's request group mapping of the server's ports on ``host``.

    From its allocation in the provider tree of its node there, as nova's
    ``_fill_provider_mapping_based_on_allocs``; None without a port with
    a resource request.
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
    with a working vif type and the volumes not connected here, and the
    commands that do it by hand.
    """
    result = []
    for instance in _servers(manager, context, (), True):
        migration = evacuation(context, manager.host, instance)
        if migration is None:
            continue
        ports = _not_home(manager, context, instance)
        volumes = [bdm.volume_id for bdm in _volumes(manager, context,
                                                     instance)]
        if ports or volumes:
            result.append({
                'instance': instance.uuid, 'migration': migration.uuid,
                'ports': {port['id']: '%s on %s' % (
                    port.get('binding:vif_type'),
                    port.get('binding:host_id')) for port in ports},
                'volumes': volumes,
                'commands': commands(manager, context, instance, ports) + (
                    runbook.refresh_volumes(manager.host, instance.uuid,
                                            volumes) if volumes else [])})
    return result


def report_away(manager, context, instance, why):
    """Log the commands that bind the ports away from its host back.

    Once per port, for each port not bound to ``instance.host`` (the
    evacuation's source once it failed). Never raises.
    """
    try:
        away = _not_home(manager, context, instance)
        if away:
            report(manager, context, instance, instance.host, away, why)
    except Exception:
        LOG.exception('Could not read the ports of the failed evacuation to '
                      '%s', manager.host, instance=instance)


def commands(manager, context, instance, ports):
    """The commands that bind ``ports`` to the server's host by hand."""
    return [command for port in ports
            for command in _port_commands(manager, context, instance, port)]


def _port_commands(manager, context, instance, port, mappings=None):
    source = instance.host
    result = ['openstack port set --host %s %s' % (source, port['id'])]
    if port.get('resource_request'):
        try:
            mappings = mappings or provider_mappings(manager, context,
                                                     instance, source)
            allocation = mappings and manager.network_api.\
                get_binding_profile_allocation(context, port['id'], mappings)
        except Exception:
            allocation = None
        result.insert(0, 'openstack port set --binding-profile '
                      '\'{"allocation": %s}\' %s' % (json.dumps(
                          allocation or 'PROVIDER_ON_%s' % source),
                          port['id']))
    return result


def report(manager, context, instance, source, ports, why):
    """Log, once per port, the commands that bind it to ``source``."""
    for port in ports:
        caveat = ''
        if port.get('resource_request'):
            caveat = ('; the allocation names the providers of the '
                      'server\'s allocation on %s (openstack resource '
                      'provider allocation show %s)' % (source, instance.uuid))
        LOG.warning('Port %s of the server is bound to %s (%s, %s): once '
                    'nova-compute and the network agent run on %s, run: '
                    '%s%s', port['id'], port.get('binding:host_id'),
                    port.get('binding:vif_type'), why, source, ' && '.join(
                        _port_commands(manager, context, instance, port)),
                    caveat, instance=instance)
