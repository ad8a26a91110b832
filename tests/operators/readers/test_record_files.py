"""The record readers' shared file access (RecordFileReader.read_at): worker threads read while the
pipeline's shutdown closes the descriptors, as happens when a pipeline is let go mid-epoch."""
from __future__ import annotations

import os
import threading
import time

from penstock.operators.readers.record_files import RecordFileReader


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reads_racing_shutdown_all_succeed_and_leave_no_descriptor_open(tmp_path):
    paths = []
    for number in range(40):
        path = tmp_path / f"part{number}.rec"
        path.write_bytes(bytes(range(256)) * 16)
        paths.append(str(path))
    before = open_descriptors()
    for _ in range(20):
        reader = RecordFileReader.__new__(RecordFileReader)
        reader.files = paths
        errors, start = [], threading.Barrier(5)

        def read_many():
            start.wait()
            try:
                for step in range(200):
                    number, offset = step % 40, step % 1000
                    assert reader.read_at(number, offset, 16, "test") == (bytes(range(256)) * 16)[offset:offset + 16]
            except Exception as error:  # noqa: BLE001 (handed to the test's thread)
                errors.append(error)

        threads = [threading.Thread(target=read_many) for _ in range(4)]
        for thread in threads:
            thread.start()
        start.wait()
        time.sleep(0.001)
        reader.shutdown()  # while the threads read: they finish, and close what they opened
        for thread in threads:
            thread.join()
        assert not errors
        reader.shutdown()  # twice is harmless
    assert open_descriptors() == before
