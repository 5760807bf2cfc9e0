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
a deployer only swaps the binary in the service unit.
"""

import nova_evac_cleanup


def main():
    # Import nova's entry point here, first: importing nova.cmd sets up
    # nova's concurrency mode (threading or eventlet monkey patching) before
    # any other nova module is loaded, as it does for nova-compute.
    from nova.cmd import compute

    nova_evac_cleanup.install()
    return compute.main()
