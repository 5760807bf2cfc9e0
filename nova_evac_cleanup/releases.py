# SPDX-License-Identifier: Apache-2.0

"""The nova releases the cleanup was written for, and their vTPM hazard.

requirements.txt states the range: pbr writes it in the package's metadata
(``Requires-Dist``), where it is read.
"""

from importlib import metadata

from nova import version
from nova.virt import hardware
from packaging import requirements
from packaging import specifiers
from packaging import version as packaging_version

DISTRIBUTION = 'nova-evac-cleanup'


def supported_range():
    """The nova specifiers of the package's metadata; '' if unreadable."""
    try:
        found = metadata.requires(DISTRIBUTION) or ()
    except metadata.PackageNotFoundError:
        return ''
    return next((str(r.specifier) for r in map(requirements.Requirement, found)
                 if r.name == 'nova'), '')


def release_problem(release=None):
    """Why ``release`` (the installed nova's) is outside the range, or None."""
    release = release or version.version_string()
    supported = supported_range()
    if not supported:
        return ('the nova releases nova-evac-cleanup supports cannot be read '
                'from its package metadata (%s)' % DISTRIBUTION)
    try:
        if specifiers.SpecifierSet(supported).contains(release,
                                                       prereleases=True):
            return None
    except ValueError:
        pass
    return ('nova %s is not one of the releases nova-evac-cleanup was '
            'written and tested for (nova%s)%s' % (
                release, supported, '; it deletes the vTPM secret of an '
                'instance with its disks (bug 2125030): those of an '
                'instance with a vTPM are kept'
                if deletes_vtpm_secret(release) else ''))


def deletes_vtpm_secret(release=None):
    """Whether libvirt's destroy of the disks deletes the vTPM secret.

    Before nova commit 787d2a1300 (bug 2125030; 31.3.0, 32.2.0, 33.0.0);
    an unparsable release counts as one that does.
    """
    try:
        found = packaging_version.Version(
            release or version.version_string()).release[:3]
    except packaging_version.InvalidVersion:
        return True
    return found < (31, 3, 0) or (32, 0, 0) <= found < (32, 2, 0)


def vtpm_hazard(instance):
    """Why the disks of ``instance`` must be kept on this nova, or None.

    Removing them would delete the vTPM secret of the instance, which still
    lives on its source; kept too when the instance cannot be read.
    """
    release = version.version_string()
    if not deletes_vtpm_secret(release):
        return None
    try:
        vtpm = (instance.system_metadata.get('vtpm_secret_uuid') or
                hardware.get_vtpm_constraint(instance.flavor,
                                             instance.image_meta))
    except Exception:
        vtpm = True
    if vtpm:
        return ('the instance has a vTPM, whose secret nova %s deletes with '
                'its disks (bug 2125030)' % release)
    return None
