"""OpenCV's process-wide settings while pipelines run: claimed by each pipeline that starts, put
back by the last one that stops."""
from __future__ import annotations

import threading

import cv2

_opencv_lock = threading.Lock()
_opencv_claims = 0
_opencv_saved: tuple | None = None  # the settings before the first claim: (threads, log level)


def claim_opencv() -> None:
    """OpenCV as pipelines need it, from now until every claim is released: one thread per call
    (each worker runs one sample at a time; OpenCV's own pool would oversubscribe the cores) and
    quiet (a bad file raises an error naming it; OpenCV's messages on stderr would only repeat
    it). These are process-wide settings: importing penstock leaves them alone, and the last
    release puts back what was there."""
    global _opencv_claims, _opencv_saved
    with _opencv_lock:
        if _opencv_claims == 0:
            _opencv_saved = (cv2.getNumThreads(), _log_level())
            cv2.setNumThreads(1)
            _set_log_level(getattr(cv2.utils.logging, "LOG_LEVEL_ERROR", None))
        _opencv_claims += 1


def release_opencv() -> None:
    global _opencv_claims
    with _opencv_lock:
        _opencv_claims -= 1
        if _opencv_claims == 0 and _opencv_saved is not None:
            threads, level = _opencv_saved
            cv2.setNumThreads(threads)
            _set_log_level(level)


def _log_level():
    logging = getattr(cv2.utils, "logging", None)
    return logging.getLogLevel() if logging is not None else None


def _set_log_level(level) -> None:
    logging = getattr(cv2.utils, "logging", None)
    if logging is not None and level is not None:
        logging.setLogLevel(level)
