# SPDX-License-Identifier: Apache-2.0

"""The ``[evacuate_cleanup]`` options, in one place."""

import copy

from oslo_config import cfg

GROUP = 'evacuate_cleanup'

_opts = [
    cfg.BoolOpt('enabled', default=True, help="""
Clean up this host when an evacuation to it fails to spawn the guest.

Otherwise nova leaves the guest and its disks here: the next evacuation
fails with ``InstanceExists`` or boots the stale disk. The guest is
destroyed, its disks only if nova found them not shared and their directory
absent before spawn (never RBD, a shared directory or volumes). What is
kept refuses the next evacuation here.

Possible values:

* True: clean up (default); volumes and ports go back to the source.
* False: nova's own behaviour; the start-up sweep only reports.

Related options:

* ``[evacuate_cleanup] sweep_on_start``
"""),
    cfg.StrOpt('sweep_on_start', default='clean', choices=[
        ('clean', 'End the ones it can prove are still what it left; '
                  'report the rest.'),
        ('report', 'Log what ``clean`` would do; write nothing.'),
        ('off', 'Do not look for them.'),
    ], help="""
End, when this compute service starts, the evacuations its death interrupted.

Each one journaled here is ended as a failed spawn is, one recorded step
at a time, while the instance still names it; the rest is reported with
the commands that end it. Without the host lock or a usable
``journal_path``, or with ``enabled = False``, it only reports.

Related options:

* ``[evacuate_cleanup] journal_path``
* ``[oslo_concurrency] lock_path``: the host lock, which keeps
  ``nova-evac-cleanup audit --delete`` away while nova-compute runs.
"""),
    cfg.StrOpt('journal_path', default='$state_path/evacuate_cleanup', help="""
Where this host journals the evacuations it runs: a local directory.

The proof the sweep and ``audit --delete`` need before they act (on NFS,
CephFS and the like a warning is logged). If it cannot be written, the
cleanup of a failed spawn still runs: only the recovery after this host's
death and the refusal of kept leftovers are lost.

Related options:

* ``[evacuate_cleanup] sweep_on_start``
"""),
]


def register_opts(conf):
    conf.register_opts(_opts, group=GROUP)


def list_opts():
    """The options, for the ``oslo.config.opts`` entry point (the sample)."""
    return [(GROUP, copy.deepcopy(_opts))]
