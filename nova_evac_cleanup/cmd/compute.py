# SPDX-License-Identifier: Apache-2.0

"""``nova-compute-evac-cleanup``: nova-compute with the evacuation cleanup.

nova's own ``nova.cmd.compute.main`` parses the arguments; only
``--version`` and ``--help`` are looked at first.
"""

import sys
import textwrap

import nova_evac_cleanup
from nova_evac_cleanup import cmd

PROG = 'nova-compute-evac-cleanup'
DESCRIPTION = (
    '%s: nova-compute with the evacuation cleanup of nova-evac-cleanup, '
    'which destroys what a failed evacuation to this host left and ends '
    'the evacuations its death interrupted. It takes the arguments and '
    'configuration files of nova-compute:' % PROG)


def main():
    args = sys.argv[1:]
    options = args[:args.index('--')] if '--' in args else args
    if '--version' in options:
        print(cmd.version_line(PROG))
        return 0
    if '-h' in options or '--help' in options:
        # nova-compute's help has no description.
        print(textwrap.fill(DESCRIPTION) + '\n')
        sys.stdout.flush()
    # First, as nova-compute does: importing nova.cmd sets up nova's
    # concurrency mode before any other nova module is loaded.
    from nova.cmd import compute

    nova_evac_cleanup.install()
    return compute.main()
