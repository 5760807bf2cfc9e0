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
not on shared storage, and the instance directory was absent right before
spawn and is still on the filesystem it was absent from; disks on
a shared instance directory, RBD or volumes are never removed. The volume
attachments the evacuation made for this host are replaced by reserved ones,
and the ports are never bound from here: the server's source, when its
nova-compute runs this manager, connects the volumes and binds the ports to
itself (as it starts, then once a minute until cinder and neutron say so,
ten times). The original spawn error is always the one
reported. What the cleanup cannot prove its own (a guest whose destroy
failed, files without that proof) is kept, and the next evacuation of the
server to this host is refused before anything is created, with a fault
naming it and the commands that clear it, until an operator removes it.

Disable this to keep nova's own behaviour, for example to keep a failed guest
on this host to debug it. Disabled means hands off everywhere: an evacuation
that fails or is interrupted while the cleanup is disabled records nothing
the start-up sweep could act on, no evacuation is refused, while it is
disabled the sweep only reports, and no failed evacuation's server is given
back its volumes and ports here. Such a guest and its files stay on this
host, through any number of restarts, until an operator removes them.

Possible values:

* True: destroy the guest of a failed evacuation (default).
* False: leave the guest and its files, as nova does; the start-up sweep
  only reports.

Related options:

* ``[DEFAULT] instances_path``: where the removed instance directory lives.
* ``[evacuate_cleanup] sweep_on_start``: the same cleanup for an evacuation
  this host did not live to see fail.
"""),
    cfg.StrOpt(
        'sweep_on_start',
        default='clean',
        choices=[
            ('clean', 'End the evacuations to this host that its own death '
                      'interrupted, when it can prove they are still what '
                      'it left; report everything else.'),
            ('report', 'Log what ``clean`` would do; write nothing.'),
            ('off', 'Do not look for them.'),
        ],
        help="""
End, when this compute service starts, the evacuations its death interrupted.

When this host's nova-compute dies (host reboot, OOM kill, ``kill -9``) while
an instance is being evacuated to it, no exception handler runs: the instance
stays in a rebuild task state on its source host, the migration stays
``pre-migrating`` (or is marked ``completed`` by a source that came back
first), and this host keeps the guest, its disks and its placement
allocation. nova's own start-up checks only look at instances whose host is
this host, so nothing ever ends that evacuation.

Every evacuation to this host leaves a journal entry in ``journal_path`` while
it runs. With ``clean``, right after nova's own start-up checks and before
this host accepts requests, each entry left by a dead process is examined
again and acted on only if the instance's state still names that evacuation:
its migration context names the migration, it is still in the evacuation's
rebuild task state, no other migration of it is in progress and none is
newer. It is then ended as nova ends an evacuation whose spawn raised, one
step after the other: a ``pre-migrating`` migration to ``failed`` (a
``completed`` one is never rewritten), the guest here destroyed, this host's
volume connections released, this host's allocation removed, an instance
fault recorded and, last, the instance set to ERROR with no task state (a
compare-and-swap on the task state). The instance is read again before each
step and left alone if it moved on; the journal entry records each step
done, so an ending killed half-way is finished at the next start (or by
``nova-evac-cleanup audit --delete``). Disks are removed only when the
evacuation found before spawn that the files are not on shared storage and that
the instance directory did not exist, and the directory is still on the
filesystem it was absent from. Anything else (a state reset by an operator, a
newer or running operation, leftovers of evacuations that failed, guests of
instances hosted elsewhere) is only reported, with the commands to end it by
hand; a leftover kept without proof also refuses the next evacuation of the
server to this host. ``nova-evac-cleanup audit`` shows the same on demand.

With ``[evacuate_cleanup] enabled = False`` the sweep only reports, whatever
this option says, and so it does when nova-compute starts without its host
lock (an audit held it for more than 60 seconds, or ``[oslo_concurrency]
lock_path`` is unset or not writable) or without a usable ``journal_path``.

Possible values:

* clean: end what can be proven to be this host's, report the rest
  (default).
* report: log what would be done, write nothing.
* off: do nothing.

Related options:

* ``[evacuate_cleanup] enabled``: the cleanup when spawn fails in the
  process, which this option completes for a process that died.
* ``[evacuate_cleanup] journal_path``: where the journal is kept.
* ``[oslo_concurrency] lock_path``: where nova-compute holds the lock that
  keeps ``nova-evac-cleanup audit --delete`` away while it runs.
"""),
    cfg.StrOpt(
        'journal_path',
        default='$state_path/evacuate_cleanup',
        sample_default='$state_path/evacuate_cleanup',
        help="""
Where this host journals the evacuations it runs, on its local disk.

An entry is written before nova's rebuild code runs for an evacuation to
this host, rewritten just before spawn and after each step of ending the
evacuation, and removed once the evacuation ended with nothing of it left
on this host. It is kept, with the reason, when something is left: files
nova found on shared storage (the server's own), or a leftover the cleanup
could not prove its own, which refuses the next evacuation of the server to
this host until it is removed. An entry of an evacuation still in progress
at start-up is one this host's death interrupted: the proof the start-up
sweep and ``audit --delete`` need before they act. It must be on storage
local to this host, never on a shared instances path.

If it cannot be written (a full disk, a read-only or missing directory), an
error is logged at start-up and for each evacuation, and the cleanup of a
failed spawn still runs from what nova-compute knows in memory; only the
recovery of an evacuation this host's death interrupts, and the refusal of
kept leftovers, are lost while it cannot be written. On a filesystem other
hosts mount (NFS, CephFS, GlusterFS...) a warning is logged at start-up. A
file in it that is not a readable entry of this host is logged and skipped;
the other entries are still read.

Related options:

* ``[evacuate_cleanup] sweep_on_start``
* ``[DEFAULT] state_path``
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
