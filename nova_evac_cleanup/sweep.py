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

"""The start-up sweep: what this host finds of its evacuations, and settles.

At start-up, after nova's own ``init_host`` and before the host takes
requests, ``[evacuate_cleanup] sweep_on_start`` decides: ``clean`` settles
each evacuation this host journaled and did not finish (:func:`settle`:
ended by :func:`nova_evac_cleanup.recovery.recover`, or its journal entry
forgotten when nothing of it needs a record), ``report`` only logs, ``off``
does nothing. ``nova-evac-cleanup audit --delete`` settles through the same
:func:`settle`. What is only reported is logged with the commands an
operator would run.
"""

from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import classification
from nova_evac_cleanup import ending
from nova_evac_cleanup import findings
from nova_evac_cleanup import finish
from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from nova_evac_cleanup import recovery

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def sweep(manager, context, mode):
    """Find, log and, with ``mode`` ``clean``, end interrupted evacuations.

    With ``report``, nothing is written anywhere. Never raises: a failure
    is logged and the compute service starts.

    :param mode: ``clean``, ``report`` or ``off``
    :returns: the findings
    """
    if mode == 'off':
        return []
    if mode == 'clean' and not CONF.evacuate_cleanup.enabled:
        LOG.info('[evacuate_cleanup] enabled is False: the start-up sweep '
                 'only reports')
        mode = 'report'
    try:
        found, examined = findings.find(manager, context)
    except Exception:
        LOG.exception('Could not look for interrupted evacuations to %s',
                      manager.host)
        return []
    if not found:
        LOG.info('No interrupted evacuation to %s: examined %d journal '
                 'entries', manager.host, examined)
    for finding in found:
        try:
            _sweep_one(manager, context, finding, mode)
        except Exception:
            LOG.exception('Could not deal with evacuation %s to %s',
                          finding.migration_uuid, manager.host,
                          instance_uuid=finding.instance_uuid)
    return found


def forget(manager, context, finding):
    """Remove the journal entry of an evacuation that needs no record.

    The instance lives here (its directory is its own: the marker goes
    too), or nothing of the evacuation is left on this host. A shared
    directory's files keep the entry: it tells the audit they are the
    server's own.

    :returns: True if the entry was removed
    """
    entry = finding.entry
    if entry is None:
        return False
    if finding.kind == classification.LIVES_HERE:
        # This host may have died between nova's save of the instance here
        # and the end of finish_evacuation.
        finding.done.extend(finish.finish_recorded(
            context, finding.instance_uuid, entry.migration_id))
        ownership.release(entry)
    elif finding.guest or finding.files or finding.allocation_here:
        return False
    journal.remove(entry)
    LOG.info('Evacuation %s to %s: %s; nothing of it needs a record here '
             'any more: forgotten', finding.migration_uuid, manager.host,
             finding.reason, instance_uuid=finding.instance_uuid)
    return True


def settle(manager, context, finding):
    """What ``clean`` does with one finding: end it, or forget it.

    :returns: True if it was ended or forgotten
    """
    if finding.kind in (classification.INTERRUPTED, classification.ENDED):
        return recovery.recover(manager, context, finding)
    if finding.kind == classification.FAILED and finding.entry:
        # nova's handler failed the migration, then this host died before
        # it removed this host's allocation or recorded the fault (the
        # source may have put the server into ERROR since): what it had
        # left to do.
        try:
            if finding.allocation_here and not finding.guest:
                ending.deallocate(manager, context, finding)
                finding.allocation_here = {}
            if finding.entry.error and not _fault_since(context, finding):
                ending.record_fault(manager, context, finding, None, None)
        except Exception as error:
            LOG.exception('Could not end the failed evacuation %s to %s',
                          finding.migration_uuid, manager.host,
                          instance_uuid=finding.instance_uuid)
            finding.errors.append('failed: %s' % error)
            return False
    return forget(manager, context, finding)


def _fault_since(context, finding):
    """Whether the instance has a fault from the evacuation on."""
    fault = objects.InstanceFault.get_latest_for_instance(
        context, finding.instance_uuid)
    return fault is not None and (
        fault.created_at >= finding.migration.created_at)


def _sweep_one(manager, context, finding, mode):
    if mode == 'clean' and settle(manager, context, finding):
        return
    if finding.ended:
        return
    if finding.kind == classification.INTERRUPTED:
        LOG.warning('Evacuation %s to %s is interrupted; %s: %s',
                    finding.migration_uuid, manager.host,
                    'ending it failed, the next start goes on'
                    if mode == 'clean' else 'sweep_on_start=clean would',
                    '; '.join(finding.errors if mode == 'clean'
                              else finding.actions),
                    instance_uuid=finding.instance_uuid)
        return
    if not (finding.left_here() or finding.refuses_evacuations()):
        return
    LOG.warning('Evacuation %s to %s left %s here, kept: %s (%s).%s By hand, '
                'once checked: %s', finding.migration_uuid, manager.host,
                _summary(finding), finding.reason, finding.kind,
                ' It refuses the next evacuation of the server to %s.' %
                manager.host if finding.refuses_evacuations() else '',
                ' && '.join(finding.commands) or 'nothing to do',
                instance_uuid=finding.instance_uuid)


def _summary(finding):
    parts = []
    if finding.guest:
        parts.append('a %s guest' % finding.guest)
    if finding.files:
        parts.append('%d files' % len(finding.files))
    if finding.allocation_here:
        parts.append('an allocation')
    return ', '.join(parts) or 'nothing'
