"""Checks of the nova patch series in ``patches/``.

The shell scripts check the series on nova's releases; the design matrix
(``test_design_matrix``) runs real nova in-process like the functional
tests, whose package monkey patches first: import it before anything else.
"""

from tests import functional  # noqa
