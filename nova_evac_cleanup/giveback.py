# SPDX-License-Identifier: Apache-2.0

"""The source takes back the volumes and ports of a failed evacuation."""

from nova.compute import vm_states
from nova.network import neutron
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import ports as port_bindings
from nova_evac_cleanup import records
from nova_evac_cleanup import runbook
from nova_evac_cleanup import volumes as attachments

LOG = logging.getLogger(__name__)

#: Ended as failed; or ``completed`` by a source back before the sweep.
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


def give_back_all(manager, context, tries, start=False):
    """Give back what failed evacuations from here left; never raises."""
    try:
        instances = servers(manager, context, {
            uuid for (uuid, _m), n in tries.count.items() if n < TRIES}, start)
    except Exception:
        LOG.exception('Could not look for failed evacuations from %s',
                      manager.host)
        return
    for instance in instances:
        try:
            give_back(manager, context, instance, tries)
        except Exception:
            LOG.exception('Could not give the server back to %s',
                          manager.host, instance=instance)


def servers(manager, context, uuids, history):
    """Those hosted here in ERROR, in ``uuids``, or ``history``'s."""
    here = {'host': manager.host, 'deleted': False}
    found = list(objects.InstanceList.get_by_filters(
        context, dict(here, vm_state=vm_states.ERROR), expected_attrs=[]))
    uuids = set(uuids)
    if history:
        uuids.update(m.instance_uuid for m in objects.MigrationList.
                     get_by_filters(context, {
                         'source_compute': manager.host, 'status': FAILED,
                         'migration_type': 'evacuation'}))
    uuids -= {instance.uuid for instance in found}
    if uuids:
        found.extend(objects.InstanceList.get_by_filters(
            context, dict(here, uuid=sorted(uuids)), expected_attrs=[]))
    return found


def evacuation(context, host, instance):
    """Its newest migration if an ended evacuation from here, else None."""
    newest = instance.host == host and instance.task_state is None and (
        records.newest_move(context, instance.uuid))
    return newest if newest and newest.migration_type == 'evacuation' and (
        newest.status in ENDED and newest.source_compute == host) else None


def give_back(manager, context, instance, tries):
    """Give one server back here what is due, never over a newer operation."""
    migration = evacuation(context, manager.host, instance)
    key = (instance.uuid, migration and migration.uuid)
    if (migration is None or key in tries.done or
            tries.count.get(key, 0) >= TRIES):
        return
    client = neutron.get_client(context, admin=True)
    volumes = attachments.unused(manager, context, instance)
    ports = port_bindings.away(client, instance)
    if not (volumes or ports):
        tries.done.add(key)
        return
    if getattr(evacuation(context, manager.host, objects.Instance.get_by_uuid(
            context, instance.uuid, expected_attrs=[])),
            'uuid', None) != migration.uuid:
        LOG.info('Evacuation %s from %s: the server moved on; left alone',
                 migration.uuid, manager.host, instance=instance)
        return
    errors = {bdm.volume_id: attachments.connect(
        manager, context, instance, bdm) for bdm in volumes}
    if ports:
        errors.update(port_bindings.bind(manager, context, instance, client,
                                         ports))
    volumes_left = volumes and attachments.unused(manager, context, instance)
    ports_left = ports and port_bindings.away(client, instance)
    if not (volumes_left or ports_left):
        tries.done.add(key)
        LOG.warning('Evacuation %s failed: gave back to %s the server\'s '
                    'volumes %s and ports %s', migration.uuid, manager.host,
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
    port_bindings.report_away(manager, context, instance, why, ports_left)
    for bdm in volumes_left:
        LOG.warning('Volume %s of the server is not connected (%s: %s): '
                    'once checked, run: %s', bdm.volume_id, why,
                    errors.get(bdm.volume_id), ' && '.join(
                        runbook.refresh_volumes(manager.host, instance.uuid,
                                                [bdm.volume_id])),
                    instance=instance)


def left(manager, context):
    """For the audit (reads only): what is not back here, the commands."""
    result = []
    for instance in servers(manager, context, (), True):
        migration = evacuation(context, manager.host, instance)
        ports = migration and port_bindings.away(
            neutron.get_client(context, admin=True), instance)
        volumes = migration and [bdm.volume_id for bdm in attachments.unused(
            manager, context, instance)]
        if ports or volumes:
            result.append({
                'instance': instance.uuid, 'migration': migration.uuid,
                'ports': {port['id']: '%s on %s' % (
                    port.get('binding:vif_type'),
                    port.get('binding:host_id')) for port in ports},
                'volumes': volumes, 'commands': [
                    command for port in ports for command in
                    port_bindings.commands(manager.host, port)] + (
                    runbook.refresh_volumes(manager.host, instance.uuid,
                                            volumes) if volumes else [])})
    return result
