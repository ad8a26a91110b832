"""Run by tests/pipeline/test_distributed.py under torchrun: each process reads one epoch of a file list through
penstock with no shard arguments (its rank's shard comes from the process group), for each last-batch
policy, all-reducing a value every step as training would, and writes what it got as JSON."""
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from penstock import fn, pipeline_def
from penstock.plugin.pytorch import GenericIterator, LastBatchPolicy


@pipeline_def(num_threads=1, device_id=None, seed=3)
def labels_of(paths):
    _, labels = fn.readers.file(files=paths, labels=list(range(len(paths))), random_shuffle=True, name="Reader")
    return labels


def main(file_list: str, batch_size: int, out_prefix: str) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    paths = open(file_list).read().split()
    report = {}
    for policy in ("PARTIAL", "FILL", "DROP"):
        pipe = labels_of(paths, batch_size=batch_size)
        meta = pipe.reader_meta("Reader")
        iterator = GenericIterator(pipe, ["label"], reader_name="Reader", last_batch_policy=LastBatchPolicy[policy])
        delivered, steps = [[], []], 0
        for epoch in range(2):
            for batch in iterator:
                delivered[epoch].extend(int(label) for label in batch[0]["label"].view(-1))
                step = torch.ones(1)
                dist.all_reduce(step)  # hangs (and times out) if the ranks took different step counts
                steps += 1
            iterator.reset()
        report[policy] = {"delivered": delivered, "steps": steps, "shard_id": meta["shard_id"],
                          "num_shards": meta["number_of_shards"], "length": len(iterator)}
        pipe.close()
    with open(f"{out_prefix}{rank}.json", "w") as handle:
        json.dump(report, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
