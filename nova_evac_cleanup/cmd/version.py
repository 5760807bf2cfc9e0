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

"""What ``--version`` prints: this project's version, and nova's beside it.

Both matter to an operator: the cleanup supports some nova releases and not
others (:mod:`nova_evac_cleanup.nova_support`).
"""

import pbr.version

DISTRIBUTION = 'nova-evac-cleanup'


def version_string():
    """This project's version as pbr gives it, e.g. ``0.1.1.dev3``."""
    return pbr.version.VersionInfo(DISTRIBUTION).release_string()


def version_line(prog):
    """``PROG VERSION (nova NOVA_VERSION)``.

    Imports only ``nova.version`` (pbr), none of nova's services.
    """
    from nova import version as nova_version

    return '%s %s (nova %s)' % (prog, version_string(),
                                nova_version.version_string())
