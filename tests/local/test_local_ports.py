"""The ports a local run gives its replicas' servers (vertex_trainer.local.cluster.free_ports):
chosen outside the kernel's ephemeral range, so that the seconds between choosing a port and
TensorFlow's gRPC server binding it cannot see the kernel hand it to another socket (a clean
run of the suite once failed so: "Could not start gRPC server")."""

from __future__ import annotations

import socket

from vertex_trainer.local.cluster import ephemeral_range, free_ports


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_ports_are_distinct_free_and_outside_the_ephemeral_range():
    low, high = ephemeral_range()
    assert 0 < low <= high < 65536
    ports = free_ports(6)
    assert len(set(ports)) == 6
    assert all(not (low <= p <= high) and p >= 10000 for p in ports), (ports, low, high)
    assert all(_bindable(p) for p in ports)  # released: the replicas can bind them


def test_a_port_in_use_is_skipped():
    # A range that leaves exactly one port outside it: 65535 (above the real range here, so the
    # kernel never hands it out; only this test binds it).
    only = (10000, 65534)
    assert free_ports(1, ephemeral=only) == [65535]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 65535))
        holder.listen()
        ports = free_ports(2, ephemeral=only)
    assert 65535 not in ports and len(set(ports)) == 2  # the kernel's choice for the rest


def test_with_no_room_outside_the_range_the_kernel_chooses():
    ports = free_ports(3, ephemeral=(1024, 65535))
    assert len(set(ports)) == 3 and all(1024 <= p <= 65535 for p in ports)


def test_the_range_is_read_from_the_kernels_file(tmp_path):
    proc = tmp_path / "ip_local_port_range"
    proc.write_text("40000\t50000\n")
    assert ephemeral_range(str(proc)) == (40000, 50000)
    proc.write_text("garbage\n")
    assert ephemeral_range(str(proc)) == (32768, 65535)  # unreadable: Linux's low, macOS's high end
    assert ephemeral_range(str(tmp_path / "missing")) == (32768, 65535)
