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

"""Console scripts."""

import pbr.version


def version_line(prog):
    """What ``--version`` prints: this project's version, and nova's."""
    # nova.version is pbr only: none of nova's services is loaded.
    from nova import version as nova_version

    return '%s %s (nova %s)' % (
        prog, pbr.version.VersionInfo('nova-evac-cleanup').release_string(),
        nova_version.version_string())
