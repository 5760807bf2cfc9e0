# SPDX-License-Identifier: Apache-2.0

"""nova's records of an evacuation, written only as expected.

nova's evacuate API checks no task state, and a source back first
completes the migration: status and task state are compare-and-swapped.
"""

from nova.compute import resource_tracker
from nova.compute import utils as compute_utils
from nova.db.main import api as db_api
from nova.db.main import models
from nova import exception
from nova import objects
from nova.objects import base as objects_base
from nova import utils
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class EvacuationFailedThenInterrupted(exception.NovaException):
    msg_fmt = ('%(error)s (the evacuation to %(host)s failed so, and '
               'nova-compute on %(host)s stopped before it had ended it; it '
               'was ended when it started again)')


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


def set_status(context, migration, expected, status):
    """The migration from one of ``expected`` to ``status``; whether it was."""
    if objects_base.NovaObject.indirection_api is None:
        with db_api.get_context_manager(context).writer.using(context):
            return bool(context.session.query(models.Migration).filter_by(
                id=migration.id, deleted=0).filter(
                models.Migration.status.in_(expected)).update(
                {'status': status}, synchronize_session=False))
    # nova-conductor cannot update a migration conditionally.
    current = objects.Migration.get_by_id(context, migration.id)
    if current.status not in expected:
        return False
    current.status = status
    current.save()
    return True


def set_task_state(context, instance, expected, task_state, **changes):
    """The server's task state from ``expected``, with ``changes``."""
    changes['task_state'] = task_state
    # A copy of only the changes: nova would save again the migration
    # context of the instance read before, a newer operation's by now.
    server = objects.Instance(context=context, uuid=instance.uuid)
    server.obj_reset_changes()
    server.update(changes)
    server.save(expected_task_state=[expected])
    instance.update(changes)


def drop_context(instance, migration):
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == migration.id):
        instance.drop_migration_context()
        return True
    return False


# Under the resource tracker's lock, as in nova: its periodic update never
# sees the context gone and the migration in progress.
@utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
def finish(context, instance, migration):
    """What nova's ``finish_evacuation`` left of one that moved it here."""
    drop_context(instance, migration)
    if migration.status == 'pre-migrating' and set_status(
            context, migration, ('pre-migrating',), 'done'):
        LOG.info('Evacuation %s to %s: migration set to done',
                 migration.uuid, instance.host, instance=instance)


def move_allocation(context, client, instance, rp):
    """``rp``'s allocation of the server, its only one, to the server's node.

    A source back first takes its own as a done evacuation's (nova's
    ``_destroy_evacuated_instances``, for one still ``pre-migrating``).
    Moved as it is, if placement has room, with the consumer as read.

    :returns: the node's provider, or None if it was not moved
    """
    try:
        home = objects.ComputeNode.get_by_host_and_nodename(
            context, instance.host, instance.node).uuid
    except exception.ComputeHostNotFound:
        return None
    found = client.get_allocs_for_consumer(context, instance.uuid)
    if list(found.get('allocations') or ()) != [rp]:
        return None  # changed since it was read
    return home if client.put_allocations(context, instance.uuid, {
        'allocations': {home: {
            'resources': found['allocations'][rp]['resources']}},
        'consumer_generation': found['consumer_generation'],
        'project_id': found['project_id'],
        'user_id': found['user_id']}) else None


def add_fault(context, instance, error):
    compute_utils.add_instance_fault_from_exc(
        context, instance, error, (type(error), error, error.__traceback__))
