# SPDX-License-Identifier: Apache-2.0

"""A real nova deployment on one machine, for the deployment test tier.

nova and placement run as processes on the machine's MariaDB and RabbitMQ,
each simulated compute host has its own libvirtd and QEMU (TCG) in its own
mount, UTS and PID namespace, and small HTTP stand-ins replace glance and
neutron. Used by ``tests/deployment`` (``tox -e deployment``); needs root.
"""
