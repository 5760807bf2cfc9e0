# SPDX-License-Identifier: Apache-2.0

"""Judge what ``tox -e reproduce`` observed.

Pure functions over the dicts :func:`tests.reproduce.story.play`
returns: whether stock nova showed the bug (and whether it was expected to,
for the stage and storage), whether the fixed computes left compute1 clean,
and which manual steps an operator would still need.

It reads the fake libvirt driver's stages, which imports nova: import it
once nova's eventlet monkey patching is done, as
:mod:`tests.reproduce.story`.
"""

from nova_evac_cleanup import runbook
from tests.harness import fake_libvirt
from tests.harness import functional

#: The stages of the fake libvirt driver's spawn whose failure the driver
#: cleans up itself, and the first stage (nothing created yet).
SELF_CLEANING_STAGES = fake_libvirt.SELF_CLEANING_STAGES
FIRST_STAGE = fake_libvirt.STAGES[0]


def stock_expectation(stage, storage):
    """Whether stock nova is expected to show the bug, and why (not).

    Mirrors the expectations of the functional tests for an image-backed
    server.

    :returns: (bool, a sentence)
    """
    if stage == FIRST_STAGE:
        return False, ('a failure at %s happens before compute1 has made '
                       'anything, so even stock nova leaves nothing behind'
                       % stage)
    if stage in SELF_CLEANING_STAGES:
        return False, ('libvirt cleans up a failure at %s itself (it '
                       'undefines the guest and removes what this attempt '
                       'created), so even stock nova leaves nothing behind'
                       % stage)
    if storage == 'shared' and stage != 'wait_for_boot':
        return False, ('on shared storage the instance directory is not '
                       "compute1's own and no guest is left before "
                       'wait_for_boot, so stock nova leaves nothing of '
                       'compute1 behind at %s' % stage)
    return True, ('stock nova leaves what the failed attempt made on '
                  'compute1')


def leftovers(observed):
    """What is left on compute1 itself; a dict of findings, empty if none.

    :param observed: the ``after_failure`` observations of a story
    """
    found = {}
    if observed['domain']:
        found['domain'] = observed['domain']
    if observed['own_dir_exists']:
        found['instance_dir'] = observed['instance_dir']
        found['files'] = observed['own_files']
        found['bytes'] = observed['own_bytes']
    if observed['allocation']:
        found['allocation'] = observed['allocation']
    return found


def retry_outcome(story):
    """How the second evacuation went.

    :returns: one of ``'failed'``, ``'stale-disk'`` (ACTIVE, but on a disk
        of compute1 left by the failed attempt), ``'fresh-disk'`` (ACTIVE on
        a disk this evacuation wrote), ``'shared-disk'`` (ACTIVE on the
        shared disk, unchanged), ``'shared-disk-changed'``, or
        ``'not-run'``
    """
    retry = story.get('retry')
    if not retry:
        return 'not-run'
    if retry['status'] != 'ACTIVE' or retry['host'] != DEST:
        return 'failed'
    if story['storage'] == 'non-shared':
        if (retry['disk_generation'] == retry['spawn_generation'] and
                retry['disk_complete']):
            return 'fresh-disk'
        return 'stale-disk'
    if retry['shared_disk_unchanged']:
        return 'shared-disk'
    return 'shared-disk-changed'


#: nova's default ``[DEFAULT] instances_path``, for the manual steps.
INSTANCES_PATH = '/var/lib/nova/instances'
DEST = functional.DEST


def manual_steps(story):
    """What an operator would still have to do by hand.

    Everything the failed evacuation left on compute1 must go before
    evacuating again; the second evacuation itself is always listed last.
    The commands are those for a real deployment with nova's default
    ``instances_path``.

    :returns: a list of dicts, one per :class:`~nova_evac_cleanup.runbook.
        Step`: ``what``, ``command`` and ``host``
    """
    after = story.get('after_failure')
    if not after:
        return []
    uuid = story['server']['id']
    steps = runbook.cleanup_steps(
        DEST, uuid, story['server']['instance_name'],
        guest=after['domain'],
        instance_dir=('%s/%s' % (INSTANCES_PATH, uuid)
                      if after['own_dir_exists'] else None),
        providers=[after['allocation_provider']] if after['allocation']
        else ())
    steps.append(runbook.Step('evacuate again', 'openstack server evacuate '
                              '--host %s %s' % (DEST, uuid), None))
    return [step._asdict() for step in steps]


