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
placement allocation, ``heal_allocations``), in one place:

* the start-up sweep and ``nova-evac-cleanup audit`` log these steps for
  what they find but do not touch (:mod:`nova_evac_cleanup.sweep`);
* the reproduction (``tox -e reproduce``) and the deployment tier list
  them as the manual steps stock nova still needs, worked out from what
  they observed
  (:mod:`tests.reproduce.verdict`, ``tests/deployment``).

Nothing here imports nova: the reports use it before nova is imported, or
in processes that never import it.
"""

import collections

#: One step: ``what`` names it in a few words (a report's table cell),
#: ``command`` is what to run, ``host`` where to run it (None: wherever the
#: cloud's admin credentials are).
Step = collections.namedtuple('Step', ['what', 'command', 'host'])


def text(step):
    """A step as one line: ``on HOST: COMMAND``, or the command."""
    if step.host:
        return 'on %s: %s' % (step.host, step.command)
    return step.command


def reset_state(instance_uuid):
    """Tell nova nothing moves the server any more (``reset-state``)."""
    return Step('reset-state',
                'openstack server set --state error %s' % instance_uuid,
                None)


def destroy_guest(host, domain, running=True):
    """End the guest on ``host``: destroy it if it runs, undefine it."""
    if running:
        return Step('virsh destroy+undefine',
                    'virsh destroy %s; virsh undefine --nvram %s'
                    % (domain, domain), host)
    return Step('virsh undefine', 'virsh undefine --nvram %s' % domain, host)


def remove_instance_dir(host, path, shared_with=None):
    """Remove the instance directory on ``host``.

    :param shared_with: the host the instance is recorded on, when whether
        ``path`` is on storage shared with it is not known: the command
        then says to check first, since the directory may hold the only
        copy of the disks
    """
    command = 'rm -rf %s' % path
    if shared_with:
        command += ('  # only after checking it is not on storage shared '
                    'with %s: it may be the only copy of the disks'
                    % shared_with)
    return Step('rm -rf instance dir', command, host)


def unset_allocation(provider, instance_uuid):
    """Remove the instance's allocation against one resource provider."""
    return Step('remove the allocation',
                'openstack --os-placement-api-version 1.12 resource '
                'provider allocation unset --provider %s %s'
                % (provider, instance_uuid), None)


def heal_allocations(instance_uuid):
    """Give the instance back the allocation it lost.

    Only nova-manage knows every resource an instance consumes (ports'
    resource requests, PCI devices); it needs the API database.
    """
    return Step('heal_allocations',
                'nova-manage placement heal_allocations --instance %s'
                % instance_uuid, None)


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
        storage shared with the instance's host (it holds the server's
        disks then)
    :param shared_with: see :func:`remove_instance_dir`
    :param providers: the uuids of ``host``'s resource providers that hold
        an allocation of the instance
    :param heal: the instance has no allocation against the host it is
        recorded on
    :returns: a list of :class:`Step`; empty when nothing is left
    """
    steps = []
    if task_stuck:
        steps.append(reset_state(instance_uuid))
    if guest:
        steps.append(destroy_guest(host, domain, guest == 'running'))
    if instance_dir:
        steps.append(remove_instance_dir(host, instance_dir, shared_with))
    steps.extend(unset_allocation(provider, instance_uuid)
                 for provider in sorted(providers))
    if heal:
        steps.append(heal_allocations(instance_uuid))
    return steps
