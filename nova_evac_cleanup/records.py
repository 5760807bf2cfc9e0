# SPDX-License-Identifier: Apache-2.0

"""nova's records of an evacuation: read, and written only as expected.

:func:`read` gives the state the rule (:mod:`nova_evac_cleanup.rule`)
decides on. nova's evacuate API checks no task state and a source that
comes back first completes the migration: a read then a save would
overwrite either. So the migration's status and the server's task state
are written with a compare-and-swap, and nothing else of the server with
them.
"""

import collections

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


#: What the database says now; ``faulted``: a fault since it began.
State = collections.namedtuple('State', 'instance migration moves faulted',
                               defaults=(False,))

_INSTANCE_ATTRS = ['info_cache', 'flavor', 'migration_context']


def read(context, instance_uuid, migration_uuid=None):
    """The instance (None once deleted), the migration, every move."""
    try:
        instance = objects.Instance.get_by_uuid(
            context, instance_uuid, expected_attrs=_INSTANCE_ATTRS)
    except exception.InstanceNotFound:
        # Deleted: nova's running_deleted_instance_action reaps its guest.
        instance = None
    moves = list(objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance_uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc']))
    migration = next((m for m in moves if m.uuid == migration_uuid), None)
    fault = objects.InstanceFault.get_latest_for_instance(context,
                                                          instance_uuid)
    return State(instance, migration, moves, bool(
        fault is not None and migration is not None and
        fault.created_at >= migration.created_at))


def newest_move(context, instance_uuid):
    """The instance's newest migration, or None."""
    moves = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance_uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], limit=1)
    return moves[0] if moves else None


def nodes(context, host):
    """The compute node uuids of ``host``, from the database."""
    try:
        return [node.uuid for node in objects.ComputeNodeList.get_all_by_host(
            context, host)]
    except exception.ComputeHostNotFound:
        return []


def service_up(context, host):
    """Whether nova says the compute service of ``host`` is up."""
    from nova import servicegroup

    try:
        service = objects.Service.get_by_compute_host(context, host)
    except exception.ComputeHostNotFound:
        return False
    return (not service.forced_down and
            servicegroup.API().service_is_up(service))


def set_status(context, migration, expected, status):
    """The migration from one of ``expected`` to ``status``; whether it was.

    A compare-and-swap in the database where this process reaches it (the
    audit, nova's functional tests). Through nova-conductor, which has no
    conditional update of a migration, it is read right before the write.
    """
    if objects_base.NovaObject.indirection_api is None:
        with db_api.get_context_manager(context).writer.using(context):
            return bool(context.session.query(models.Migration).filter_by(
                id=migration.id, deleted=0).filter(
                models.Migration.status.in_(expected)).update(
                {'status': status}, synchronize_session=False))
    current = objects.Migration.get_by_id(context, migration.id)
    if current.status not in expected:
        return False
    current.status = status
    current.save()
    return True


def set_task_state(context, instance, expected, task_state, **changes):
    """The server's task state from ``expected``, with ``changes``.

    Saved through a copy that holds only what changes: the instance read
    before may carry fields nova saves again whatever changed (its
    migration context), which are a newer operation's by now.

    :raises UnexpectedTaskStateError: the server is not in ``expected``
    """
    changes['task_state'] = task_state
    server = objects.Instance(context=context, uuid=instance.uuid)
    server.obj_reset_changes()
    server.update(changes)
    server.save(expected_task_state=[expected])
    instance.update(changes)


def drop_context(instance, migration):
    """Drop the instance's migration context if it is ``migration``'s."""
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == migration.id):
        instance.drop_migration_context()
        return True
    return False


@utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
def finish(context, instance, migration):
    """What nova's ``finish_evacuation`` left of one that moved it here.

    Under the resource tracker's lock, as nova does it: its periodic
    update never sees the context gone and the migration in progress.
    """
    drop_context(instance, migration)
    if migration.status == 'pre-migrating' and set_status(
            context, migration, ('pre-migrating',), 'done'):
        LOG.info('Evacuation %s to %s: migration set to done',
                 migration.uuid, instance.host, instance=instance)


def add_fault(context, instance, error):
    """``error`` as the instance's fault, with its traceback if it has one."""
    compute_utils.add_instance_fault_from_exc(
        context, instance, error, (type(error), error, error.__traceback__))
