# SPDX-License-Identifier: Apache-2.0

"""The rule: may this host end an evacuation to it? In doubt, it keeps it.

Only one it journaled, while the instance's state still names it, proven
again before each step (:func:`held`). It reads nothing; no code branches
on a verdict's kind, a word of the report.
"""

import collections
import dataclasses

from nova.compute import task_states
from nova.compute import vm_states
from nova.objects import fields

from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import records

END, FORGET, KEEP = 'end', 'forget', 'keep'
#: Never set by nova's API, which sets ``rebuilding`` whatever the task
#: state: an HA tool's retry fails the release, not the reverse.
HOLD = task_states.REBUILD_BLOCK_DEVICE_MAPPING
EVACUATION = fields.MigrationType.EVACUATION
#: ``accepted``: its rebuild code has not begun; ``pre-migrating``: claimed.
RUNNING = ('accepted', 'pre-migrating')
OVER = frozenset(['confirmed', 'reverted', 'error', 'failed', 'completed',
                  'cancelled', 'done'])
#: Also ``completed`` by a source back first, ``failed`` by nova's handler.
ENDABLE = RUNNING + ('completed', 'failed')

#: ``owned``: the files are the evacuation's own (if not, ``why``);
#: ``allocations``: against this host's providers; ``elsewhere``: others'.
Left = collections.namedtuple('Left', 'guest path files allocations owned '
                              'why elsewhere', defaults=(None, None))
Verdict = collections.namedtuple('Verdict', 'decision kind reason')


def _elsewhere(host, state, keep=KEEP):
    """The verdict on a state that names no evacuation to ``host``."""
    instance, migration, moves = state[:3]
    if instance is None or instance.deleted:
        return Verdict(keep, 'instance-deleted', 'the instance was deleted')
    if instance.host == host:
        # nova's own start-up finishes it, and owns its directory then.
        return Verdict(FORGET, 'lives-here', 'the instance is hosted here')
    busy = [m for m in moves if m.status not in OVER and (
        migration is None or m.id != migration.id)]
    if busy or migration is not None and moves[0].id != migration.id:
        move = (busy or moves)[0]
        return Verdict(keep, 'other-operation-in-progress' if busy else
                       'moved-on', 'migration %s (%s, %s) of the instance is '
                       '%s' % (move.uuid, move.migration_type, move.status,
                               'in progress' if busy else 'newer'))
    if migration is None:
        return Verdict(keep, 'foreign-guest', 'the instance is hosted on %s '
                       'and no evacuation of it to this host is known' %
                       instance.host)


def moves_home(here, elsewhere):
    """Whether the ending moves this host's allocation to the server's node.

    Only the server's one allocation, against one provider: a source back
    first removed its own (nova's ``_destroy_evacuated_instances``).
    """
    return len(here) == 1 and not elsewhere


def held(host, state):
    """Whether this host's ending still holds the server: each step's proof."""
    return not _elsewhere(host, state) and state.instance.task_state == HOLD


def decide(host, entry, state, left):
    """The :data:`Verdict`; never END without a journal ``entry``."""
    keep = KEEP if (left.guest or left.files or left.allocations) else FORGET
    return _elsewhere(host, state, keep) or _ours(
        entry or journal.Entry(host, state.instance.uuid, None), state, left,
        keep, journaled=entry is not None)


def _ours(entry, state, left, keep, journaled):
    instance, migration = state.instance, state.migration
    task, status = instance.task_state, migration.status

    def interrupted(reason):
        return Verdict(END, 'interrupted', reason) if journaled else Verdict(
            keep, 'unjournaled', 'interrupted, but this host holds no '
            'journal entry of it: no proof to act on')

    context = instance.migration_context
    if status not in ENDABLE or (
            context is not None and context.migration_id != migration.id):
        return Verdict(keep, 'not-claimed', 'the migration is %s, the '
                       'migration context %s' % (
                           status, 'another\'s' if context else 'dropped'))
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
            'nova ended the failed evacuation' if status == 'failed' else
            'running the evacuation'))
    if task is None and (status == 'failed' or entry.error):
        # A migration still running: nova's handler never ran (an error in
        # its decorators), and nova's conductor would take it for the next
        # evacuation's own. ERROR: the handler ran, but may have left some.
        if journaled and (status in RUNNING or (
                instance.vm_state == vm_states.ERROR and (
                    left.guest and 'destroy' not in entry.done or
                    left.allocations or left.owned or
                    (entry.error and not state.faulted) or
                    (entry.spawned and entry.detached and
                     'volumes' not in entry.done)))):
            return Verdict(END, 'failed-leftover', 'the evacuation failed '
                           'and its handler did not end all of it')
        return Verdict(keep, 'failed-leftover',
                       'the evacuation failed and its handler ran')
    if (task is None and entry.spawned and instance.launched_at and
            migration.created_at and
            instance.launched_at >= migration.created_at):
        # nova cleared the task state with the launch time after spawn, and
        # this host died before recording it; a reset leaves launched_at.
        return interrupted('this host died after nova saved the spawned '
                           'instance, before it recorded it here')
    return Verdict(keep, 'interrupted-reset', 'the instance is %s in task '
                   'state %s, not the evacuation\'s (reset by an '
                   'operator?)' % (instance.vm_state, task))


@dataclasses.dataclass
class Finding(object):
    """One evacuation to this host: as read, the verdict, what was done.

    ``entry`` None: only the database shows it, never acted on; ``ended``:
    the ending released the server.
    """

    host: str
    uuid: str  #: the instance's
    entry: journal.Entry | None
    state: records.State
    left: Left
    verdict: Verdict = dataclasses.field(init=False)
    done: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)
    ended: bool = False

    def __post_init__(self):
        self.verdict = decide(self.host, self.entry, self.state, self.left)

    def leaves_something(self):
        """Whether anything of it is here, but the server's own files."""
        left, entry = self.left, self.entry
        return bool(left.guest or left.allocations or (
            left.files and not (entry is not None and entry.shared)))

    def refuses(self):
        """Whether it makes the next evacuation of the server here fail."""
        entry, left, instance = self.entry, self.left, self.state.instance
        return bool(entry is not None and not entry.shared and
                    (left.guest or (left.files and entry.spawned)) and
                    instance is not None and not instance.deleted and
                    instance.host != self.host)

    def commands(self):
        """What an operator would run to end what it kept here."""
        instance, left, entry = self.state.instance, self.left, self.entry
        if instance is None or instance.deleted or (
                self.verdict.decision == FORGET):
            return []
        return leftovers.commands(
            self.host, instance, left.guest, left.files,
            shared=entry is not None and entry.shared,
            shared_with=instance.host, providers=left.allocations,
            task_stuck=instance.task_state in task_states.rebuild_states)
