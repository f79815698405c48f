"""Batches of jobs: ``salient-poses batch`` on a local process pool or a Dask cluster
(:mod:`sp_core.batch.run`, :mod:`sp_core.batch.executors`), resumable through the output
folder's manifest (:mod:`sp_core.batch.manifest`), and the in-host batches of Maya and
MotionBuilder (:mod:`sp_core.batch.host`)."""

from sp_core.batch.host import (
    HOST_BATCH_OPTIONS,
    add_host_batch_options,
    host_batch_options,
    host_job,
    run_host_batch,
)
from sp_core.batch.run import (
    SUMMARY_FIELDS,
    batch_jobs,
    collect_inputs,
    reduce_one,
    reduction_row,
    run_batch,
    write_summary,
)

__all__ = ["HOST_BATCH_OPTIONS", "SUMMARY_FIELDS", "add_host_batch_options", "batch_jobs",
           "collect_inputs", "host_batch_options", "host_job", "reduce_one", "reduction_row",
           "run_batch", "run_host_batch", "write_summary"]
