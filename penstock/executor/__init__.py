"""The staged executor: sources in order on one thread, per-sample work on worker threads (or forked
worker processes), batch operators on a GPU stage, ahead of the consumer by ``prefetch_queue_depth``
batches (and two more in the GPU stage when there is one).

Stages (Executor.__init__ makes their threads from its stage table):
  producer thread    sources.next_batch(i) + random draws for batch i   (in iteration order)
  worker threads     for each sample: source.load, then every per-sample operator in graph order, then
                     the per-sample preparation of batch operators (up to Tuning.max_python_workers threads);
                     or, with worker processes, one dispatcher thread that hands the samples to
                     num_threads forked processes doing the same, and stores their results
  GPU stage thread   (pipelines with 'mixed' or 'gpu' operators) the batch operators on whole batches,
                     two batches at a time, each on its own CUDA stream, then the GPU outputs
  decode stage       the threads of the lanes batch operators declare: the blocking calls they hand
                     over (the GPU decoders'), while the GPU stage goes on
  consumer (caller)  waits for batch i, gets Batches; errors raised there, naming the sample's file

Modules: plan (what is worked out once, at build), jobs (the batches in flight, errors, timings),
buffers (output buffers reused), samples (the sample runner), processes (worker processes, the
dispatcher and their messages), shared_ring (arrays from the processes in shared memory), gpu_stage
(the GPU stage and the decode stage's lanes), executor (the stages and the consumer's side).
"""
from penstock.executor.executor import Executor
from penstock.executor.jobs import IterationResult, PipelineError, Skipped
from penstock.executor.plan import Source, Step

__all__ = ["Executor", "IterationResult", "PipelineError", "Skipped", "Source", "Step"]
