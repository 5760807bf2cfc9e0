# SPDX-License-Identifier: Apache-2.0

"""The rule's verdict on an evacuation this host journaled, acted on.

The start-up sweep, ``audit --delete`` and the failure handler all
:func:`settle` one the same way: read, judge, then end it, forget it, or
only report it.
"""

from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import ending as endings
from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ownership
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import updates

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def on_start(manager, context, locked):
    """Settle what was journaled, as ``sweep_on_start`` allows; the findings.

    Only reports with the cleanup disabled, without this host's lock (an
    audit may hold it) or a usable journal. Never raises.
    """
    mode = CONF.evacuate_cleanup.sweep_on_start
    host = manager.host
    if mode == 'off':
        return []
    if mode == 'clean' and not CONF.evacuate_cleanup.enabled:
        LOG.info('[evacuate_cleanup] enabled is False: the start-up sweep '
                 'only reports')
        mode = 'report'
    try:
        # The journal is not touched while the cleanup is disabled.
        act = mode == 'clean' and locked and journal.usable(host)
        entries = journal.entries(host)
    except Exception:
        LOG.exception('Could not look for interrupted evacuations to %s', host)
        return []
    if not entries:
        LOG.info('No interrupted evacuation to %s', host)
    found = []
    for entry in entries:
        try:
            found.append(settle(manager, context, entry, act=act))
        except Exception:
            LOG.exception('Could not deal with evacuation %s to %s',
                          entry.migration_uuid, host,
                          instance_uuid=entry.instance_uuid)
    return found


def examine(manager, context, uuid, entry=None, migration_uuid=None):
    """The :class:`~nova_evac_cleanup.rule.Finding` of instance ``uuid``."""
    state = records.read(context, uuid,
                         entry.migration_uuid if entry else migration_uuid)
    here, elsewhere = records.allocations(manager.reportclient, context,
                                          uuid, manager.host)
    path = ownership.instance_path(uuid)
    files = ownership.contents(path)
    owned, why = ownership.proof(entry) if entry else (False, None)
    # A deleted instance is looked for here by its uuid.
    present = guest.state(manager.driver,
                          state.instance or objects.Instance(uuid=uuid))
    return rule.Finding(manager.host, uuid, entry, state, rule.Left(
        present, path, files, here, bool(files and owned), why, elsewhere))


def settle(manager, context, entry, act=True, ending=None):
    """Examine and, with ``act``, do what the verdict says; the finding.

    :param ending: the :class:`~nova_evac_cleanup.ending.Ending` to use
    """
    finding = examine(manager, context, entry.instance_uuid, entry)
    verdict = finding.verdict
    state = finding.state
    if verdict.decision == rule.KEEP or (
            not act and verdict.decision == rule.END):
        LOG.warning('Evacuation %s to %s: %s (%s); %s', entry.migration_uuid,
                    finding.host, verdict.reason, verdict.kind,
                    'kept, by hand once checked: %s' % (
                        ' && '.join(finding.commands()) or 'nothing to do')
                    if verdict.decision == rule.KEEP else
                    'sweep_on_start=clean would end it',
                    instance_uuid=entry.instance_uuid)
    if not act or verdict.decision == rule.KEEP:
        return finding
    if verdict.decision == rule.FORGET and getattr(
            state.instance, 'host', None) == entry.host:
        # What nova's finish_evacuation left (this host may have died in
        # it) is done.
        updates.finish(context, state.instance, state.migration)
    elif verdict.decision == rule.END:
        ending = ending or endings.Ending(manager, context, entry)
        try:
            finding.ended = ending.end(state)
        finally:
            finding.done, finding.errors = ending.done, ending.errors
        if not finding.ended:
            return finding
        ports.report_away(manager, context, state.instance,
                          'evacuation to %s ended' % manager.host)
    leftovers.end(manager.driver, entry, state.instance,
                  forget=verdict.decision == rule.FORGET)
    return finding
