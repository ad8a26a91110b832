"""The staged executor: sources in order on one thread, per-sample work on a thread pool, ahead of
the consumer by ``prefetch_queue_depth`` batches.

Stages, written down once:
  producer thread   sources.next_batch(i) + random draws for batch i   (in iteration order)
  worker threads    for each sample: source.load, then every per-sample operator in graph order
  consumer (caller) waits for batch i, gets Batches; errors raised there, naming the sample's file
"""
from penstock.executor.executor import Executor, IterationResult, PipelineError, Step

__all__ = ["Executor", "IterationResult", "PipelineError", "Step"]
