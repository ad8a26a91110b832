"""The file lists of the readers of files (readers.file, numpy, sequence): a folder tree or a list
file, names matched against globs, and the extensions read by default."""
from __future__ import annotations

import fnmatch
import os
import re

from penstock.schema import ArgError


FILE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm",
                   ".webp", ".gif", ".jp2", ".flac", ".ogg", ".wav")


def _one_list(static: dict) -> None:
    if static.file_list is not None and static.files is not None:
        raise ArgError("give either 'file_list' or 'files', not both")


def name_matcher(patterns, case_sensitive: bool):
    """A test of a file or folder name against globs (a pattern without a wildcard that starts with
    a dot is an extension: '.jpg' means '*.jpg'); None patterns: every name."""
    if patterns is None:
        return lambda name: True
    globs = [pattern if any(mark in pattern for mark in "*?[") or not pattern.startswith(".") else "*" + pattern
             for pattern in patterns]
    if not case_sensitive:
        globs = [pattern.lower() for pattern in globs]
    return lambda name: any(fnmatch.fnmatchcase(name if case_sensitive else name.lower(), pattern)
                            for pattern in globs)


def list_folder_tree(file_root: str, file_filters, case_sensitive: bool, dir_filters=None) -> tuple[list, list]:
    """(paths, labels) of a folder-per-class tree; classes are the sorted sub-folders (those
    dir_filters match), each holding its files (its own sub-folders are not read, as in DALI)."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.file: file_root '{file_root}' is not a folder")
    is_class = name_matcher(dir_filters, case_sensitive)
    classes = sorted(entry.name for entry in os.scandir(file_root) if entry.is_dir() and is_class(entry.name))
    if not classes:
        held = sum(1 for entry in os.scandir(file_root) if entry.is_file())
        matching = f" matching dir_filters {list(dir_filters)}" if dir_filters is not None else ""
        raise ValueError(f"readers.file: file_root '{file_root}' has no class sub-folders{matching} ({held} files "
                         "directly in it); it takes one sub-folder of files per class, or give the files with "
                         "files= or file_list=")
    is_wanted = name_matcher(file_filters, case_sensitive)
    paths, labels = [], []
    for label, class_name in enumerate(classes):  # each class folder's own files: DALI goes no deeper
        folder = os.path.join(file_root, class_name)
        for name in sorted(entry.name for entry in os.scandir(folder) if entry.is_file() and is_wanted(entry.name)):
            paths.append(os.path.join(folder, name))
            labels.append(label)
    return paths, labels


def read_file_list(file_list: str, file_root: str | None, labelled: bool = True) -> tuple[list, list] | list:
    """(names, labels) from a file of 'path label' lines; without ``labelled``, the names of a file
    of one path per line (readers.numpy's). Names are the paths as written; list_base() gives what
    they are relative to."""
    name = "readers.file" if labelled else "readers.numpy"
    try:
        with open(file_list) as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise FileNotFoundError(f"{name}: cannot read file_list '{file_list}': {error.strerror}") from None
    if not labelled:
        return [line for line in lines if line]  # verbatim, spaces included, as DALI reads them
    paths, labels = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        # as DALI parses a line: the digits at its end, after white space, are the label; all before
        # that white space, spaces included, is the path
        match = re.fullmatch(r"(.*\S)\s+(\d+)\s*", line)
        if match is None:
            raise ValueError(f"readers.file: line {number} of '{file_list}' should be 'path label' (a label of "
                             f"digits, after white space), got {line!r}")
        paths.append(match[1])
        labels.append(int(match[2]))
    return paths, labels


def list_base(file_list: str, file_root: str | None) -> str:
    """The folder the paths in a file_list are relative to: file_root, else the list's own."""
    return file_root or os.path.dirname(file_list)
