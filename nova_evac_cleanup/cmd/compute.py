# SPDX-License-Identifier: Apache-2.0

"""``nova-compute-evac-cleanup``: nova-compute with the evacuation cleanup."""

import sys

import nova_evac_cleanup
from nova_evac_cleanup.cmd import audit

PROG = 'nova-compute-evac-cleanup'


def main():
    args = sys.argv[1:]  # nova.cmd.compute.main parses them
    if '--version' in args:
        print(audit.version_line(PROG))
        return 0
    if '-h' in args or '--help' in args:  # nova's has no description
        print('%s: nova-compute with the evacuation cleanup of\n'
              'nova-evac-cleanup (see nova-evac-cleanup --help). It takes '
              'the\narguments and configuration files of nova-compute:\n' %
              PROG, flush=True)
    # First, as nova-compute: it sets nova's concurrency mode up.
    from nova.cmd import compute

    nova_evac_cleanup.install()
    return compute.main()
