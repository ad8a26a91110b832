"""``readers.file``: encoded files and integer labels from a folder tree or a list."""
from __future__ import annotations

import os

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.file_lists import (FILE_EXTENSIONS, _one_list, list_base, list_folder_tree,
                                                   read_file_list)
from penstock.operators.shared.readers import (SAMPLE_READER_ARGS, ShardedReader, read_bytes, sharded_epochs,
                                               shuffle_after_epoch_alone)
from penstock.schema import Arg, OpSchema, require_one_of


FILE_SCHEMA = registry.register_schema(OpSchema(
    name="readers.file",
    class_name="readers.File",
    doc="Reads files as encoded bytes (uint8, 1-D) with an int32 label of shape (1,).\n\n"
        "Give the data one of three ways: ``file_root`` alone, a folder with one sub-folder per class "
        "(labels 0..K-1 in sorted folder order); ``file_list``, a text file of 'path label' lines "
        "(paths relative to file_root); or ``files`` (and optionally ``labels``).",
    args=(
        Arg("file_root", "path", None, "Folder of the data, or the base of relative paths in file_list/files."),
        Arg("file_list", "path", None, "Text file with one 'relative/path label' per line."),
        Arg("files", "paths", None, "Paths of the files (relative to file_root when it is given)."),
        Arg("labels", "ints", None, "One label per entry of files; default 0, 1, 2, ..."),
        Arg("file_filters", "strs", None, "Globs the names of the files in a folder tree match, as DALI's "
            "('*.jpg'; a bare extension, '.jpg', means '*.jpg'). Default: images and audio."),
        Arg("dir_filters", "strs", None, "Globs the names of the class folders match: only those are classes "
            "(labelled in their sorted order). Default: every sub-folder."),
        Arg("case_sensitive_filter", "bool", False, "Match file_filters and dir_filters case-sensitively."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=2,
    input_names=(),
    is_source=True,
    checks=(require_one_of("file_root", "file_list", "files", what="the files to read"),
            lambda static, per_sample: _one_list(static), shuffle_after_epoch_alone),
))


@registry.register("readers.file", "cpu")
class FileReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.sources, self.labels = self._list_files(args)
        base = list_base(args.file_list, args.file_root) if args.file_list is not None else args.file_root
        self.paths = [os.path.join(base, name) if base else name for name in self.sources]
        if not self.paths:
            where = args.file_root or args.file_list or "files"
            raise ValueError(f"readers.file: no files found in '{where}'")
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.file")

    @staticmethod
    def _list_files(args) -> tuple[list, np.ndarray]:
        """(the files as given: relative to file_root, or to a file_list's base; their labels)."""
        root, file_list, files = args.file_root, args.file_list, args.files
        if files is not None:
            paths = list(files)
            labels = list(args.labels) if args.labels is not None else list(range(len(paths)))
            if len(labels) != len(paths):
                raise ValueError(f"readers.file: {len(labels)} labels for {len(paths)} files")
        elif file_list is not None:
            paths, labels = read_file_list(file_list, root)
        elif root is not None:
            paths, labels = list_folder_tree(root, args.file_filters or FILE_EXTENSIONS,
                                             args.case_sensitive_filter, args.dir_filters)
            paths = [os.path.relpath(path, root) for path in paths]
        return paths, np.asarray(labels, dtype=np.int32).reshape(-1, 1)

    def load(self, index, sample: SampleContext) -> tuple:
        return read_bytes(self.paths[index]), self.labels[index]

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.uint8), 1, ""), OutputSpec(np.dtype(np.int32), 1, "", (1,))
