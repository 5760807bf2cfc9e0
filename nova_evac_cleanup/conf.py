# SPDX-License-Identifier: Apache-2.0

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

nova leaves on the destination of a failed evacuation what the driver had
made: the guest, the instance directory and its disks; the next evacuation
there fails with ``InstanceExists`` or boots the stale disk. When enabled,
the guest is destroyed right after the failed spawn, with its disks only if
nova found them not shared and their directory absent before spawn (never
a shared instance directory, RBD or volumes), and the original error is
re-raised. The volumes and ports go back to the server's source, which
connects and binds them when its nova-compute runs this manager. What
cannot be proven the evacuation's own is kept, and refuses the next
evacuation of the server here until an operator removes it.

Disabled means hands off everywhere: nothing is journaled, refused or given
back, and the start-up sweep only reports.

Possible values:

* True: destroy the guest of a failed evacuation (default).
* False: nova's own behaviour.

Related options:

* ``[evacuate_cleanup] sweep_on_start``
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

An evacuation cut by this host's death leaves the instance in a rebuild
task state on its source and the guest, disks and allocation here; nova's
start-up never looks at it. With ``clean``, before this host accepts
requests, each evacuation journaled here and not finished is ended as a
failed spawn is, one recorded step after the other, only while the
instance's state still names it (no newer operation); the server is
released last. Anything else is reported with the commands to end it by
hand (``nova-evac-cleanup audit`` shows the same). Without this host's lock
or a usable ``journal_path``, or with ``enabled = False``, it only reports.

Related options:

* ``[evacuate_cleanup] journal_path``
* ``[oslo_concurrency] lock_path``: the lock that keeps
  ``nova-evac-cleanup audit --delete`` away while nova-compute runs.
"""),
    cfg.StrOpt(
        'journal_path',
        default='$state_path/evacuate_cleanup',
        sample_default='$state_path/evacuate_cleanup',
        help="""
Where this host journals the evacuations it runs, on its local disk.

One entry per evacuation to this host, from before nova's rebuild code runs
until nothing of it is left here: the proof the start-up sweep and ``audit
--delete`` need before they act, and the record of a kept leftover that
refuses the next evacuation. It must be local to this host (a warning is
logged on NFS, CephFS and the like). If it cannot be written, an error is
logged and the cleanup of a failed spawn still runs from memory; only the
recovery after this host's death and the refusal of kept leftovers are
lost.

Related options:

* ``[evacuate_cleanup] sweep_on_start``
"""),
]


def register_opts(conf):
    """Register the ``[evacuate_cleanup]`` options on ``conf``."""
    conf.register_opts(_opts, group=GROUP)


def list_opts():
    """The options, for the ``oslo.config.opts`` entry point (the sample)."""
    return [(GROUP, copy.deepcopy(_opts))]
