# SPDX-License-Identifier: Apache-2.0

"""What an operator runs by hand to end what an evacuation left on a host.

The runbook's steps in one place, for the sweep, the audit, the
reproduction and the deployment tier. It imports no nova: reports use it
in processes that never do.
"""

import collections

#: ``what``: a few words (a report's table cell); ``host``: where to run
#: ``command`` (None: wherever the cloud's admin credentials are).
Step = collections.namedtuple('Step', ['what', 'command', 'host'])


def heal_allocations(instance_uuid):
    """Give the instance back the allocation it lost.

    Only nova-manage knows every resource an instance consumes.
    """
    return Step('heal_allocations', 'nova-manage placement heal_allocations '
                '--instance %s' % instance_uuid, None)


def refresh_volumes(host, instance_uuid, volume_ids):
    """The commands that connect a server's volumes on ``host``, its host.

    ``nova-manage volume_attachment refresh`` wants the server stopped.
    """
    return (['once nova-compute runs on %s: openstack server set --state '
             'active %s' % (host, instance_uuid),
             'openstack server stop %s' % instance_uuid,
             'on %s: nova-manage volume_attachment get_connector > '
             'connector.json' % host] +
            ['nova-manage volume_attachment refresh %s %s connector.json' % (
                instance_uuid, volume_id) for volume_id in volume_ids] +
            ['openstack server start %s' % instance_uuid])


def cleanup_steps(host, instance_uuid, domain, task_stuck=False,
                  guest=None, instance_dir=None, shared_with=None,
                  providers=()):
    """The steps, in order, that end what an evacuation left on ``host``.

    :param task_stuck: the server is still in a rebuild task state
    :param guest: on ``host``: None, ``'running'`` or ``'defined'``
    :param instance_dir: on ``host``, whose files are to go (never one on
        storage shared with the instance's host)
    :param shared_with: the instance's host, when whether ``instance_dir``
        is shared with it is not known (it may hold the only disks)
    :param providers: ``host``'s providers with an allocation of it
    :returns: a list of :class:`Step`; empty when nothing is left
    """
    steps = []
    if task_stuck:
        steps.append(Step('reset-state', 'openstack server set --state '
                          'error %s' % instance_uuid, None))
    if guest == 'running':
        steps.append(Step('virsh destroy+undefine', 'virsh destroy %s; virsh '
                          'undefine --nvram %s' % (domain, domain), host))
    elif guest:
        steps.append(Step('virsh undefine', 'virsh undefine --nvram %s' %
                          domain, host))
    if instance_dir:
        steps.append(Step('rm -rf instance dir', 'rm -rf %s%s' % (
            instance_dir, '  # only after checking it is not on storage '
            'shared with %s: it may be the only copy of the disks' %
            shared_with if shared_with else ''), host))
    steps.extend(Step('remove the allocation', 'openstack '
                      '--os-placement-api-version 1.12 resource provider '
                      'allocation unset --provider %s %s' % (
                          provider, instance_uuid), None)
                 for provider in sorted(providers))
    return steps
