# SPDX-License-Identifier: Apache-2.0

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
