"""The threads that wait in GPU decode calls keep off the CPUs that service the GPU's interrupts:
those CPUs are read from /proc/interrupts (vectors of the NVIDIA driver that fired) and each
vector's effective affinity; the thread's affinity changes, the process's does not."""
import os
import threading

import pytest

from penstock import devices

TABLE = """           CPU0       CPU1       CPU2       CPU3
  0:         40          0          0          0   IO-APIC   2-edge      timer
 42:          0          0          0    2604294   PCI-MSIX-0000:00:06.0   0-edge      nvidia
 43:          0          0          0          0   PCI-MSIX-0000:00:06.0   1-edge      nvidia
 44:         45          0          0          0   PCI-MSIX-0000:00:06.0   2-edge      nvidia
 57:          0        912          0          0   PCI-MSIX-0000:00:07.0   0-edge      virtio0-input.0
NMI:          0          0          0          0   Non-maskable interrupts
"""


def _files(tmp_path, routes: dict):
    table = tmp_path / "interrupts"
    table.write_text(TABLE)
    for irq, cpus in routes.items():
        (tmp_path / "irq" / irq).mkdir(parents=True)
        (tmp_path / "irq" / irq / "effective_affinity_list").write_text(cpus + "\n")
    return str(table), str(tmp_path / "irq")


def test_the_cpus_an_nvidia_vector_that_fired_is_routed_to(tmp_path):
    table, folder = _files(tmp_path, {"42": "3", "43": "1", "44": "0-1,3", "57": "1"})
    # vector 43 never fired; the virtio device is not the GPU
    assert devices.gpu_interrupt_cpus(table, folder) == {0, 1, 3}


def test_without_routes_the_cpus_that_serviced_them(tmp_path):
    table, folder = _files(tmp_path, {})
    assert devices.gpu_interrupt_cpus(table, folder) == {0, 3}


def test_no_table_no_cpus(tmp_path):
    assert devices.gpu_interrupt_cpus(str(tmp_path / "missing"), str(tmp_path)) == set()
    (tmp_path / "empty").write_text("")
    assert devices.gpu_interrupt_cpus(str(tmp_path / "empty"), str(tmp_path)) == set()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux thread affinity and two CPUs")
def test_only_the_calling_thread_moves(monkeypatch):
    allowed = os.sched_getaffinity(0)
    busy = min(allowed)
    monkeypatch.setattr(devices, "gpu_interrupt_cpus", lambda: {busy})
    seen = {}

    def thread():
        devices.keep_thread_off_gpu_interrupts()
        seen["thread"] = os.sched_getaffinity(0)
    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()
    assert seen["thread"] == allowed - {busy}
    assert os.sched_getaffinity(0) == allowed


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux thread affinity")
def test_a_thread_is_left_alone_where_too_few_cpus_would_be_left(monkeypatch):
    allowed = os.sched_getaffinity(0)
    monkeypatch.setattr(devices, "gpu_interrupt_cpus", lambda: set(allowed))
    seen = {}
    worker = threading.Thread(target=lambda: (devices.keep_thread_off_gpu_interrupts(),
                                              seen.setdefault("thread", os.sched_getaffinity(0))))
    worker.start()
    worker.join()
    assert seen["thread"] == allowed
