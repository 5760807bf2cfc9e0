# SPDX-License-Identifier: Apache-2.0

"""``nova-compute-evac-cleanup``: nova-compute with the evacuation cleanup."""

import sys
import textwrap

import nova_evac_cleanup
from nova_evac_cleanup.cmd import audit

PROG = 'nova-compute-evac-cleanup'


def main():
    args = sys.argv[1:]  # nova.cmd.compute.main parses them
    options = args[:args.index('--')] if '--' in args else args
    if '--version' in options:
        print(audit.version_line(PROG))
        return 0
    if '-h' in options or '--help' in options:  # nova's has no description
        print(textwrap.fill(
            '%s: nova-compute with the evacuation cleanup of '
            'nova-evac-cleanup (see nova-evac-cleanup --help). It takes the '
            'arguments and configuration files of nova-compute:' % PROG) +
            '\n', flush=True)
    # First, as nova-compute: it sets nova's concurrency mode up.
    from nova.cmd import compute

    nova_evac_cleanup.install()
    return compute.main()
