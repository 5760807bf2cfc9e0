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

"""Reproduce the bug on real nova, stock and fixed, and compare.

* :mod:`.cli`: the ``tox -e reproduce`` command; it prepares the
  process for nova before anything of nova is imported;
* :mod:`.story`: the story, played on real nova in-process;
* :mod:`.verdict`: what the observations mean, and the operator's steps;
* :mod:`.report`: the text, shared with the deployment tier's report.

Only :mod:`.cli` and :mod:`.report` may be imported before nova's eventlet
monkey patching: the others import nova.
"""

from tests.reproduce.cli import main  # noqa: F401
