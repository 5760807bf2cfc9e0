# SPDX-License-Identifier: Apache-2.0

"""What the manager does once nova's rebuild code raised; never raises.

Before nova's handler (:func:`failed`), while nova's claim still holds what
the guest was made with, the guest is destroyed and the volumes released;
after it (:func:`after_nova`), what it left is ended by the one ending.
"""

from nova.compute import vm_states
from oslo_log import log as logging

from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep

LOG = logging.getLogger(__name__)


def failed(evacuation, instance, error, finish=False):
    """nova's rebuild code raised: the guest, before nova's handler.

    After spawn returned, or in ``finish_evacuation`` (``finish``), the
    instance is read first: one nova recorded here keeps its guest, one
    that it did not is read again (nova's handler must not save this host
    into it).
    """
    evacuation.error, evacuation.in_finish = error, finish
    evacuation.journal()
    if not finish and evacuation.spawn not in ('raised', 'returned'):
        return
    if (finish or evacuation.spawn == 'returned') and _lives_here(
            evacuation, instance, finish):
        return
    if finish:
        try:
            instance.refresh()
        except Exception:
            LOG.exception('Could not read the instance again',
                          instance=instance)
    before_nova(evacuation, instance)


def before_nova(evacuation, instance):
    """The guest, and the volumes while the evacuation is the newest move.

    While nova's claim still holds this host's resources.
    """
    steps, state = evacuation.ending(), records.State(instance, None, [])
    given = evacuation.block_device_info
    if given is not None and not given.get('block_device_mapping'):
        # Spawn was given no volume: none to release, ever.
        evacuation.entry.done.append('volumes')
    if 'destroy' not in evacuation.entry.done:
        steps.step('destroy', state)
    if 'volumes' in evacuation.entry.done:
        return
    try:
        # A retry accepted meanwhile has made attachments of its own.
        newest = records.newest_move(evacuation.context, instance.uuid)
    except Exception:
        LOG.exception('Could not read the moves of %s', instance.uuid)
        return
    if getattr(newest, 'uuid', None) == evacuation.entry.migration_uuid:
        steps.step('volumes', state)


def _lives_here(evacuation, instance, finish=False):
    """Whether the instance lives here; when in doubt, True.

    If it cannot be read, the guest is powered off and left: running, it
    would be a second writer on the server's volumes and shared disks.
    With ``finish``, what ``finish_evacuation`` left of it is finished.
    """
    try:
        state = records.read(evacuation.context, instance.uuid,
                             evacuation.entry.migration_uuid)
    except Exception:
        LOG.exception('Could not read the instance after its evacuation '
                      'to %s failed: powering its guest off',
                      evacuation.entry.host, instance=instance)
        try:
            evacuation.manager.driver.power_off(instance)
        except Exception:
            LOG.exception('Could not power off the guest either',
                          instance=instance)
        return True
    current = state.instance
    if current is None or current.host != evacuation.entry.host:
        return False
    LOG.warning('Evacuation failed after the instance was recorded on '
                '%s (%s): it lives here', evacuation.entry.host,
                evacuation.error, instance=instance)
    if finish:
        records.finish(evacuation.context, current, state.migration)
    return True


def after_nova(evacuation, instance, error):
    """nova's handler returned: end what it left, on the rule's verdict.

    Should it have raised another error than the evacuation's, the
    evacuation's own is the fault.
    """
    manager, context, entry = (evacuation.manager, evacuation.context,
                               evacuation.entry)
    if evacuation.error is None:
        evacuation.error = error
        evacuation.journal()
    # Never rebound from here: a dead source's agent refuses the binding.
    ports.report_away(manager, context, instance,
                      'evacuation to %s failed' % entry.host)
    try:
        if evacuation.error is not error:
            LOG.error('Ending the failed evacuation to %s failed: %s',
                      entry.host, error, instance=instance)
            records.add_fault(context, instance, evacuation.error)
        elif _ended_by_nova(evacuation, instance):
            leftovers.end(manager.driver, entry, instance)
            return
        finding = sweep.settle(manager, context, entry,
                               records.nodes(context, entry.host),
                               ending=evacuation.ending())
        if finding.verdict.decision == rule.KEEP:
            leftovers.end(manager.driver, entry, instance)
    except Exception:
        LOG.exception('Could not end the failed evacuation to %s',
                      entry.host, instance=instance)


def _ended_by_nova(evacuation, instance):
    """Whether nova's handler ended what this host had not, so far.

    It raised the evacuation's own error once the guest and the volumes
    were done here: it failed the migration, dropped the claim and
    recorded the fault. Its decorators saved the server in ERROR with no
    task state (a failed save is only logged: then the fields are still
    changed). Its removal of the allocation only logs a failure: its
    answer was seen for each of this host's nodes. ``finish_evacuation``
    has no such handler.
    """
    # nova's own nodes of this host; none known: the rule reads them.
    nodes = {node.uuid for node in getattr(
        evacuation.manager.rt, 'compute_nodes', {}).values()}
    return bool(
        nodes and nodes <= evacuation.removed and not evacuation.in_finish and
        {'destroy', 'volumes'} <= set(evacuation.entry.done) and
        instance.task_state is None and
        instance.vm_state == vm_states.ERROR and
        not {'task_state', 'vm_state'} & instance.obj_what_changed() and
        instance.host != evacuation.entry.host)
