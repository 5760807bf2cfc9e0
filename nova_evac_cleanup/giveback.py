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

nova's evacuation moves the server's volume attachments and port bindings
to the destination before spawning, and nothing moves them back when it
fails (the destination's cleanup, :mod:`~nova_evac_cleanup.ending`, leaves
the attachments reserved and binds no port to a dead source). The source
takes them back (:func:`give_back_all`) as its nova-compute starts, before
nova's ``init_host`` touches a guest, and every :data:`SPACING` seconds
(the manager's periodic task), for each server hosted here with no task
state whose newest migration is an evacuation from here that ended without
moving it (:func:`evacuation`), however it ended: each volume whose
attachment no guest uses is connected for this host with nova's own steps
(:func:`connect`), nothing disconnected here; each port not bound here
with a working vif type is bound here (:mod:`~nova_evac_cleanup.ports`).

Never over a newer operation (nova's evacuate API checks no task state):
ports and attachments are read, the evacuation confirmed to be still the
server's newest migration, then each port updated only at the revision
read and each attachment by the id read (an HA retry since changed the
one, 412, and deleted the other, NotFound). Each counts as given back once
neutron and cinder say so; the rest is tried again, :data:`TRIES` times,
then one WARNING per port and volume gives the commands (:func:`left`
lists them for the audit). Only cinder and neutron are written.
"""

from nova.compute import vm_states
from nova import exception
from nova.network import neutron
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ports as port_bindings
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)

#: An evacuation nova or this project ended as failed; or ``completed`` by
#: a source that came back first, before the destination's sweep ended it.
FAILED = ('failed', 'error')
ENDED = FAILED + ('completed',)
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

    The servers in ERROR here (an evacuation that ended failed leaves its
    server so), those not given back whole yet and, at start-up, those of
    this host's failed evacuations (reset since). Never raises.
    """
    try:
        instances = servers(manager, context, tries.pending(), start)
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


def servers(manager, context, uuids, history):
    """Those hosted here in ERROR, in ``uuids``, or ``history``'s."""
    here = {'host': manager.host, 'deleted': False}
    found = list(objects.InstanceList.get_by_filters(
        context, dict(here, vm_state=vm_states.ERROR), expected_attrs=[]))
    uuids = set(uuids)
    if history:
        uuids.update(m.instance_uuid for m in objects.MigrationList.
                     get_by_filters(context, {
                         'source_compute': manager.host,
                         'migration_type': 'evacuation',
                         'status': list(FAILED)}))
    uuids -= {instance.uuid for instance in found}
    if uuids:
        found.extend(objects.InstanceList.get_by_filters(
            context, dict(here, uuid=sorted(uuids)), expected_attrs=[]))
    return found


def evacuation(context, host, instance):
    """The failed evacuation from ``host`` that left ``instance`` here.

    :returns: the migration, or None: the server is not hosted here, has a
        task state, or its newest migration is not an evacuation from here
        that ended without moving it
    """
    if instance.host != host or instance.task_state is not None:
        return None
    newest = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance.uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], limit=1)
    if newest and newest[0].migration_type == 'evacuation' and (
            newest[0].status in ENDED and newest[0].source_compute == host):
        return newest[0]
    return None


