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

It takes the same arguments and configuration files as ``nova-compute``, so
a deployer only swaps the binary in the service unit: nova's own
``nova.cmd.compute.main`` parses them. Only ``--version`` (this project's
version, and nova's) and ``--help`` (a line saying what it is, before
nova-compute's help) are looked at first.
"""

import sys
import textwrap

import nova_evac_cleanup
from nova_evac_cleanup.cmd import version

PROG = 'nova-compute-evac-cleanup'
DESCRIPTION = (
    '%s: nova-compute with the evacuation cleanup of nova-evac-cleanup, '
    'which destroys what a failed evacuation to this host left and ends '
    'the evacuations its death interrupted. It takes the arguments and '
    'configuration files of nova-compute:' % PROG)


def _options(argv):
    """The arguments before ``--``, where argparse looks for options."""
    return argv[:argv.index('--')] if '--' in argv else argv


def main():
    options = _options(sys.argv[1:])
    if '--version' in options:
        print(version.version_line(PROG))
        return 0
    if '-h' in options or '--help' in options:
        # nova-compute's help has no description: say what this one is.
        print(textwrap.fill(DESCRIPTION) + '\n')
        sys.stdout.flush()
    # Import nova's entry point here, first: importing nova.cmd sets up
    # nova's concurrency mode (threading or eventlet monkey patching) before
    # any other nova module is loaded, as it does for nova-compute.
    from nova.cmd import compute

    nova_evac_cleanup.install()
    return compute.main()
