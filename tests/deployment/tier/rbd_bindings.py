# SPDX-License-Identifier: Apache-2.0

"""Make Debian's ``rados`` and ``rbd`` modules importable in this venv.

::

    python -m tests.deployment.tier.rbd_bindings

Ceph's Python bindings are not on PyPI; Debian's ``python3-rados`` and
``python3-rbd`` build them for the system Python. cinder's RBD driver and
nova's RBD image backend import them: this links the two extension
modules into the running interpreter's site-packages (tox runs it in the
deployment env). They load only in an interpreter of the same version as
the system's (3.11 on Debian 12); anything else fails here, by name.
"""

import glob
import importlib
import os
import sys
import sysconfig

SYSTEM = '/usr/lib/python3/dist-packages'


def main():
    site = sysconfig.get_paths()['platlib']
    tag = 'cpython-%d%d' % sys.version_info[:2]
    for name in ('rados', 'rbd'):
        found = glob.glob(os.path.join(SYSTEM, '%s.%s-*.so' % (name, tag)))
        if not found:
            sys.exit('rbd_bindings: no %s module for %s in %s (python3-%s '
                     'is for the system Python)' % (name, tag, SYSTEM, name))
        link = os.path.join(site, os.path.basename(found[0]))
        if not os.path.lexists(link):
            os.symlink(found[0], link)
        importlib.import_module(name)
    print('rbd_bindings: rados and rbd importable from %s' % site)


if __name__ == '__main__':
    main()
