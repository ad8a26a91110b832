"""nvJPEG's hardware decode calls made one after the other by a native thread (csrc/hardware_lane.c).

A Python thread that makes the call must take the interpreter lock back when it returns, before
it can make the next one; while the GPU stage's thread and the thread that feeds the worker
processes run Python, that wait lasts up to a switch interval (5 ms) and the engines idle. The
lane's thread never takes the lock: each batch is described in Python into its ``Job`` (the
nvJPEG state's arrays, and an event recorded after its decode), submitted with a call that keeps
the lock (``quick``), and waited for with one that releases it (``slow``). Where the helper cannot
be built (runtime/native.py), the decoder makes the calls from the executor's decode stage instead.
"""
from __future__ import annotations

import ctypes
from ctypes import c_double, c_int32, c_void_p

from penstock import devices
from penstock.runtime import native
from penstock.kernels.c_library import load_twice

NAME = "hardware_lane"


class Job(ctypes.Structure):
    """penstock_job: one nvJPEG state's batch (the C side's comments say what each field is)."""

    _fields_ = [("state", c_void_p), ("data", c_void_p), ("lengths", c_void_p), ("images", c_void_p),
                ("params", c_void_p), ("stream", c_void_p), ("event", c_void_p), ("count", c_int32),
                ("initialized_for", c_int32), ("status", c_int32), ("cuda_status", c_int32), ("done", c_int32),
                ("reserved", c_int32), ("seconds", c_double)]


class Calls(ctypes.Structure):
    """penstock_lane_calls: nvJPEG's handle and output format, the CUDA context, and the addresses
    of the library functions the lane calls."""

    _fields_ = [("handle", c_void_p), ("output_format", c_int32), ("reserved", c_int32), ("context", c_void_p),
                ("context_set", c_void_p), ("event_query", c_void_p), ("event_synchronize", c_void_p),
                ("event_record", c_void_p), ("initialize", c_void_p), ("decode", c_void_p)]


_SIGNATURES = {
    "penstock_lane_open": [ctypes.POINTER(Calls), ctypes.POINTER(c_int32), c_int32, ctypes.POINTER(c_void_p)],
    "penstock_lane_submit": [c_void_p, ctypes.POINTER(Job)],
    "penstock_lane_wait": [c_void_p, ctypes.POINTER(Job)],
    "penstock_lane_close": [c_void_p],
}


def _libraries():
    """(quick, slow) handles of the built helper, or None."""
    path = native.built(NAME)
    return None if path is None else load_twice(path, _SIGNATURES)


def address(function) -> int:
    """The address of a ctypes function (or of a CFUNCTYPE callback)."""
    return ctypes.cast(function, c_void_p).value


class HardwareLane:
    """The lane's thread, started here on ``cpus`` (empty: wherever this thread may run) with
    ``calls`` (kept alive here: the thread reads them until ``close``). ``driver`` makes the events
    the jobs record (``new_event``, ``destroy_event``); its ``closed()`` is for the lane's owner to call
once those events are destroyed."""

    def __init__(self, calls: Calls, driver, cpus=()):
        libraries = _libraries()
        if libraries is None:
            raise OSError(f"the hardware decode lane is not built: {native.problem(NAME)}")
        self._quick, self._slow = libraries
        self._calls, self.driver = calls, driver
        cpu_list = sorted(cpus)
        lane = c_void_p()
        if self._slow.penstock_lane_open(ctypes.byref(calls), (c_int32 * len(cpu_list))(*cpu_list), len(cpu_list),
                                         ctypes.byref(lane)) != 0:
            raise OSError("the hardware decode lane's thread could not be started")
        self._lane = lane.value

    def submit(self, job: Job) -> None:
        """Queues the job's decode behind those submitted before (returns at once)."""
        if not self._lane or self._quick.penstock_lane_submit(self._lane, ctypes.byref(job)) != 0:
            raise RuntimeError("the hardware decode lane is closed")

    def wait(self, job: Job) -> None:
        """Returns once the job's decode call has returned; raises where a CUDA driver call failed
        (nvJPEG's own status is left in ``job.status``)."""
        if self._lane:
            self._slow.penstock_lane_wait(self._lane, ctypes.byref(job))
        if job.cuda_status:
            raise RuntimeError(f"the hardware decode lane: a CUDA driver call failed with status {job.cuda_status}")

    def close(self) -> None:
        """Runs the jobs already submitted and stops the thread."""
        if self._lane:
            lane, self._lane = self._lane, None
            self._slow.penstock_lane_close(lane)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class _Driver:
    """The CUDA driver's calls the lane makes (by address) and those made here: the device's primary
    context (retained while the lane runs) and the jobs' events (runtime.pinned's)."""

    def __init__(self, device_id: int):
        from penstock.runtime import pinned
        self._events = pinned._driver_calls()
        if self._events is None:
            raise OSError("the CUDA driver cannot be loaded")
        self._library = library = ctypes.CDLL("libcuda.so.1")
        for name, arguments in (("cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                                ("cuDevicePrimaryCtxRetain", [ctypes.POINTER(c_void_p), ctypes.c_int]),
                                ("cuDevicePrimaryCtxRelease_v2", [ctypes.c_int])):
            function = getattr(library, name)
            function.argtypes, function.restype = arguments, ctypes.c_int
        device = ctypes.c_int()
        self.context = c_void_p()
        if library.cuDeviceGet(ctypes.byref(device), device_id) or \
                library.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device):
            raise OSError(f"the CUDA driver has no context for device {device_id}")
        self._device = device.value

    def addresses(self) -> dict:
        return {field: address(getattr(self._library, name)) for field, name in (
            ("context_set", "cuCtxSetCurrent"), ("event_query", "cuEventQuery"),
            ("event_synchronize", "cuEventSynchronize"), ("event_record", "cuEventRecord"))}

    def new_event(self) -> int:
        return self._events.new_event().value

    def destroy_event(self, event: int) -> None:
        self._events.destroy_event(event)

    def closed(self) -> None:
        if self._device is not None:
            self._library.cuDevicePrimaryCtxRelease_v2(self._device)
            self._device = None


def for_nvjpeg(handle: int, output_format: int, nvjpeg_calls, device_id: int) -> HardwareLane | None:
    """A lane for nvJPEG's hardware decoder ``handle`` on CUDA device ``device_id``, making the
    decode calls of ``nvjpeg_calls`` (the library's functions); None where the helper is not built
    (``native.problem``) or the driver cannot be reached, and the decoder makes its calls from Python."""
    if native.built(NAME) is None:
        return None
    try:
        driver = _Driver(device_id)
    except (OSError, AttributeError):
        return None
    calls = Calls(handle=handle, output_format=output_format, context=driver.context.value,
                  initialize=address(nvjpeg_calls.nvjpegDecodeBatchedInitialize),
                  decode=address(nvjpeg_calls.nvjpegDecodeBatchedEx), **driver.addresses())
    try:
        return HardwareLane(calls, driver, devices.cpus_off_gpu_interrupts() or ())
    except OSError:
        driver.closed()
        return None
