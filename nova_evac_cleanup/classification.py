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

"""Whether an evacuation to this host may be ended: the rule, and nothing else.

Pure: it reads nothing and writes nothing. :mod:`nova_evac_cleanup.findings`
reads the journal entry, the instance and its migrations, and asks
:func:`classify`; :mod:`nova_evac_cleanup.recovery` ends only what it calls
:data:`INTERRUPTED` or :data:`ENDED`, and reads and asks again before each
step.

The rule is *when in doubt, report and keep*. Only an evacuation this host
journaled (:mod:`nova_evac_cleanup.journal`) is a candidate, and only while
the instance's current state still names it: not hosted here, its task
state one of the evacuation's rebuild states, the migration the instance's
newest move with none other in progress, its migration context naming the
migration (or dropped by nova's own handler of that very evacuation).
Every other kind is reported with the commands an operator would run.
"""

from nova.compute import task_states
from nova.objects import fields

#: The only kinds that are acted on: an evacuation this host did not live
#: to end, and one whose ending only lacks its journal entry's removal.
INTERRUPTED = 'interrupted'
ENDED = 'ended'
#: Reported and kept.
RESET = 'interrupted-reset'
MOVED_ON = 'moved-on'
IN_PROGRESS = 'other-operation-in-progress'
NOT_CLAIMED = 'not-claimed'
FAILED = 'failed-leftover'
DELETED = 'instance-deleted'
LIVES_HERE = 'lives-here'
FOREIGN_GUEST = 'foreign-guest'
UNJOURNALED = 'unjournaled'
#: The kinds nova itself deals with: an operation in progress, an
#: instance that lives here, one that was deleted (nova reaps its guest).
NOVAS_OWN = (IN_PROGRESS, LIVES_HERE, DELETED)

EVACUATION = fields.MigrationType.EVACUATION
#: Statuses of a migration that is over, whatever its type.
OVER_STATUSES = frozenset(['confirmed', 'reverted', 'error', 'failed',
                           'completed', 'cancelled', 'done'])
#: Statuses of an evacuation still running: ``accepted`` when it died
#: before its rebuild code began, ``pre-migrating`` (the claim).
RUNNING_STATUSES = ('accepted', 'pre-migrating')
#: The statuses of an evacuation this host may end: running, or set by its
#: source's start-up (``completed``) or by nova's handler (``failed``).
ENDABLE_STATUSES = RUNNING_STATUSES + ('completed', 'failed')


def classify(host, instance, migration, moves, entry=None):
    """Whether the instance's state still names the evacuation to ``host``.

    :param moves: every migration record of the instance, of any type,
        newest first
    :param entry: this host's journal entry of the evacuation, if any: an
        ending of its own that this host did not finish is recognised
        (:attr:`~nova_evac_cleanup.journal.Entry.ending`)
    :returns: ``(kind, reason)``; the kind is :data:`INTERRUPTED` or
        :data:`ENDED` only when the evacuation may be ended
    """
    if instance is None or instance.deleted:
        return DELETED, 'the instance was deleted'
    if instance.host == host:
        return LIVES_HERE, 'the instance is hosted here'
    busy = [m for m in moves if m.status not in OVER_STATUSES and (
        migration is None or m.id != migration.id)]
    if busy:
        return IN_PROGRESS, 'migration %s (%s, %s) of the instance is in ' \
            'progress' % (busy[0].uuid, busy[0].migration_type,
                          busy[0].status)
    if migration is None:
        return FOREIGN_GUEST, ('the instance is hosted on %s and no '
                               'evacuation of it to this host is known' %
                               instance.host)
    newest = moves[0] if moves else None
    if newest is None or newest.id != migration.id:
        return MOVED_ON, (
            'migration %s (%s, %s) of the instance is newer' % (
                newest.uuid, newest.migration_type, newest.status)
            if newest is not None else 'no migration of the instance is known')
    ending = entry.ending if entry is not None else None
    if ending is not None:
        if instance.task_state == ending.get('task_state'):
            return INTERRUPTED, ('this host was ending the evacuation when '
                                 'it stopped: it holds the server still')
        if ending.get('releasing') and instance.task_state is None:
            return ENDED, ('this host ended the evacuation; only its '
                           'journal entry was left')
        if ending.get('releasing') or instance.task_state != ending.get(
                'from', ending.get('task_state')):
            return RESET, ('the instance is in task state %s, not the %s '
                           'this host held while ending the evacuation '
                           '(reset by an operator?)' % (
                               instance.task_state, ending.get('task_state')))
        # It died before it held the server: as if it had not begun.
    if migration.status not in ENDABLE_STATUSES:
        return NOT_CLAIMED, 'the migration is %s' % migration.status
    # nova's own handler of the evacuation drops the migration context
    # when it aborts the claim, before it fails the migration.
    context = instance.migration_context
    if context is not None and context.migration_id != migration.id:
        return NOT_CLAIMED, ("the instance's migration context names "
                             "another migration")
    if instance.task_state not in task_states.rebuild_states:
        if migration.status == 'failed':
            return FAILED, 'the evacuation failed and its handler ran'
        if _saved_after_spawn(instance, migration, entry):
            return INTERRUPTED, ('this host died after nova saved the '
                                 'spawned instance, before it recorded it '
                                 'here')
        return RESET, ('the instance is in task state %s, not the '
                       'evacuation\'s (reset by an operator?)' %
                       instance.task_state)
    if migration.status == 'failed':
        return INTERRUPTED, ('this host died while nova ended the failed '
                             'evacuation: the server is still in its '
                             'rebuild task state')
    return INTERRUPTED, 'this host died while running the evacuation'


def _saved_after_spawn(instance, migration, entry):
    """Whether nova saved the instance after this evacuation's spawn.

    nova clears the task state after spawn, with the launch time, then
    records the instance here (``finish_evacuation``); a host that died in
    between leaves no task state, as an operator's reset-state would. A
    reset does not touch ``launched_at``: a launch after the migration
    began is this evacuation's spawn.
    """
    return bool(entry is not None and entry.spawning and
                instance.task_state is None and instance.launched_at and
                migration.created_at and
                instance.launched_at >= migration.created_at)
