# SPDX-License-Identifier: Apache-2.0

"""The rule: may this host end an evacuation to it? Read, then decide.

:func:`~nova_evac_cleanup.records.read` and :func:`left_here` read the
database and this host; :func:`decide`, which reads nothing, says
:data:`END` it, :data:`FORGET` its journal entry, or :data:`KEEP` and
report it, with a reason. The kind of a verdict (``interrupted``,
``moved-on``...) is a word of the report; no code branches on it.

When in doubt, keep and report. Only an evacuation this host journaled is
ended, and only while the instance's state still names it: not hosted
here, not deleted, its migration the newest move with none other in
progress, its migration context naming it (or dropped by nova's handler),
in a task state of the evacuation or of this host's hold. The ending takes
the same proof again before each step (:func:`held`).
"""

import collections

from nova.compute import task_states
from nova.compute import vm_states
from nova.objects import fields

from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership

END, FORGET, KEEP = 'end', 'forget', 'keep'

#: The task state an ending holds the server in: set by the compute
#: manager, never by nova's API (which sets ``rebuilding`` whatever the
#: task state): an HA tool's retry fails the release, not the reverse.
HOLD = task_states.REBUILD_BLOCK_DEVICE_MAPPING
EVACUATION = fields.MigrationType.EVACUATION
#: An evacuation running: ``accepted`` (before its rebuild code began),
#: ``pre-migrating`` (claimed).
RUNNING = ('accepted', 'pre-migrating')
#: Statuses of a migration that is over, whatever its type.
OVER = frozenset(['confirmed', 'reverted', 'error', 'failed', 'completed',
                  'cancelled', 'done'])
#: Those of an evacuation this host may end: running, ``completed`` by a
#: source that came back first, ``failed`` by nova's handler.
ENDABLE = RUNNING + ('completed', 'failed')

#: What is on this host: the guest (None, 'running', 'defined'), the
#: instance directory and its files' sizes, this host's allocations by
#: provider, whether the files are the evacuation's own, and if not why.
Left = collections.namedtuple('Left', 'guest path files allocations owned '
                              'why', defaults=(None,))
Verdict = collections.namedtuple('Verdict', 'decision kind reason')


def left_here(manager, context, instance, entry, host_nodes):
    """What is on this host of the instance: a :data:`Left`."""
    allocations = manager.reportclient.get_allocs_for_consumer(
        context, instance.uuid).get('allocations') or {}
    allocations = {rp: allocation.get('resources', {})
                   for rp, allocation in allocations.items()
                   if rp in host_nodes}
    path = ownership.instance_path(instance.uuid)
    files = ownership.contents(path)
    owned, why = ownership.proof(entry) if entry else (False, None)
    return Left(guest.state(manager.driver, instance), path, files,
                allocations, bool(files and owned), why)


def _elsewhere(host, state):
    """Why the state does not name an evacuation to ``host``, or None."""
    instance, migration, moves = state[:3]
    if instance is None or instance.deleted:
        return 'instance-deleted', 'the instance was deleted'
    if instance.host == host:
        return 'lives-here', 'the instance is hosted here'
    busy = [m for m in moves if m.status not in OVER and (
        migration is None or m.id != migration.id)]
    if busy:
        return 'other-operation-in-progress', (
            'migration %s (%s, %s) of the instance is in progress' % (
                busy[0].uuid, busy[0].migration_type, busy[0].status))
    if migration is None:
        return 'foreign-guest', ('the instance is hosted on %s and no '
                                 'evacuation of it to this host is known' %
                                 instance.host)
    if moves[0].id != migration.id:
        return 'moved-on', 'migration %s (%s, %s) of the instance is ' \
            'newer' % (moves[0].uuid, moves[0].migration_type,
                       moves[0].status)
    return None


def held(host, state):
    """Whether the server is still held by this host's ending.

    The proof each step takes, on a state read right before it.
    """
    return (_elsewhere(host, state) is None and
            state.instance.task_state == HOLD)


def decide(host, entry, state, left):
    """The :data:`Verdict` on one evacuation to ``host``; reads nothing.

    :param entry: this host's journal entry of it, or None for what only
        the database shows: reported, never ended
    """
    instance = state.instance
    # Nothing of it here needs a record: the entry goes.
    keep = KEEP if (left.guest or left.files or left.allocations) else FORGET
    elsewhere = _elsewhere(host, state)
    if elsewhere:
        # nova's own start-up finishes what it needs of an instance that
        # lives here; the directory is its own then.
        return Verdict(FORGET if instance is not None and not
                       instance.deleted and instance.host == host else keep,
                       *elsewhere)
    return _ours(entry or journal.Entry(host, instance.uuid, None),
                 state, left, keep, journaled=entry is not None)


def _ours(entry, state, left, keep, journaled):
    """The verdict on an evacuation the state still names.

    Without a journal entry (``journaled`` False), never :data:`END`.
    """
    instance, migration = state.instance, state.migration

    def interrupted(reason):
        if journaled:
            return Verdict(END, 'interrupted', reason)
        return Verdict(keep, 'unjournaled', 'interrupted, but this host '
                       'holds no journal entry of it: no proof to act on')

    context = instance.migration_context
    if migration.status not in ENDABLE or (
            context is not None and context.migration_id != migration.id):
        return Verdict(keep, 'not-claimed', 'the migration is %s, the '
                       'migration context %s' % (
                           migration.status, 'another\'s' if context
                           else 'dropped'))
    task = instance.task_state
    if entry.phase in (journal.ENDING, journal.RELEASING):
        if task == HOLD:
            return interrupted('this host was ending the evacuation when it '
                               'stopped: it holds the server')
        if entry.phase == journal.RELEASING and task is None:
            return Verdict(END, 'ended', 'this host ended the evacuation; '
                           'only its journal entry was left')
        if entry.phase == journal.RELEASING or task != entry.held_from:
            return Verdict(keep, 'interrupted-reset', 'the instance is in '
                           'task state %s, not the %s this host held it in '
                           '(reset by an operator?)' % (task, HOLD))
        # It died before it held the server: as if it had not begun.
    if task in task_states.rebuild_states:
        return interrupted('this host died while %s' % (
            'nova ended the failed evacuation' if migration.status ==
            'failed' else 'running the evacuation'))
    if task is None and (migration.status == 'failed' or entry.error):
        # ERROR by nova's handler, or its handler never ran (an error in
        # its decorators): the migration then still runs, and nova's
        # conductor would take it for the next evacuation's own.
        if journaled and (instance.vm_state == vm_states.ERROR or
                          migration.status in RUNNING) and (
                left.guest and 'destroy' not in entry.done or
                left.allocations or left.owned or
                migration.status in RUNNING or (
                    entry.error and not state.faulted) or (
                    entry.spawned and entry.detached and
                    'volumes' not in entry.done)):
            return Verdict(END, 'failed-leftover', 'the evacuation failed '
                           'and its handler did not end all of it')
        return Verdict(keep, 'failed-leftover',
                       'the evacuation failed and its handler ran')
    if (task is None and entry.spawned and instance.launched_at and
            migration.created_at and
            instance.launched_at >= migration.created_at):
        # nova cleared the task state after spawn, with the launch time,
        # then this host died before recording the instance here; a reset
        # does not touch launched_at.
        return interrupted('this host died after nova saved the spawned '
                           'instance, before it recorded it here')
    return Verdict(keep, 'interrupted-reset', 'the instance is %s in task '
                   'state %s, not the evacuation\'s (reset by an '
                   'operator?)' % (instance.vm_state, task))
