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

"""What an operator runs by hand to end what an evacuation left on a host.

The runbook operators follow today (reset the server's state, ``virsh
destroy`` and ``undefine``, ``rm -rf`` of the instance directory, the
placement allocation, ``heal_allocations``), in one place: the start-up
sweep and ``nova-evac-cleanup audit`` give these steps for what they do
not touch, and the reproduction (``tox -e reproduce``) and the deployment
tier list them as the manual steps stock nova still needs. It imports no
nova: reports use it in processes that never do.
"""

import collections

#: One step: ``what`` names it in a few words (a report's table cell),
#: ``command`` is what to run, ``host`` where to run it (None: wherever the
#: cloud's admin credentials are).
Step = collections.namedtuple('Step', ['what', 'command', 'host'])


def text(step):
    """A step as one line: ``on HOST: COMMAND``, or the command."""
    return ('on %s: %s' % (step.host, step.command) if step.host
            else step.command)


def heal_allocations(instance_uuid):
    """Give the instance back the allocation it lost.

    Only nova-manage knows every resource an instance consumes (ports'
    resource requests, PCI devices); it needs the API database.
    """
    return Step('heal_allocations', 'nova-manage placement heal_allocations '
                '--instance %s' % instance_uuid, None)


def refresh_volumes(host, instance_uuid, volume_ids):
    """Connect a server's volumes on ``host``, its host, by hand.

    ``nova-manage volume_attachment refresh`` wants the server stopped and
    this host's connector; it also disconnects, on the server's host, what
    the mapping's connection info names.

    :returns: the commands, in order
    """
    return (['once nova-compute runs on %s: openstack server set --state '
             'active %s' % (host, instance_uuid),
             'openstack server stop %s' % instance_uuid,
             'on %s: nova-manage volume_attachment get_connector > '
             'connector.json' % host] +
            ['nova-manage volume_attachment refresh %s %s connector.json' % (
                instance_uuid, volume_id) for volume_id in volume_ids] +
            ['openstack server start %s' % instance_uuid])


def evacuate(instance_uuid, host):
    """Evacuate again, the step that follows a cleanup."""
    return Step('evacuate again', 'openstack server evacuate --host %s %s'
                % (host, instance_uuid), None)


def cleanup_steps(host, instance_uuid, domain, task_stuck=False,
                  guest=None, instance_dir=None, shared_with=None,
                  providers=(), heal=False):
    """The steps, in order, that end what an evacuation left on ``host``.

    :param domain: the instance's libvirt domain name
    :param task_stuck: the server is still in a rebuild task state
    :param guest: the guest on ``host``: None, ``'running'`` or
        ``'defined'``
    :param instance_dir: the instance directory on ``host``, when it holds
        files that are to go; None when there is none or when it is on
        storage shared with the instance's host (it holds its disks then)
    :param shared_with: the host the instance is recorded on, when whether
        ``instance_dir`` is on storage shared with it is not known: the
        command then says to check first, since it may hold the only copy
        of the disks
    :param providers: the uuids of ``host``'s resource providers that hold
        an allocation of the instance
    :param heal: the instance has no allocation against its host
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
    if heal:
        steps.append(heal_allocations(instance_uuid))
    return steps
