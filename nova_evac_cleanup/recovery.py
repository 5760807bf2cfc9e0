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

"""End evacuations to this host that this host's death interrupted.

When the destination's nova-compute dies in the middle of an evacuation no
exception handler runs: the instance stays in a rebuild task state on its
source host, the migration ``pre-migrating`` (or ``completed``, by a
source that came back first), and the destination keeps the guest, the
files and its allocation. :func:`recover` ends such an evacuation, found
and classified by :mod:`nova_evac_cleanup.findings`, as nova ends one whose
spawn raised, in steps that can each run again
(:data:`nova_evac_cleanup.ending.STEPS`): the
migration ``failed`` (a ``completed`` one is never rewritten), the guest
destroyed (its disks only with the ownership proof, taken then), this
host's volume connections released, its allocation removed, the migration
context dropped, the fault recorded and, last, the server released (ERROR,
no task state).

The server is held in a task state from the first step to the release, a
compare-and-swap; never ``rebuilding``, which nova's evacuate API sets
from any task state, so that an HA tool's evacuation since fails the
release instead of being put into ERROR by it. The journal entry records,
durably, the ending before its first step and each step done: a process
that dies half-way leaves a record the next start (or ``audit --delete``)
finishes, never one that looks like an operator's reset. The server is
read again before each step and left alone once it moved on. Allocations
are not healed here (``nova-manage placement heal_allocations`` knows
every resource an instance consumes): the command is reported.
"""

from nova.compute import task_states
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import classification
from nova_evac_cleanup import ending
from nova_evac_cleanup import findings
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import runbook
from nova_evac_cleanup import unwind

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def recover(manager, context, finding):
    """End one interrupted evacuation, if it still is one.

    The finding is read and classified again first. Errors are logged and
    kept in ``finding.errors``.

    :returns: True if the evacuation was ended and the server released
    """
    if finding.kind not in (classification.INTERRUPTED, classification.ENDED):
        return False
    classified = finding.instance.task_state
    findings.load(context, finding)
    findings.describe(manager, context, finding,
                      findings.nodes(manager, context))
    instance, entry = finding.instance, finding.entry
    if finding.kind == classification.ENDED:
        return _end_entry(manager, finding)
    if finding.kind != classification.INTERRUPTED or (
            instance.task_state != classified):
        LOG.warning('Evacuation %s to %s changed since it was examined (%s: '
                    '%s); left alone', finding.migration_uuid, finding.host,
                    finding.kind, finding.reason,
                    instance_uuid=finding.instance_uuid)
        if finding.kind == classification.INTERRUPTED:
            finding.kind = classification.RESET
        finding.commands = findings.commands(finding)
        return False
    if entry.ending is None:
        # Write-ahead: from here on, the task state is held by this host's
        # ending of the evacuation, which the next start finishes.
        entry.ending = {'task_state': _HOLD.get(classified, classified),
                        'from': classified, 'done': []}
        if not _step(finding, 'journal', _write, entry):
            return False
    held = entry.ending['task_state']
    if classified != held and not _step(
            finding, 'hold', _hold, finding, classified, held):
        return False
    # What the guest here was made with.
    network_info = instance.get_network_info()
    block_device_info = unwind.block_device_info(manager, context, instance,
                                                 entry)
    for name, step, required in ending.STEPS:
        if name in entry.ending['done']:
            continue
        # nova's evacuate API does not check the task state: an HA tool
        # may have evacuated the server again since the last step.
        if not _still_ours(context, finding, held):
            return False
        if not _step(finding, name, step, manager, context, finding,
                     network_info, block_device_info):
            if required:
                LOG.error('Evacuation %s to %s: the server stays in task '
                          'state %s until the next start of nova-compute or '
                          'nova-evac-cleanup audit --delete ends it',
                          finding.migration_uuid, finding.host, held,
                          instance_uuid=finding.instance_uuid)
                return False
        entry.ending['done'].append(name)
        if not _step(finding, 'journal', _write, entry):
            return False
    entry.ending['releasing'] = True
    if not (_step(finding, 'journal', _write, entry) and
            _step(finding, 'release', ending.release, manager, context,
                  finding,
                  held)):
        return False
    ports.report_away(manager, context, finding.instance,
                      'evacuation to %s interrupted' % finding.host)
    _report_missing_allocation(manager, context, finding)
    return _end_entry(manager, finding)


#: The task state an ending holds the server in, for the one it found:
#: never ``rebuilding``, which nova's evacuate API sets from any task
#: state, so that an HA tool's evacuation of the server since fails this
#: host's compare-and-swap instead of being put into ERROR by it.
_HOLD = {task_states.REBUILDING: task_states.REBUILD_BLOCK_DEVICE_MAPPING,
         None: task_states.REBUILD_BLOCK_DEVICE_MAPPING}


def _write(entry):
    """A step of an ending, durable: the next start goes on from it."""
    journal.write(entry, durable=True)


def _hold(finding, found, held):
    """The server from the task state it was found in to ``held``."""
    instance = finding.instance
    instance.task_state = held
    instance.save(expected_task_state=[found])
    LOG.info('Evacuation %s to %s: holding the server in task state %s '
             'while it is ended', finding.migration_uuid, finding.host, held,
             instance=instance)


def _still_ours(context, finding, classified):
    """Read the server again: does it still name this ending?

    A server that moved on (another evacuation, a reset, a deletion) is
    left alone from here on, with what was done so far in the journal.
    """
    try:
        findings.load(context, finding)
    except Exception as error:
        LOG.exception('Could not read evacuation %s to %s again',
                      finding.migration_uuid, finding.host,
                      instance_uuid=finding.instance_uuid)
        finding.errors.append('read: %s' % error)
        return False
    kind, reason = classification.classify(
        finding.host, finding.instance, finding.migration, finding.moves,
        finding.entry)
    if kind == classification.INTERRUPTED and (
            finding.instance.task_state == classified):
        return True
    finding.kind = (classification.RESET
                    if kind == classification.INTERRUPTED else kind)
    finding.reason = 'changed while being ended: %s' % reason
    LOG.warning('Evacuation %s to %s changed while this host ended it (%s); '
                'left alone from here on', finding.migration_uuid,
                finding.host, reason, instance_uuid=finding.instance_uuid)
    finding.commands = findings.commands(finding)
    return False


def _step(finding, name, step, *args):
    try:
        step(*args)
    except Exception as error:
        LOG.exception('Ending evacuation %s to %s: %s failed',
                      finding.migration_uuid, finding.host, name,
                      instance_uuid=finding.instance_uuid)
        finding.errors.append('%s: %s' % (name, error))
        return False
    return True


def _report_missing_allocation(manager, context, finding):
    """Say how to heal the instance's allocation if none is left.

    A source that came back first removed its own allocation, taking the
    evacuation for done. Only ``nova-manage placement heal_allocations``
    knows every resource an instance consumes; it needs the API database,
    which a compute host does not reach.
    """
    try:
        if findings.allocations(manager, context, finding.instance_uuid):
            return
    except Exception:
        LOG.exception('Could not read the allocations of %s',
                      finding.instance_uuid)
        return
    command = runbook.heal_allocations(finding.instance_uuid).command
    LOG.warning('Evacuation %s to %s: the instance has no allocation left; '
                'run: %s', finding.migration_uuid, finding.host, command,
                instance_uuid=finding.instance_uuid)
    finding.commands.append(command)


def _end_entry(manager, finding):
    """The server is released: end the journal entry (see leftovers)."""
    finding.ended = True
    leftovers.end(manager.driver, finding.entry, finding.instance)
    return True
