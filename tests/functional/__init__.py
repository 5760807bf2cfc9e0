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

"""Functional tests: real nova in-process on the fake libvirt driver.

Mirrors nova's own functional test package: choose eventlet, as nova's tox
environments do, and monkey patch before anything else is imported.
"""

import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'False')

# nova >= 32.0.0 patches in monkey_patch.patch(); 31.x did when imported.
from nova import monkey_patch  # noqa
getattr(monkey_patch, 'patch', lambda: None)()  # noqa
