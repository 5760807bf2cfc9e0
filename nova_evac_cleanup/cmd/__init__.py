# SPDX-License-Identifier: Apache-2.0

"""Console scripts."""

import pbr.version


def version_line(prog):
    """What ``--version`` prints: this project's version, and nova's."""
    # nova.version is pbr only: none of nova's services is loaded.
    from nova import version as nova_version

    return '%s %s (nova %s)' % (
        prog, pbr.version.VersionInfo('nova-evac-cleanup').release_string(),
        nova_version.version_string())
