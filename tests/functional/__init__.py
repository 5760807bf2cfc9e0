# SPDX-License-Identifier: Apache-2.0

"""Functional tests: real nova in-process on the fake libvirt driver.

Mirrors nova's own functional test package: choose eventlet, as nova's tox
environments do, and monkey patch before anything else is imported.
"""

import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'False')

# nova >= 32.0.0 patches in monkey_patch.patch(); 31.x did when imported.
from nova import monkey_patch  # noqa
getattr(monkey_patch, 'patch', lambda: None)()  # noqa
