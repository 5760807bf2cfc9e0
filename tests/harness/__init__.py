"""The harness the functional tests, the reproduction, the explorer and the
benchmarks share: real nova in-process on a libvirt-like fake driver.

Not installed: it lives in the test tree, beside what uses it.
"""
