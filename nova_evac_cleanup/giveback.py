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
connection info. The source, when its nova-compute starts and before
nova's ``init_host`` touches a guest (:func:`give_back`), takes them back
for each server hosted here with no task state whose newest evacuation
left from here and failed:

* volumes: each mapping that names an attachment no guest uses (reserved,
  or updated and never completed) is connected for this host with nova's
  own steps for a reverted resize: ``_update_volume_attachments`` (this
  host's connector: cinder exports the volume here again), the mapping's
  connection info refreshed from cinder's answer,
  ``_complete_volume_attachments``. Nothing is disconnected here: a guest
  still running here (only nova-compute was down) keeps its devices, and
  no host disconnects a connection it never made;
* ports: bound to this host with the provider mappings of the server's
  allocation in this host's provider tree, as nova's revert of a resize
  does: a port with a resource request keeps its allocation's provider,
  and an SR-IOV port gets this host's PCI device (nova reads it from the
  instance).

The destination logs, per port, the commands that do it by hand
(:func:`report`).
"""

import json

from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)

#: The statuses of an evacuation nova or this project ended as failed.
FAILED = ('failed', 'error')


def give_back(manager, context):
    """Take back the ports and volumes of servers whose evacuation failed.

    Only a server hosted here, with no task state, whose newest evacuation
    left from here and failed; only its volumes no guest uses and its
    ports bound to another host. Never raises: what cannot be done is
    logged with its commands.
    """
    try:
        failed = objects.MigrationList.get_by_filters(context, {
            'source_compute': manager.host, 'migration_type': 'evacuation',
            'status': list(FAILED)})
        uuids = {migration.instance_uuid for migration in failed}
        instances = [instance for instance in objects.InstanceList.
                     get_by_host(context, manager.host)
                     if instance.uuid in uuids]
    except Exception:
        LOG.exception('Could not look for failed evacuations from %s',
                      manager.host)
        return
    for instance in instances:
        try:
            _give_back(manager, context, instance)
        except Exception:
            LOG.exception('Could not give the server of the failed '
                          'evacuation back to %s', manager.host,
                          instance=instance)


def _give_back(manager, context, instance):
    newest = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance.uuid,
                  'migration_type': 'evacuation'},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], limit=1)
    if (instance.task_state is not None or not newest or
            newest[0].status not in FAILED):
        return
    for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid):
        if bdm.is_volume and bdm.attachment_id and _unused(
                manager, context, bdm):
            connect(manager, context, instance, bdm, newest[0])
    away = _away(manager, context, instance)
    if not away:
        return
    try:
        mappings = provider_mappings(manager, context, instance, manager.host)
        manager.network_api.setup_instance_network_on_host(
            context, instance, manager.host, provider_mappings=mappings)
        manager.network_api.get_instance_nw_info(context, instance)
    except Exception as error:
        report(manager, context, instance, manager.host, away, error)
        return
    LOG.warning('Evacuation %s from %s failed: bound ports %s back to %s',
                newest[0].uuid, manager.host,
                ', '.join(port['id'] for port in away), manager.host,
                instance=instance)


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


def connect(manager, context, instance, bdm, migration):
    """Connect one volume of the server for this host. Never raises.

    nova's own steps, as ``finish_revert_resize`` takes them for the
    source of a resize: the attachment updated with this host's
    connector, the mapping's connection info saved from cinder's answer,
    the attachment completed (the volume ``in-use``). Nothing is
    disconnected. An attachment a newer operation replaced since it was
    read is gone (cinder answers NotFound): left to that operation.
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
        return
    except Exception as error:
        LOG.warning('Evacuation %s from %s failed, and so did connecting '
                    'volume %s here again (%s): once checked, run: %s',
                    migration.uuid, manager.host, bdm.volume_id, error,
                    ' && '.join(runbook.refresh_volumes(
                        manager.host, instance.uuid, [bdm.volume_id])),
                    instance=instance)
        return
    LOG.warning('Evacuation %s from %s failed: volume %s connected here '
                'again (attachment %s)', migration.uuid, manager.host,
                bdm.volume_id, bdm.attachment_id, instance=instance)


def _away(manager, context, instance):
    """The ports of ``instance`` bound to another host than its own."""
    return [port for port in manager.network_api.list_ports(
        context, device_id=instance.uuid)['ports']
        if port.get('binding:host_id') != instance.host]


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


def report_away(manager, context, instance, why):
    """Log the commands that bind the ports away from its host back.

    Once per port, for each port not bound to ``instance.host`` (the
    evacuation's source once it failed). Never raises.
    """
    try:
        away = _away(manager, context, instance)
        if away:
            report(manager, context, instance, instance.host, away, why)
    except Exception:
        LOG.exception('Could not read the ports of the failed evacuation to '
                      '%s', manager.host, instance=instance)


def report(manager, context, instance, source, ports, why):
    """Log, once per port, the commands that bind it to ``source``."""
    try:
        mappings = provider_mappings(manager, context, instance, source)
    except Exception:
        mappings = None
    for port in ports:
        commands = ['openstack port set --host %s %s' % (source, port['id'])]
        caveat = ''
        if port.get('resource_request'):
            allocation = mappings and manager.network_api.\
                get_binding_profile_allocation(context, port['id'], mappings)
            commands.insert(0, 'openstack port set --binding-profile '
                            '\'{"allocation": %s}\' %s' % (json.dumps(
                                allocation or 'PROVIDER_ON_%s' % source),
                                port['id']))
            caveat = ('; the allocation names the providers of the '
                      'server\'s allocation on %s (openstack resource '
                      'provider allocation show %s)' % (source, instance.uuid))
        LOG.warning('Port %s of the server is bound to %s (%s): once '
                    'nova-compute and the network agent run on %s, run: '
                    '%s%s', port['id'], port.get('binding:host_id'), why,
                    source, ' && '.join(commands), caveat,
                    instance=instance)
