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
