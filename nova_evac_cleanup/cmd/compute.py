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