def judge_stock(story):
    """Did stock nova show the bug, as expected for the stage/storage?"""
    expected, why = stock_expectation(story['stage'], story['storage'])
    verdict = {'bug_expected': expected, 'expectation': why,
               'bug_reproduced': False, 'leftovers': {},
               'retry': retry_outcome(story),
               'manual_steps': manual_steps(story), 'problems': []}
    if story['error']:
        verdict['problems'].append('the story failed: %s' % story['error'])
        verdict['ok'] = False
        return verdict
    verdict['leftovers'] = leftovers(story['after_failure'])
    verdict['bug_reproduced'] = bool(
        verdict['leftovers'] or
        verdict['retry'] in ('failed', 'stale-disk', 'shared-disk-changed'))
    verdict['ok'] = verdict['bug_reproduced'] == expected
    if not verdict['ok']:
        verdict['problems'].append(
            'stock nova was expected %s the bug here but it %s' % (
                'to show' if expected else 'not to show',
                'did' if verdict['bug_reproduced'] else 'did not'))
    return verdict


def _rbd_console_dir(story, found):
    """Whether the leftover directory is RBD's local console log only.

    On RBD the disks are in the pool; the instance directory on the host
    only holds the console log. nova's libvirt driver keeps that directory
    whenever it destroys a guest without its disks, as the fix must on
    shared block storage, unless ``[workarounds]
    ensure_libvirt_rbd_instance_dir_cleanup`` is set; it holds no data and
    does not disturb a retry.
    """
    return (story['storage'] == 'rbd' and
            set(found.get('files') or ()) <= {'console.log'})


def judge_fixed(story):
    """Did the fixed computes leave compute1 clean and the retry work?"""
    verdict = {'leftovers': {}, 'retry': retry_outcome(story),
               'manual_steps': manual_steps(story), 'problems': []}
    problems = verdict['problems']
    if story['error']:
        problems.append('the story failed: %s' % story['error'])
        verdict['ok'] = False
        return verdict
    after = story['after_failure']
    verdict['leftovers'] = found = leftovers(after)
    if 'domain' in found:
        problems.append('a guest is left on compute1 (%s)' % found['domain'])
    if 'instance_dir' in found and not _rbd_console_dir(story, found):
        problems.append(
            "compute1's own storage still has the instance directory %s "
            '(%d bytes)' % (found['instance_dir'], found['bytes']))
    if 'allocation' in found:
        problems.append('placement still has an allocation against '
                        'compute1')
    if after['placement_audit']['exit_code'] != 0:
        problems.append('placement audit of compute1 reports orphaned '
                        'allocations')
    if after['shared_disk_unchanged'] is False:
        problems.append('the shared disk changed')
    if verdict['retry'] not in ('fresh-disk', 'shared-disk'):
        problems.append('evacuating again did not give an ACTIVE server on '
                        'compute1 with a good disk (%s)' % verdict['retry'])
    verdict['ok'] = not problems
    return verdict


def judge(stories):
    """Judge every run played.

    :param stories: a dict with ``'stock'`` and/or ``'fixed'`` stories
    :returns: a dict with a verdict per run, ``ok`` and ``exit_code``
    """
    verdicts = {}
    if 'stock' in stories:
        verdicts['stock'] = judge_stock(stories['stock'])
    if 'fixed' in stories:
        verdicts['fixed'] = judge_fixed(stories['fixed'])
    ok = all(verdict['ok'] for verdict in verdicts.values())
    return {'verdicts': verdicts, 'ok': ok, 'exit_code': 0 if ok else 1}
