# SPDX-License-Identifier: Apache-2.0

"""127.0.0.1 of the compute hosts' network namespaces, forwarded to ours.

::

    python -m tests.deployment.tier.forward --netns PATH [--netns PATH] \\
        --port N [--port N ...]

Each compute host runs in its own network namespace (its nova-compute,
libvirtd and QEMU must share one with its ovs-vswitchd: ML2/OVN has os-vif
create the guest's tap device, which QEMU then opens). The services they
use listen on 127.0.0.1 of the root namespace: the machine's MariaDB and
RabbitMQ, which only listen there, and the tier's own APIs and Ceph. This
process listens on 127.0.0.1:N inside each namespace and connects each
connection to 127.0.0.1:N of the namespace it was started in: every
configuration file says 127.0.0.1, in a host's namespace as outside.

Why a forwarder rather than routed addresses: MariaDB and RabbitMQ are the
machine's and listen on 127.0.0.1 only, and one address for every client
keeps one configuration for each service. The listening sockets are made
inside each namespace (``setns``), then the process returns to its own
namespace, where it connects: a socket stays in the namespace it was made
in.
"""

import argparse
import asyncio
import sys

from tests.deployment.tier import netns


def listeners(netns_paths, ports):
    """Listening sockets on 127.0.0.1:port in each namespace."""
    socks = []
    for path in netns_paths:
        for port in ports:
            s = netns.listening_socket(port, path)
            s.setblocking(False)
            socks.append((path, port, s))
    return socks


async def _pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass


def _handler(port):
    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(
                '127.0.0.1', port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer),
                             _pipe(up_reader, writer))
    return handle


async def serve(socks):
    servers = []
    for path, port, sock in socks:
        servers.append(await asyncio.start_server(_handler(port),
                                                  sock=sock))
    sys.stdout.write('forwarding 127.0.0.1:{%s} of %s\n' % (
        ','.join(sorted({str(p) for _, p, _ in socks})),
        ', '.join(sorted({path for path, _, _ in socks}))))
    sys.stdout.flush()
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--netns', action='append', required=True)
    parser.add_argument('--port', action='append', type=int, required=True)
    args = parser.parse_args(argv)
    socks = listeners(args.netns, args.port)
    asyncio.run(serve(socks))


if __name__ == '__main__':
    sys.exit(main())
