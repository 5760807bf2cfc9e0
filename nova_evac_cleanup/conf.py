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

"""The ``[evacuate_cleanup]`` options, in one place."""

import copy

from oslo_config import cfg

GROUP = 'evacuate_cleanup'

_opts = [
    cfg.BoolOpt(
        'enabled',
        default=True,
        help="""
Clean up this host when an evacuation to it fails to spawn the guest.

When an instance is evacuated to this host and the virt driver fails to
spawn it, nova puts the instance into ERROR on its original host but leaves
on this host whatever the driver had made: a defined (maybe running) guest,
the instance directory and its disks. The next evacuation of the instance to
this host then fails with ``InstanceExists``, or takes the leftover directory
for shared storage and boots the stale, partial disk.

When enabled, the guest is destroyed right after the failed spawn. Its disks
are removed only when nova had established, before spawning, that they are
not on shared storage; disks on a shared instance directory, RBD or volumes
are never removed. The original spawn error is always the one reported.

Disable this to keep nova's own behaviour, for example to keep a failed guest
on this host to debug it.

Possible values:

* True: destroy the guest of a failed evacuation (default).
* False: leave the guest and its files, as nova does.

Related options:

* ``[DEFAULT] instances_path``: where the removed instance directory lives.
* ``[evacuate_cleanup] sweep_on_start``: the same cleanup for an evacuation
  this host did not live to see fail.
"""),
    cfg.StrOpt(
        'sweep_on_start',
        default='clean',
        choices=[
            ('clean', 'Recover the evacuations to this host that its own '
                      'death interrupted, and clean up their leftovers.'),
            ('report', 'Log what ``clean`` would do; change nothing.'),
            ('off', 'Do not look for them.'),
        ],
        help="""
Recover, when this compute service starts, evacuations its death interrupted.

When this host's nova-compute dies (host reboot, OOM kill, ``kill -9``) while
an instance is being evacuated to it, no exception handler runs: the instance
stays in a rebuild task state on its source host, the migration stays
``pre-migrating`` (or is marked ``completed`` by a source that came back
first), and this host keeps the guest, its disks and its placement
allocation. nova's own start-up checks only look at instances whose host is
this host, so nothing ever recovers them.

With ``clean``, right after nova's own start-up checks and before this host
accepts requests, the evacuations to this host that it interrupted are ended
as nova would have ended them had spawn failed: the guest here is destroyed
(its disks only when the storage was found, before spawn, not to be shared),
this host's allocation is removed, the instance goes to ERROR with no task
state and the migration to ``failed``. Leftovers of evacuations to this host
that already failed, and stale records of interrupted evacuations of
instances that have moved on, are cleaned up as well. Nothing is done to an
instance whose host is this host, nor to an evacuation in progress to
another host. ``nova-evac-cleanup audit`` shows the same on demand.

Choose ``report`` to review what would be done first, in the log, or ``off``
to keep nova's behaviour.

Possible values:

* clean: recover and clean up (default).
* report: log what would be done, change nothing.
* off: do nothing.

Related options:

* ``[evacuate_cleanup] enabled``: the cleanup when spawn fails in the
  process, which this option completes for a process that died.
"""),
]


def register_opts(conf):
    """Register the ``[evacuate_cleanup]`` options on ``conf``."""
    conf.register_opts(_opts, group=GROUP)


def list_opts():
    """Return a list of oslo.config options available in the library.

    The returned list includes all oslo.config options which may be
    registered at runtime by the library. This is what the
    ``oslo.config.opts`` entry point, and so ``oslo-config-generator``,
    uses to write a sample configuration.

    Each element of the list is a tuple. The first element is the name of
    the group under which the list of elements in the second element will
    be registered. A group name of None corresponds to the [DEFAULT] group
    in config files.

    :returns: a list of (group_name, opts) tuples
    """
    return [(GROUP, copy.deepcopy(_opts))]
