# SPDX-License-Identifier: Apache-2.0

"""Unit tests for the project, against nova's real ComputeManager.

Mirrors nova's own unit test package: monkey patch first, then register the
versioned objects.
"""

# nova >= 32.0.0 patches in monkey_patch.patch(); 31.x did when imported.
from nova import monkey_patch  # noqa
getattr(monkey_patch, 'patch', lambda: None)()
from nova import objects  # noqa

objects.register_all()