def give_back(manager, context, instance, tries):
    """Give one server its volumes and ports back here, if it is due."""
    migration = evacuation(context, manager.host, instance)
    key = (instance.uuid, migration and migration.uuid)
    if migration is None or not tries.due(key):
        return
    client = neutron.get_client(context, admin=True)
    volumes = unused_volumes(manager, context, instance)
    ports = port_bindings.away(client, instance)
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
        errors.update(port_bindings.bind(manager, context, instance, client,
                                         ports))
    volumes_left = unused_volumes(manager, context, instance) if volumes \
        else []
    ports_left = port_bindings.away(client, instance) if ports else []
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
    LOG.info('%s: volumes %s, ports %s: %s', why,
             [bdm.volume_id for bdm in volumes_left],
             [port['id'] for port in ports_left], errors, instance=instance)
    for error in errors.values():
        if count == 1 and isinstance(error, port_bindings.NoProvider):
            LOG.warning('%s: %s', why, error, instance=instance)
    if count < TRIES:
        return
    port_bindings.report(manager, context, instance, ports_left, why)
    for bdm in volumes_left:
        LOG.warning('Volume %s of the server is not connected on %s (%s: '
                    '%s): once checked, run: %s', bdm.volume_id,
                    manager.host, why, errors.get(bdm.volume_id),
                    ' && '.join(runbook.refresh_volumes(
                        manager.host, instance.uuid, [bdm.volume_id])),
                    instance=instance)


def unused_volumes(manager, context, instance):
    """The server's volume mappings whose attachment no guest uses.

    Reserved (no connector: what the destination's cleanup, or nova's
    ``detach_block_devices``, left), or updated with a connector and not
    completed (a give-back cut short). Once connected, cinder's status is
    in the connection info (nova's ``_translate_attachment_ref``).
    """
    result = []
    for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid):
        if not (bdm.is_volume and bdm.attachment_id):
            continue
        try:
            attachment = manager.volume_api.attachment_get(
                context, bdm.attachment_id)
        except exception.VolumeAttachmentNotFound:
            # A replacement cut short (a sweep that died in it): nothing
            # here to connect; the rest of the server still goes back.
            LOG.warning('Volume %s: attachment %s is gone from cinder; '
                        'once checked, run: %s', bdm.volume_id,
                        bdm.attachment_id, ' && '.join(
                            runbook.refresh_volumes(
                                manager.host, instance.uuid,
                                [bdm.volume_id])), instance=instance)
            continue
        info = attachment.get('connection_info') or attachment
        if info.get('status') in ('reserved', 'attaching'):
            result.append(bdm)
    return result


def connect(manager, context, instance, bdm):
    """Connect one volume for this host; None, or the error: never raises.

    nova's own steps, as ``finish_revert_resize`` takes them: the
    attachment updated with this host's connector (cinder exports the
    volume here again), the mapping's connection info refreshed from
    cinder's answer, the attachment completed. One replaced since it was
    read is gone (NotFound): left to the operation that replaced it.
    """
    try:
        nova_support.helper(manager, '_update_volume_attachments')(
            context, instance, [bdm])
        nova_support.helper(manager, '_get_instance_block_device_info')(
            context, instance, refresh_conn_info=True, bdms=[bdm])
        nova_support.helper(manager, '_complete_volume_attachments')(
            context, [bdm])
    except exception.VolumeAttachmentNotFound:
        LOG.warning('Volume %s: attachment %s was replaced since it was '
                    'read; left to the operation that replaced it',
                    bdm.volume_id, bdm.attachment_id, instance=instance)
    except Exception as error:
        LOG.info('Could not connect volume %s on %s: %s', bdm.volume_id,
                 manager.host, error, instance=instance)
        return error
    return None


def left(manager, context):
    """For the audit: per server, what is not back here and the commands.

    Reads only.
    """
    result = []
    for instance in servers(manager, context, (), True):
        migration = evacuation(context, manager.host, instance)
        ports = migration and port_bindings.away(
            neutron.get_client(context, admin=True), instance)
        volumes = migration and [bdm.volume_id for bdm in unused_volumes(
            manager, context, instance)]
        if ports or volumes:
            result.append({
                'instance': instance.uuid, 'migration': migration.uuid,
                'ports': {port['id']: '%s on %s' % (
                    port.get('binding:vif_type'),
                    port.get('binding:host_id')) for port in ports},
                'volumes': volumes, 'commands': [
                    command for port in ports for command in
                    port_bindings.commands(manager, context, instance, port)
                ] + (runbook.refresh_volumes(manager.host, instance.uuid,
                                             volumes) if volumes else [])})
    return result
