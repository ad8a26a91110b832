"""Process-wide settings of the libraries operators call, while pipelines run: claimed by each
pipeline that starts, put back by the last one that stops. OpenCV and the BLAS library under numpy
and scipy each keep a pool of threads per process; each pipeline worker runs one sample at a time,
so those pools would only oversubscribe the cores (a 64 x 257 matrix product per sample, the mel
filter bank's, took 15 ms in two worker threads with OpenBLAS's pool against 0.4 ms without it).
Worker processes are forked while the claim holds, and inherit it."""
from __future__ import annotations

import threading

import cv2

_opencv_lock = threading.Lock()
_opencv_claims = 0
_opencv_saved: tuple | None = None  # the settings before the first claim: (threads, log level)
_blas_limits = None  # threadpoolctl's limits while claimed: they put back the pools' own sizes


def claim_threads() -> None:
    """The libraries as pipelines need them, from now until every claim is released: OpenCV and
    BLAS one thread per call, OpenCV quiet (a bad file raises an error naming it; OpenCV's
    messages on stderr would only repeat it). These are process-wide settings: importing penstock
    leaves them alone, and the last release puts back what was there."""
    global _opencv_claims, _opencv_saved, _blas_limits
    with _opencv_lock:
        if _opencv_claims == 0:
            _opencv_saved = (cv2.getNumThreads(), _log_level())
            cv2.setNumThreads(1)
            _set_log_level(getattr(cv2.utils.logging, "LOG_LEVEL_ERROR", None))
            from threadpoolctl import threadpool_limits
            _blas_limits = threadpool_limits(limits=1, user_api="blas")
        _opencv_claims += 1


def release_threads() -> None:
    global _opencv_claims, _blas_limits
    with _opencv_lock:
        _opencv_claims -= 1
        if _opencv_claims == 0 and _opencv_saved is not None:
            threads, level = _opencv_saved
            cv2.setNumThreads(threads)
            _set_log_level(level)
            if _blas_limits is not None:
                _blas_limits.restore_original_limits()
                _blas_limits = None


def _log_level():
    logging = getattr(cv2.utils, "logging", None)
    return logging.getLogLevel() if logging is not None else None


def _set_log_level(level) -> None:
    logging = getattr(cv2.utils, "logging", None)
    if logging is not None and level is not None:
        logging.setLogLevel(level)
